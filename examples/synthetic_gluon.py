#!/usr/bin/env python
"""Two-class synthetic data, a small MLP, Gluon, and mxnet_gc's compressed dist store.

Run it under the launcher (2 workers, 1 server):

    python -m mxnet_gc.launch -n 2 -s 1 .venv/bin/python examples/synthetic_gluon.py --compression '{"type": "4bit"}'

Each worker trains on its own shard and prints its loss; with ``--out DIR`` it saves the losses and
final weights to DIR/rank<r>.npz (tests/test_dist_gluon.py uses that).
"""
import argparse
import json
import os

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

import mxnet_gc


def shard(rank, steps, batch, features=20):
    """Two Gaussian blobs (the same centres on every worker), a different sample on each worker."""
    rng = np.random.default_rng(100 + rank)
    centers = np.random.default_rng(0).standard_normal((2, features)).astype(np.float32) * 2
    y = rng.integers(0, 2, steps * batch)
    x = centers[y] + rng.standard_normal((steps * batch, features)).astype(np.float32)
    return x.reshape(steps, batch, features), y.reshape(steps, batch)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compression", default='{"type": "4bit", "thresholds": "medium"}',
                        help="gradient compression params, as JSON")
    parser.add_argument("--trainer", choices=["gc", "gluon"], default="gc",
                        help="mxnet_gc.gluon.Trainer (bulk) or gluon.Trainer (unchanged)")
    parser.add_argument("--update-on-kvstore", type=int, choices=[0, 1], default=1,
                        help="1: the optimizer runs on the servers; 0: on each worker")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--dense-warmup-steps", type=int, default=None,
                        help="mxnet_gc.gluon.Trainer: dense pushes for this many steps, then the compression "
                             "(default: the codec's own warm-up; with gluon.Trainer give 'warmup_steps' in "
                             "--compression)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", help="save losses and weights here")
    args = parser.parse_args()

    mx.random.seed(1)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(2))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 20)))
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
    losses = []
    for step, (x, y) in enumerate(zip(xs, ys)):
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(x)), mx.nd.array(y))
        loss.backward()
        trainer.step(args.batch_size)
        losses.append(loss.mean().asscalar())
        if step % 10 == 0 or step == args.steps - 1:
            warming_up = kv.warmup is not None and kv.warmup.current.sends == "dense"  # (the store's own)
            print("worker %d step %d loss %.4f, pushing %s" % (kv.rank, step, losses[-1], "none" if warming_up
                                                                 else kv.compression_config["type"]), flush=True)
    if args.out:
        weights = {name: p.data().asnumpy() for name, p in params.items()}
        np.savez(os.path.join(args.out, "rank%d.npz" % kv.rank), losses=np.array(losses), **weights)


if __name__ == "__main__":
    main()
