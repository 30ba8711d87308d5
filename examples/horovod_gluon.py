#!/usr/bin/env python
"""A Horovod user's Gluon script, written as Horovod's own MXNet example (examples/mxnet/mxnet_mnist.py)
is: an optimizer object whose rate is scaled by the number of workers, ``hvd.DistributedTrainer`` with
``compression=`` and ``gradient_predivide_factor=``, ``hvd.broadcast_parameters``; an MLP on
Fashion-MNIST.

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


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64, help="per worker")
    parser.add_argument("--lr", type=float, default=0.05, help="the learning rate of one worker's batch")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--fp16-allreduce", action="store_true", help="gradients in float16 on the wire")
    parser.add_argument("--gradient-predivide-factor", type=float, default=1.0,
                        help="Horovod's split of its averaging, before and after the sum")
    parser.add_argument("--steps", type=int, default=100, help="training steps")
    parser.add_argument("--out", help="write rank 0's losses here (JSON)")
    return parser.parse_args()


def main(args):
    hvd.init()
    batch = args.batch_size
    images, labels = fashion_mnist.load("train")
    images, labels = fashion_mnist.shard(images[:batch * args.steps * hvd.size()],
                                         labels[:batch * args.steps * hvd.size()], hvd.rank(), hvd.size())
    x_all = images.reshape(len(images), -1).astype(np.float32) / 255

    mx.random.seed(1 + hvd.rank())  # (each worker its own initial weights: the broadcast makes them equal)
    model = gluon.nn.HybridSequential()
    model.add(gluon.nn.Dense(128, activation="relu"), gluon.nn.Dense(10))
    model.hybridize()

    # Horovod: scale the learning rate by the number of workers
    optimizer_params = {'momentum': args.momentum,
                        'learning_rate': args.lr * hvd.size()}
    opt = mx.optimizer.create('sgd', **optimizer_params)

    model.initialize(mx.init.Xavier())
    model(mx.nd.zeros((1, 784)))
    params = model.collect_params()
    hvd.broadcast_parameters(params, root_rank=0)

    # Horovod: DistributedTrainer, a gluon.Trainer that averages the gradients over the workers
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    trainer = hvd.DistributedTrainer(params, opt, compression=compression,
                                     gradient_predivide_factor=args.gradient_predivide_factor)

    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = []
    for step in range(args.steps):
        x = mx.nd.array(x_all[step * batch:(step + 1) * batch])
        y = mx.nd.array(labels[step * batch:(step + 1) * batch].astype(np.float32))
        with autograd.record():
            loss = loss_fn(model(x), y)
        loss.backward()
        trainer.step(batch)
        losses.append(float(loss.mean().asscalar()))
        if step % 10 == 0:
            print("rank %d step %d loss %.4f" % (hvd.rank(), step, losses[-1]), flush=True)
    if args.out and hvd.rank() == 0:
        with open(args.out, "w") as f:
            json.dump(losses, f)


if __name__ == "__main__":
    main(parse_args())
