"""A worker of tests/test_horovod.py's step-order tests, on either store: keys 'w' and 'b' pushed and pulled for
STEPS steps, with one worker's MISTAKE in step 1; saves every value it pulled, after each step, to
OUT/rank<r>.npz (so that what a failed job pulled can be checked too).

    step_worker.py STORE OUT COMPRESSION MISTAKE

STORE is 'horovod' (started by horovodrun) or 'dist_sync' (tools/launch.py); COMPRESSION a key of
COMPRESSIONS; MISTAKE one of

- none:         every worker pushes and pulls both keys at every step
- double_push:  rank 0 pushes 'w' a second time in step 1, before its pull
- skip_step:    rank 1 pushes nothing in step 1, and pulls both keys
- skip_key:     rank 1 pushes and pulls only 'b' in step 1
- regroup:      rank 0 regroups the keys between its push and its pull in step 1
- leave:        rank 1 exits (status 0) before it creates its store
"""
import os
import sys

if __name__ == "__main__":  # a job's process (not a test importing this file): MXNet without scipy
    import without_scipy  # noqa: F401  (before mxnet: see its docstring)
import numpy as np
import mxnet as mx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import mxnet_gc  # noqa: E402

if __name__ == "__main__":  # a job's worker: its lines on standard output, where the tests read them
    mxnet_gc.log.show()

STEPS = 4
SHAPES = {"w": (6,), "b": (3,)}
POW2 = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
COMPRESSIONS = {"none": {"type": "none"},
                "4bit": {"type": "4bit", "thresholds": POW2, "warmup_steps": 0},
                "4bit-cpull": {"type": "4bit", "thresholds": POW2, "warmup_steps": 0, "compressed_pull": True}}


def gradient(step, key):
    """The same on every worker, on 4bit's levels and 2 of them summing to a level of its pulls (the levels
    times 2): every codec here sums them exactly, and a sum of two steps' values shows."""
    return np.full(SHAPES[key], 2.0 ** ((step + (key == "w")) % 4), np.float32)


def main():
    store, out, compression, mistake = sys.argv[1:5]
    if mistake == "leave" and os.environ.get("HOROVOD_RANK") == "1":
        return
    kv = mxnet_gc.kvstore.create(store)
    rank = kv.rank
    kv.set_gradient_compression(COMPRESSIONS[compression])
    kv.init(list(SHAPES), [mx.nd.zeros(s) for s in SHAPES.values()])
    saved = {}
    for step in range(STEPS):
        pushed = pulled = list(SHAPES)
        if step == 1 and rank == 1 and mistake == "skip_step":
            pushed = []
        if step == 1 and rank == 1 and mistake == "skip_key":
            pushed = pulled = ["b"]
        if pushed:
            kv.push(pushed, [mx.nd.array(gradient(step, k)) for k in pushed])
        if step == 1 and rank == 0 and mistake == "double_push":
            kv.push("w", mx.nd.array(gradient(step, "w")))
        if step == 1 and rank == 0 and mistake == "regroup":
            kv.regroup([list(SHAPES)])
        outs = [mx.nd.zeros(SHAPES[k]) for k in pulled]
        kv.pull(pulled, out=outs)
        saved.update(("%s/%d" % (k, step), o.asnumpy()) for k, o in zip(pulled, outs))
        np.savez(os.path.join(out, "rank%d.npz" % rank), **saved)


if __name__ == "__main__":
    main()
