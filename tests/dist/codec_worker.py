"""A worker of tests/test_every_codec.py, on either store: every registered codec (its class's example
parameters, dist/job.py's every_codec) in turn on one store, each on keys of its own, pushed and pulled for
STEPS steps from the first step (float32 pulls); then the store's residual file.

    codec_worker.py STORE OUT

STORE is 'horovod' (started by horovodrun) or 'dist_sync' (tools/launch.py).  Saves OUT/rank<r>.npz, every
pulled value as '<codec type>/<key>/<step>', and OUT/<codec type>.rank<r>.residuals (save_residuals).
"""
import os
import sys

if __name__ == "__main__":  # a job's process (not a test importing this file): MXNet without scipy
    import without_scipy  # noqa: F401  (before mxnet: see its docstring)
import numpy as np
import mxnet as mx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import mxnet_gc  # noqa: E402
from dist.job import every_codec, from_the_first_step, gradient  # noqa: E402

if __name__ == "__main__":  # a job's worker: its lines on standard output, where the tests read them
    mxnet_gc.log.show()

STEPS = 4
SHAPES = {"w": (3, 70), "b": (9,)}  # (keys of one message each)
SEED = 21


def keys_of(kind):
    return ["%s.%s" % (kind, k) for k in SHAPES]


def gradients(kind, rank, step):
    """The gradients ``rank`` pushes in ``step`` for codec ``kind``'s keys (different for every codec)."""
    offset = sorted(every_codec()).index(kind)
    return [gradient(SEED + offset, rank, step, i, s, 1.0) for i, s in enumerate(SHAPES.values())]


def main():
    store, out = sys.argv[1:3]
    kv = mxnet_gc.kvstore.create(store)
    saved = {}
    for kind, params in sorted(every_codec().items()):
        kv.set_gradient_compression(from_the_first_step(dict(params, type=mxnet_gc.kvstore.compression.store_name(kind))))
        keys = keys_of(kind)
        kv.init(keys, [mx.nd.zeros(s) for s in SHAPES.values()])
        outs = [mx.nd.zeros(s) for s in SHAPES.values()]
        for step in range(STEPS):
            kv.push(keys, [mx.nd.array(g) for g in gradients(kind, kv.rank, step)])
            kv.pull(keys, out=outs)
            saved.update(("%s/%d" % (k, step), o.asnumpy()) for k, o in zip(keys, outs))
        kv.save_residuals(os.path.join(out, "%s.rank%d.residuals" % (kind, kv.rank)))
    np.savez(os.path.join(out, "rank%d.npz" % kv.rank), **saved)


if __name__ == "__main__":
    main()
