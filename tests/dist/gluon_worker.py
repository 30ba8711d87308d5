"""A worker of the Gluon tests: trains a small MLP on a synthetic classification task.

argv: OUT_DIR TRAINER(gc|gluon) UPDATE_ON_KVSTORE(1|0) COMPRESSION_JSON
Saves the per-step losses and the final weights to OUT_DIR/rank<r>.npz.
"""
import json
import os
import sys

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

import mxnet_gc


def data(rank, steps, batch):
    """Two-class blobs; each worker gets its own shard."""
    rng = np.random.default_rng(100 + rank)
    centers = np.random.default_rng(0).standard_normal((2, 20)).astype(np.float32) * 2
    y = rng.integers(0, 2, steps * batch)
    x = centers[y] + rng.standard_normal((steps * batch, 20)).astype(np.float32)
    return x.reshape(steps, batch, 20), y.reshape(steps, batch)


def main():
    out_dir, trainer_kind, update_on_kvstore, compression = sys.argv[1], sys.argv[2], sys.argv[3] == "1", \
        json.loads(sys.argv[4])
    mx.random.seed(1)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(2))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 20)))
    kv = mxnet_gc.kvstore.create("dist_sync")
    params = net.collect_params()
    opt = ("sgd", {"learning_rate": 0.1, "momentum": 0.9})
    if trainer_kind == "gc":
        trainer = mxnet_gc.gluon.Trainer(params, *opt, kvstore=kv, compression_params=compression,
                                         update_on_kvstore=update_on_kvstore)
    else:
        trainer = gluon.Trainer(params, *opt, kvstore=kv, compression_params=compression,
                                update_on_kvstore=update_on_kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    xs, ys = data(kv.rank, 40, 32)
    losses = []
    for x, y in zip(xs, ys):
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(x)), mx.nd.array(y))
        loss.backward()
        trainer.step(32)
        losses.append(loss.mean().asscalar())
    weights = {name: p.data().asnumpy() for name, p in params.items()}
    np.savez(os.path.join(out_dir, "rank%d.npz" % kv.rank), losses=np.array(losses), **weights)


if __name__ == "__main__":
    main()
