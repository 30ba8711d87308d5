#!/usr/bin/env python
"""A Horovod user's Gluon script, as Horovod's MXNet examples write it: an MLP on Fashion-MNIST with
``hvd.DistributedTrainer`` and ``hvd.broadcast_parameters``.

    horovodrun -np 2 -H localhost:2 --gloo python examples/horovod_gluon.py [--steps N] [--out FILE]

docs/migration.md ("Coming from Horovod") lists the edits that make it an mxnet_gc job with compressed
gradients; tests/test_migration.py applies them to this file and runs both.  Each worker prints its
loss every 10 steps; ``--out`` writes rank 0's losses as JSON.
"""
import argparse
import json

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon
import horovod.mxnet as hvd

import fashion_mnist

BATCH, LR = 64, 0.05


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--steps", type=int, default=100, help="training steps")
    parser.add_argument("--out", help="write rank 0's losses here (JSON)")
    args = parser.parse_args()
    hvd.init()
    images, labels = fashion_mnist.load("train")
    images, labels = fashion_mnist.shard(images[:BATCH * args.steps * hvd.size()],
                                         labels[:BATCH * args.steps * hvd.size()], hvd.rank(), hvd.size())
    x_all = images.reshape(len(images), -1).astype(np.float32) / 255
    mx.random.seed(1 + hvd.rank())  # (each worker its own initial weights: the broadcast makes them equal)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(128, activation="relu"), gluon.nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 784)))
    params = net.collect_params()
    hvd.broadcast_parameters(params, root_rank=0)
    trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": LR, "momentum": 0.9})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = []
    for step in range(args.steps):
        x = mx.nd.array(x_all[step * BATCH:(step + 1) * BATCH])
        y = mx.nd.array(labels[step * BATCH:(step + 1) * BATCH].astype(np.float32))
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(BATCH)
        losses.append(float(loss.mean().asscalar()))
        if step % 10 == 0:
            print("rank %d step %d loss %.4f" % (hvd.rank(), step, losses[-1]), flush=True)
    if args.out and hvd.rank() == 0:
        with open(args.out, "w") as f:
            json.dump(losses, f)


if __name__ == "__main__":
    main()
