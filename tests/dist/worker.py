"""A worker of a test job (see job.py): pushes deterministic gradients, saves everything it pulls.

Spec fields: keys ([[key, shape], ...]), steps, scale, seed, compression (params or null),
optimizer (null or [name, params]), lists (push/pull all keys in one call), pull_first (pull
before any push), store ('gc' for mxnet_gc's store, or an MXNet name such as 'dist_sync').
"""
import json
import os
import sys

import numpy as np
import mxnet as mx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mxnet_gc  # noqa: E402
from job import gradient, initial_value  # noqa: E402


def main():
    spec = json.load(open(sys.argv[1]))
    kv = mxnet_gc.kvstore.create("dist_sync") if spec.get("store", "gc") == "gc" else mx.kv.create(spec["store"])
    rank = kv.rank
    keys = [k for k, _ in spec["keys"]]
    shapes = [tuple(s) for _, s in spec["keys"]]
    if spec.get("compression"):
        kv.set_gradient_compression(spec["compression"])
    if spec.get("optimizer"):
        name, params = spec["optimizer"]
        kv.set_optimizer(mx.optimizer.create(name, **params))
    kv.init(keys, [mx.nd.array(initial_value(spec["seed"], i, s)) for i, s in enumerate(shapes)])
    saved = {}
    outs = [mx.nd.zeros(s) for s in shapes]
    if spec.get("pull_first"):
        kv.pull(keys, out=outs)
        for k, o in zip(keys, outs):
            saved["%s/init" % k] = o.asnumpy()
    for step in range(spec["steps"]):
        grads = [mx.nd.array(gradient(spec["seed"], rank, step, i, s, spec["scale"])) for i, s in enumerate(shapes)]
        if spec.get("lists"):
            kv.push(keys, grads)
            kv.pull(keys, out=outs)
        else:
            for k, g, o in zip(keys, grads, outs):
                kv.pushpull(k, g, out=o)
        for k, o in zip(keys, outs):
            saved["%s/%d" % (k, step)] = o.asnumpy()
    np.savez(os.path.join(spec["out"], "rank%d.npz" % rank), **saved)
    print("worker rank %d saved %d arrays" % (rank, len(saved)))


if __name__ == "__main__":
    main()
