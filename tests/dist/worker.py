"""A worker of a test job (see job.py): pushes deterministic gradients, saves everything it pulls.

Spec fields: store ('dist_sync' or 'dist_async'), keys ([[key, shape], ...]), steps, scale, seed,
compression (params or null; the codec from the first step unless they give 'warmup_steps'), turns (each step the workers push and pull one after the other, in rank
order), final_pull (after the steps, a barrier and a pull saved as <key>/final), zero_init (initial
values zero instead of random),
key_scales (a factor per key for its gradients), optimizer (null or [name, params]), lists (push/pull all keys in one call), pull_first (pull
before any push), groups (init's: lists of keys, one message each).  Faults: bad_compression (params every worker first tries; the ValueError is
saved), compression_by_rank ({rank: params}), corrupt_at_step (rank 1 pushes a payload of the wrong
size to the first key), die_at_step (rank 1 kills itself), partial_push (push only the first key).
save_states_at / load_states_at: steps after which the servers' optimizer states are saved / loaded.
checkpoint_at: the step after which this worker saves its residuals (OUT/ckpt.rank<r>.residuals), the servers
their optimizer states (OUT/ckpt.opt.server<s>) and rank 0 the weights pulled (OUT/ckpt.weights.npz);
nonfinite: [[rank, step, key index, flat position, "nan" or "inf"], ...]: that value in that gradient.
regroup_at: [step, groups]: after that step's pulls, the keys regrouped (kv.regroup(groups)).
grid: gradients rounded to multiples of 1/grid (sums of 3 or more workers exact in any order).
resume_from: such a checkpoint's folder and step: a new job initializes the keys with its weights, pulls
them, loads the residuals and the servers' states and goes on from the next step.
mkldnn_layout: before every pull of weights (pull_first, or each pull with an optimizer on the servers)
the 4-d outputs are put into MKL-DNN's own layout, as an inference-mode Gluon forward leaves weights.
scenarios: a list of such specs run one after the other on the same store, each on keys of its own (the
results of scenario i saved as 'i:<name>'); several checks that need the same processes share one job.
"""
import json
import os
import signal
import sys

if __name__ == "__main__":  # a job's process (not a test importing this file): MXNet without scipy
    import without_scipy  # noqa: F401  (before mxnet: see its docstring)
import numpy as np
import mxnet as mx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mxnet_gc  # noqa: E402
from job import each_scenario, from_the_first_step, gradient, initial_value  # noqa: E402

if __name__ == "__main__":  # a job's worker: its lines on standard output, where the tests read them
    mxnet_gc.log.show()


def main():
    spec = json.load(open(sys.argv[1]))
    name = "gc_" + spec.get("store", "dist_sync")  # the name mxnet_gc registers in MXNet
    kv = mx.kv.create(name)
    assert isinstance(kv, mxnet_gc.kvstore.DistSyncStore) and kv.type == name
    saved = each_scenario(spec, lambda wire, named: run(kv, wire, named, spec["out"]))  # (one store for all)
    np.savez(os.path.join(spec["out"], "rank%d.npz" % kv.rank), **saved)
    print("worker rank %d saved %d arrays" % (kv.rank, len(saved)))


def run(kv, spec, named, out):
    """Runs one scenario (``spec``, as sent; ``named``: the same with the keys its results are saved under);
    returns {name: array}."""
    rank = kv.rank
    keys = [k for k, _ in spec["keys"]]
    names = [k for k, _ in named["keys"]]
    shapes = [tuple(s) for _, s in spec["keys"]]
    saved = {}
    if spec.get("bad_compression"):
        try:
            kv.set_gradient_compression(spec["bad_compression"])
        except ValueError as e:
            saved["bad_compression_error"] = np.array(str(e))
    if spec.get("async_refusals"):  # what dist_async refuses, each with a ValueError
        for what, call in (("compressed_pull", lambda: kv.set_gradient_compression(
                                {"type": "4bit", "thresholds": "medium", "compressed_pull": True})),
                           ("push_without_optimizer", lambda: (kv.init("probe", mx.nd.zeros(3)),
                                                               kv.push("probe", mx.nd.ones(3))))):
            try:
                call()
            except ValueError as e:
                saved["%s_error" % what] = np.array(str(e))
    compression = from_the_first_step(spec.get("compression_by_rank", {}).get(str(rank), spec.get("compression")))
    if compression:
        kv.set_gradient_compression(compression)
    if spec.get("optimizer"):
        name, params = spec["optimizer"]
        kv.set_optimizer(mx.optimizer.create(name, **params))
    resume = spec.get("resume_from")
    if resume:
        with np.load(os.path.join(resume[0], "ckpt.weights.npz")) as weights:
            initial = [weights[str(k)] for k in keys]
    else:
        initial = [np.zeros(s) if spec.get("zero_init") else initial_value(spec["seed"], i, s)
                   for i, s in enumerate(shapes)]
    kv.init(keys, [mx.nd.array(v) for v in initial], groups=spec.get("groups"))
    outs = [mx.nd.zeros(s) for s in shapes]
    if spec.get("partial_push"):  # with shared messages, one key alone cannot be pushed
        try:
            kv.push(keys[0], mx.nd.zeros(shapes[0]))
        except ValueError as e:
            saved["partial_push_error"] = np.array(str(e))
    if spec.get("pull_first"):
        to_mkldnn_layout(outs, saved, spec)
        kv.pull(keys, out=outs)
        for k, o in zip(names, outs):
            saved["%s/init" % k] = o.asnumpy()
    if resume:
        kv.load_residuals(os.path.join(resume[0], "ckpt.rank%d.residuals" % rank))
        kv.load_optimizer_states(os.path.join(resume[0], "ckpt.opt"))
    for step in range(resume[1] + 1 if resume else 0, spec["steps"]):
        scales = spec.get("key_scales") or [1.0] * len(keys)
        grads = [mx.nd.array(gradient(spec["seed"], rank, step, i, s, spec["scale"] * scales[i], spec.get("nonfinite"),
                                      spec.get("grid"))) for i, s in enumerate(shapes)]
        if step == spec.get("die_at_step") and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        if step == spec.get("corrupt_at_step"):
            save_after_corrupt_push(kv, keys, outs, saved, spec)
            break
        if spec.get("optimizer"):
            to_mkldnn_layout(outs, saved, spec)
        if spec.get("turns"):  # one worker after the other, in rank order
            for turn in range(kv.num_workers):
                if turn == rank:
                    kv.push(keys, grads)
                    kv.pull(keys, out=outs)
                kv.barrier()
        elif spec.get("lists"):
            kv.push(keys, grads)
            kv.pull(keys, out=outs)
        else:
            for k, g, o in zip(keys, grads, outs):
                kv.pushpull(k, g, out=o)
        for k, o in zip(names, outs):
            saved["%s/%d" % (k, step)] = o.asnumpy()
        if step == (spec.get("regroup_at") or [None])[0]:
            kv.regroup(spec["regroup_at"][1])
        if step == spec.get("save_states_at"):
            kv.save_optimizer_states(os.path.join(out, "states"))
        if step == spec.get("load_states_at"):
            kv.load_optimizer_states(os.path.join(out, "states"))
        if step == spec.get("checkpoint_at"):
            kv.save_residuals(os.path.join(out, "ckpt.rank%d.residuals" % rank))
            kv.save_optimizer_states(os.path.join(out, "ckpt.opt"), dump_optimizer=True)
            if rank == 0:
                np.savez(os.path.join(out, "ckpt.weights.npz"), **{str(k): o.asnumpy() for k, o in zip(keys, outs)})
    if spec.get("final_pull"):  # the values once every worker's pushes are in
        kv.barrier()
        kv.pull(keys, out=outs)
        for k, o in zip(names, outs):
            saved["%s/final" % k] = o.asnumpy()
    saved["compression_config"] = np.array(json.dumps(kv.compression_config))
    return saved


def to_mkldnn_layout(arrays, saved, spec):
    """With spec['mkldnn_layout'], uses each 4-d array as the weight of inference-mode convolutions until
    MKL-DNN has reordered the array itself into its blocked layout (it may leave it alone the first
    time).  Counts in ``saved`` the arrays that a flat view can then no longer read (the condition the
    store must cope with)."""
    if not spec.get("mkldnn_layout"):
        return
    for w in (a for a in arrays if a.ndim == 4):
        n, c, h, k = w.shape
        for _ in range(3):
            mx.nd.Convolution(mx.nd.ones((1, c, h + 1, k + 1)), w, kernel=(h, k), num_filter=n, no_bias=True)
            probe = mx.nd.zeros(1)
            try:
                w.reshape(-1)[0:1].copyto(probe)
                probe.wait_to_read()
            except mx.base.MXNetError:
                saved["mkldnn_layouts"] = saved.get("mkldnn_layouts", 0) + 1
                break


def corrupt_payload(kind, message):
    """What a faulty rank 1 pushes instead of its payload (``kind``: spec['corrupt_kind'])."""
    words = message.payload_words if message.coded else message.size
    if kind == "size":
        return mx.nd.zeros(words + 3)
    if kind in ("float16", "float64", "int32"):  # the payload's element count, another dtype
        return mx.nd.array(np.arange(words) % 7, dtype=kind)
    if kind == "topk_count":  # a layerwise_topk payload claiming more values than it can hold
        payload = np.zeros(words, np.float32)
        payload[:1] = np.array([words], np.int32).view(np.float32)
        return mx.nd.array(payload)
    if kind == "topk_index":  # one value at an index past the end of the key
        payload = np.zeros(words, np.float32)
        payload[:2] = np.array([1, 10 ** 6], np.int32).view(np.float32)
        payload[1 + (words - 1) // 2] = 1.0
        return mx.nd.array(payload)
    raise ValueError(kind)


def save_after_corrupt_push(kv, keys, outs, saved, spec):
    """Rank 1 pushes a corrupt payload (spec['corrupt_kind'], default a wrong size) for the first key;
    every worker saves the error it gets and the value it pulls next; then one good round follows."""
    message = kv.chunks_of(keys[0])[0].message
    kv.barrier()  # every worker is done with init (whose status check would otherwise see the error first)
    if kv.rank == 1:
        corrupt = corrupt_payload(spec.get("corrupt_kind", "size"), message)
        kv.push_payload(message, corrupt)  # as a faulty process would
    else:
        kv.push(keys[0], mx.nd.ones(outs[0].shape))
    try:
        kv.pull(keys[0], out=outs[0])
    except RuntimeError as e:
        saved["corrupt_error"] = np.array(str(e))
    kv.pull(keys[0], out=outs[0])
    saved["%s/after_corrupt" % keys[0]] = outs[0].asnumpy()
    if spec.get("corrupt_kind", "size") in ("topk_count", "topk_index"):  # the faulty process can go on
        kv.push(keys[0], mx.nd.ones(outs[0].shape) * (1 + kv.rank))  # (MXNet's client refuses another size)
        kv.pull(keys[0], out=outs[0])
        saved["%s/next_round" % keys[0]] = outs[0].asnumpy()


if __name__ == "__main__":
    main()
