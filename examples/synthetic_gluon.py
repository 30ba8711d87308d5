#!/usr/bin/env python
"""Ten overlapping Gaussian classes, a small MLP, Gluon, and mxnet_gc's compressed dist store.

Run it under the launcher (2 workers, 1 server):

    python -m mxnet_gc.launch -n 2 -s 1 .venv/bin/python examples/synthetic_gluon.py

By default it pushes 4bit gradients after the codec's 50 dense warm-up steps.  Each worker trains on its
own shard and prints its loss and the bytes its sockets sent since its last line, so that the switch from
dense to compressed pushes shows; with ``--out DIR`` it saves the losses and final weights to
DIR/rank<r>.npz (tests/test_dist_gluon.py uses that).
"""
import argparse
import json
import os

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

import mxnet_gc
from mxnet_gc.traffic import socket_bytes


CLASSES, FEATURES = 10, 50


def shard(rank, steps, batch):
    """Ten Gaussian blobs that overlap (the same centres on every worker), a different sample on each
    worker: the loss falls from ln 10 to about 0.5, never to 0."""
    rng = np.random.default_rng(100 + rank)
    centers = np.random.default_rng(0).standard_normal((CLASSES, FEATURES)).astype(np.float32) * 0.4
    y = rng.integers(0, CLASSES, steps * batch)
    x = centers[y] + rng.standard_normal((steps * batch, FEATURES)).astype(np.float32)
    return x.reshape(steps, batch, FEATURES), y.reshape(steps, batch)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--compression", default='{"type": "4bit", "thresholds": "medium"}',
                        help="gradient compression params, as JSON")
    parser.add_argument("--trainer", choices=["gc", "gluon"], default="gc",
                        help="mxnet_gc.gluon.Trainer (bulk) or gluon.Trainer (unchanged)")
    parser.add_argument("--update-on-kvstore", type=int, choices=[0, 1], default=1,
                        help="1: the optimizer runs on the servers; 0: on each worker")
    parser.add_argument("--steps", type=int, default=200, help="training steps")
    parser.add_argument("--dense-warmup-steps", type=int, default=None,
                        help="mxnet_gc.gluon.Trainer: dense pushes for this many steps, then the compression "
                             "(default: the codec's own warm-up; with gluon.Trainer give 'warmup_steps' in "
                             "--compression)")
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--out", help="save losses and weights here")
    args = parser.parse_args()
    mxnet_gc.log.show()  # mxnet_gc's lines (rank 0: the warm-up and its end) on standard output

    mx.random.seed(1)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(CLASSES))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, FEATURES)))
    kv = mxnet_gc.kvstore.create("dist_sync")
    params = net.collect_params()
    options = {"dense_warmup_steps": args.dense_warmup_steps} if args.trainer == "gc" else {}
    if args.trainer == "gluon" and args.dense_warmup_steps is not None:
        parser.error("--dense-warmup-steps is an option of mxnet_gc.gluon.Trainer")
    make = mxnet_gc.gluon.Trainer if args.trainer == "gc" else gluon.Trainer
    trainer = make(params, "sgd", {"learning_rate": 0.1, "momentum": 0.9}, kvstore=kv,
                   compression_params=json.loads(args.compression), update_on_kvstore=bool(args.update_on_kvstore),
                   **options)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    xs, ys = shard(kv.rank, args.steps, args.batch_size)
    losses, every = [], max(10, args.steps // 10)
    sent = socket_bytes()
    for step, (x, y) in enumerate(zip(xs, ys)):
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(x)), mx.nd.array(y))
        loss.backward()
        trainer.step(args.batch_size)
        losses.append(loss.mean().asscalar())
        if step % every == 0 or step == args.steps - 1:
            warming_up = kv.schedule.current.sends == "dense"  # (the store's own clock, or the trainer's)
            now = socket_bytes()
            traffic = "" if now is None or sent is None else ", %.1f KB sent since the last line" % ((now[0] - sent[0]) / 1e3)
            sent = now
            print("worker %d step %d loss %.4f, pushing %s%s" % (kv.rank, step, losses[-1], "none" if warming_up
                                                                   else kv.compression_config["type"], traffic),
                  flush=True)
    if args.out:
        weights = {name: p.data().asnumpy() for name, p in params.items()}
        np.savez(os.path.join(args.out, "rank%d.npz" % kv.rank), losses=np.array(losses), **weights)


if __name__ == "__main__":
    main()
