"""A worker of tools/fault_matrix.py: one misbehaving (or unusual but legal) use of a store.

    fault_worker.py CASE SETTINGS_JSON OUT

Started by mxnet_gc's launcher (settings "store": "dist_sync") or by horovodrun ("horovod").  Each case
saves what every worker pushed and pulled to OUT/rank<r>.npz (the matrix checks it with numpy), or is
expected to fail with a clear error:

- keys:     per compression of "compressions", init str keys and int keys (same and different sizes,
            2-D and 1-D), each worker listing them in its own order; push and pull "steps" steps of
            values each codec carries exactly (+-level or 0, so every sum is exact)
- calls:    the same keys, one init call per key, in each worker's own order (must fail)
- shapes:   rank 1 initializes a key with another shape ("shape" vs (10, 10); must fail)
- missing:  rank 1 never pushes key 'k' (must fail on every worker, naming 'k' and rank 1); with "once",
            only at step 1 (must fail before any pull pairs two steps, naming 'k')
- double:   rank 1 pushes key 'a' twice before its pull at step 1 (must fail on rank 1, naming the rule)
- skip:     rank 1 pulls key 'a' at step 1 without pushing it (must fail on rank 1, naming the rule)
- compress-one: only rank 0 sets a compression before init (must fail on every worker: different calls)
- leave:    the first worker to start exits 0 at once (must fail, naming it)
- ends:     rank 1 exits 0 after its first step (must fail: rank 0 says rank 1 ended)
- inf:      'lgc' through all its phases with an inf in a worker's gradient now and then
- switch:   a 4bit residual, then the compression set to none: the next push sends what was owed
- save / load: a Gluon trainer (optimizer on the servers, or 'lgc') saves a checkpoint; a job with
            another number of servers loads it (must fail at load, naming the server count), or one with
            a pickle planted in a file of it (must fail at load, naming the file, running nothing)
- stranger: the first worker to start drops the job's secret and acts as a process outside the job that
            took a worker's place: it sends the servers commands (an optimizer as MXNet pickles it, a forged
            signature) and holds its place (the servers must refuse the commands, run nothing and end the job)
"""
import base64
import json
import os
import sys
import time

import numpy as np

# MXNet imports scipy when it is installed, for features no case uses; hiding it saves about 0.45 s of CPU
# per process (the launcher's servers do the same: mxnet_gc/kvstore/ps/server_start.py)
sys.modules.setdefault("scipy", None)
import mxnet as mx  # noqa: E402

import mxnet_gc
from planted import Planted  # (tools/, this script's folder)

LEVEL = {"none": 1.0, "2bit": 0.5, "gc_2bit": 0.5, "4bit": 1.0, "4bit-cpull": 1.0, "layerwise_topk": 1.0, "lgc": 1.0}
PARAMS = {"none": {"type": "none"},
          "2bit": {"type": "2bit", "threshold": 0.5},
          "gc_2bit": {"type": "gc_2bit", "threshold": 0.5, "warmup_steps": 0},
          "4bit": {"type": "4bit", "thresholds": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0], "warmup_steps": 0},
          "4bit-cpull": {"type": "4bit", "thresholds": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0], "warmup_steps": 0,
                         "compressed_pull": True},  # (on Horovod: the compressed allreduce)
          "layerwise_topk": {"type": "layerwise_topk", "density": 1.0, "warmup_steps": 0},
          "lgc": {"type": "lgc", "density": 0.1, "dense_steps": 10}}  # (its dense phase: exact sums)


def section_keys(section):
    """The keys of one section: [(key, shape)], str keys then int keys, in one canonical order."""
    s = "s%d_" % section
    return ([(s + "a", (4, 5)), (s + "b", (4, 5)), (s + "d", (6, 2)), (s + "c", (33,))],
            [(1000 * section + 7, (3, 3)), (1000 * section + 3, (3, 3)), (1000 * section + 5, (17,))])


def my_order(pairs, rank):
    """The order a worker lists its keys in: rank 0 as given, the others each differently."""
    pairs = list(pairs)
    return pairs[::-1] if rank % 2 else pairs[1:] + pairs[:1] if rank else pairs


def values(level, index, shape, rank, step):
    """+-level or 0 per value, different per key, rank and step."""
    j = np.arange(int(np.prod(shape))).reshape(shape)
    return (level * (((j + 2 * index + rank + step) % 3) - 1)).astype(np.float32)


def keys_case(kv, settings, saved):
    rank = kv.rank
    for section, name in enumerate(settings["compressions"]):
        kv.set_gradient_compression(PARAMS[name])
        calls = section_keys(section)
        for pairs in calls:
            mine = my_order(pairs, rank)
            kv.init([k for k, _ in mine], [mx.nd.zeros(s) for _, s in mine])
        pairs = calls[0] + calls[1]
        if name == "lgc":
            saved["%s/coded" % name] = np.array(json.dumps(sorted(kv.lgc.coded, key=str)))
        for step in range(settings["steps"]):
            mine = my_order(pairs, rank)
            pushed = [values(LEVEL[name], pairs.index((k, s)), s, rank, step) for k, s in mine]
            kv.push([k for k, _ in mine], [mx.nd.array(v) for v in pushed])
            outs = [mx.nd.zeros(s) for _, s in mine]
            kv.pull([k for k, _ in mine], out=outs)
            for (k, _), v, o in zip(mine, pushed, outs):
                saved["%s/%s/%d/pushed" % (name, k, step)] = v
                saved["%s/%s/%d/pulled" % (name, k, step)] = o.asnumpy()
    if settings.get("switch"):  # then the compression switched after pushes, on the same store
        switch_case(kv, saved)


def switch_case(kv, saved):
    """4bit pushes of 0.3 on key 'switch-w', then set_gradient_compression({'type': 'none'}) and two
    pushes of 0: the first of them must carry 4bit's residual."""
    kv.set_gradient_compression(PARAMS["4bit"])
    kv.init("switch-w", mx.nd.zeros(6))
    out_array = mx.nd.zeros(6)
    for step, value in enumerate([0.3, 0.0, 0.0]):
        if step == 1:
            kv.set_gradient_compression(PARAMS["none"])
        kv.push("switch-w", mx.nd.full(6, value))
        kv.pull("switch-w", out=out_array)
        saved["switch/w/%d" % step] = out_array.asnumpy()


def inf_case(kv, saved):
    """'lgc' through every phase (dense 0-1, sparse ramp 2-3, train 4-6, lgc 7-9; the leader rotates) with
    an inf in the coded tensor's gradient of one worker at steps 1, 3, 4, 5, 7 and 8."""
    kv.set_gradient_compression({"type": "lgc", "density": 0.1, "innovation_density": 0.02, "dense_steps": 2,
                                 "ramp_steps": 2, "ramp_stages": 2, "ae_steps": 3})
    shapes = {"first": (16, 8), "middle": (32, 16), "last": (16, 32)}
    kv.init(list(shapes), [mx.nd.zeros(s) for s in shapes.values()])
    saved["coded"] = np.array(json.dumps(kv.lgc.coded))
    coded = kv.lgc.coded[0]  # ('last': the middle one in the keys' order)
    for step in range(10):
        grads = {k: np.random.default_rng([kv.rank, step, i]).standard_normal(s).astype(np.float32)
                 for i, (k, s) in enumerate(shapes.items())}
        if step in (1, 3, 4, 5, 7, 8) and kv.rank == step % 2:
            grads[coded][3, 5] = np.inf
        kv.push(list(shapes), [mx.nd.array(g) for g in grads.values()])
        outs = [mx.nd.zeros(s) for s in shapes.values()]
        kv.pull(list(shapes), out=outs)
        for k, o in zip(shapes, outs):
            saved["%s/%d" % (k, step)] = o.asnumpy()


def first_to_start(out, name):
    """Whether this worker is the first of the job to get here (it creates OUT/name)."""
    try:
        os.close(os.open(os.path.join(out, name), os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False


def stranger(out):
    """A process without the job's secret in a worker's place: MXNet's own store, commands as a stranger
    could send them, then it waits (a real worker of the job is left out: ps-lite has no place for it)."""
    from mxnet_gc import _mx
    del os.environ["MXNET_GC_JOB_SECRET"]
    kv = mx.kv.create("dist_async")
    planted = Planted(os.path.join(out, "ran"))
    for body in ['mxgc1 {"op": "optimizer", "blob": "%s"}' % base64.b64encode(planted.pickle()).decode(),
                 'mxgc1 %s {"op": "save_states", "path": "/tmp/x", "dump_optimizer": true, "sender": 0, '
                 '"sequence": 99}' % ("0" * 64), planted.pickle(0).decode()]:
        _mx.send_command_to_servers(kv, 0, body)
    time.sleep(300)


def main():
    case, settings, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    mxnet_gc.log.show()  # (mxnet_gc's lines on standard output, where the matrix reads what a user sees)
    if case == "leave" and first_to_start(out, "left"):
        sys.exit(0)  # the first worker here leaves before it creates a store
    if case == "stranger" and first_to_start(out, "stranger"):
        return stranger(out)
    if case in ("save", "load"):
        return checkpoint_case(case, settings, out)
    kv = mxnet_gc.kvstore.create(settings["store"])
    rank, saved = kv.rank, {}
    if case == "keys":
        keys_case(kv, settings, saved)
    elif case == "calls":
        pairs = section_keys(0)[0]
        for k, s in my_order(pairs, rank):
            kv.init(k, mx.nd.zeros(s))
    elif case == "shapes":
        kv.init(["w", "v"], [mx.nd.zeros((10, 10) if rank == 0 else tuple(settings["shape"])), mx.nd.zeros(3)])
    elif case in ("missing", "leave", "ends", "stranger", "double", "skip", "compress-one"):
        if case != "compress-one" or rank == 0:
            kv.set_gradient_compression(PARAMS[settings.get("compression", "4bit" if case == "compress-one" else "none")])
        kv.init(["a", "k"], [mx.nd.zeros(8), mx.nd.zeros(8)])
        for step in range(3):
            if case == "ends" and rank == 1 and step == 1:
                sys.exit(0)  # (its store ends with the process, in order)
            mistake = rank == 1 and (step == 1 or (case == "missing" and not settings.get("once")))
            keys = ["a"] if case == "missing" and mistake else ["a", "k"]
            if case == "double" and mistake:
                kv.push("a", mx.nd.ones(8))
            if case != "skip" or not mistake:
                kv.push(keys, [mx.nd.ones(8) for _ in keys])
            outs = [mx.nd.zeros(8) for _ in keys]
            kv.pull(keys, out=outs)
            outs[0].asnumpy()
    elif case == "inf":
        inf_case(kv, saved)
    elif case == "switch":
        switch_case(kv, saved)
    np.savez(os.path.join(out, "rank%d.npz" % rank), **saved)


def checkpoint_case(case, settings, out):
    """A small Dense network trained for 6 steps (saving after step 5), or loaded from that checkpoint."""
    from mxnet import autograd, gluon
    kv = mxnet_gc.kvstore.create("dist_sync")
    mx.random.seed(1)
    net = gluon.nn.HybridSequential()
    for width in (48, 64, 32):
        net.add(gluon.nn.Dense(width, activation="relu"))
    net.add(gluon.nn.Dense(3))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 10)))
    lgc = settings["kind"] == "lgc"
    compression = {"type": "lgc", "density": 0.1, "dense_steps": 1, "ramp_steps": 1, "ramp_stages": 1,
                   "ae_steps": 2} if lgc else PARAMS["4bit"]
    trainer = mxnet_gc.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv,
                                     compression_params=compression, update_on_kvstore=not lgc)
    prefix = os.path.join(out, "ckpt")
    if case == "load":
        trainer.load_checkpoint(prefix)
    for step in range(6 if case == "save" else 1):
        rng = np.random.default_rng([kv.rank, step])
        with autograd.record():
            loss = gluon.loss.L2Loss()(net(mx.nd.array(rng.standard_normal((8, 10)))),
                                       mx.nd.array(rng.standard_normal((8, 3))))
        loss.backward()
        trainer.step(8)
        if case == "save" and step == 4:
            trainer.save_checkpoint(prefix)
    print("rank %d: trained; lgc groups %s" % (kv.rank, kv.lgc.group_keys() if kv.lgc else None), flush=True)


if __name__ == "__main__":
    main()
