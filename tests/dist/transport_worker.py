"""A worker of tests/test_store_api.py::test_residuals_move_between_transports.

    transport_worker.py STORE OUT KIND save        3 steps of compressed pushes, then OUT/rank<r>.residuals
    transport_worker.py STORE OUT KIND load FROM   FROM/rank<r>.residuals loaded, one more step (its pulled
                                                   sum to OUT/rank<r>.npz), then OUT/rank<r>.residuals again

KIND: a key of COMPRESSIONS ('fixed' levels from the first step, also with 'compressed_pull'; 'auto' levels,
4bit's or gc_2bit's, fitted in a 2-step warm-up).
"""
import os
import sys

if __name__ == "__main__":  # a job's process (not a test importing this file): MXNet without scipy
    import without_scipy  # noqa: F401  (before mxnet: see its docstring)
import numpy as np
import mxnet as mx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import mxnet_gc  # noqa: E402
from dist.job import gradient  # noqa: E402

if __name__ == "__main__":  # a job's worker: its lines on standard output, where the tests read them
    mxnet_gc.log.show()

KEYS = [["w", (5, 7)], [3, (130,)]]
COMPRESSIONS = {"fixed": {"type": "4bit", "thresholds": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0], "warmup_steps": 0,
                          "compressed_pull": False},
                "auto": {"type": "4bit", "warmup_steps": 2, "compressed_pull": False},
                "auto-gc_2bit": {"type": "gc_2bit", "threshold": "auto", "warmup_steps": 2}}
COMPRESSIONS["compressed-pull"] = dict(COMPRESSIONS["fixed"], compressed_pull=True)
SEED, SCALE, SAVED_STEPS = 21, 0.9, 3


def step(kv, index):
    keys = [k for k, _ in KEYS]
    grads = [mx.nd.array(gradient(SEED, kv.rank, index, i, shape, SCALE)) for i, (_, shape) in enumerate(KEYS)]
    outs = [mx.nd.zeros(shape) for _, shape in KEYS]
    kv.push(keys, grads)
    kv.pull(keys, out=outs)
    return {"%s/%d" % (k, index): o.asnumpy() for k, o in zip(keys, outs)}


def main():
    store, out, kind, mode = sys.argv[1:5]
    kv = mxnet_gc.kvstore.create(store)
    kv.set_gradient_compression(COMPRESSIONS[kind])
    kv.init([k for k, _ in KEYS], [mx.nd.zeros(shape) for _, shape in KEYS])
    mine = os.path.join(out, "rank%d.residuals" % kv.rank)
    if mode == "save":
        for index in range(SAVED_STEPS):
            step(kv, index)
    else:
        kv.load_residuals(os.path.join(sys.argv[5], "rank%d.residuals" % kv.rank))
        np.savez(os.path.join(out, "rank%d.npz" % kv.rank), **step(kv, SAVED_STEPS))
    kv.save_residuals(mine)


if __name__ == "__main__":
    main()
