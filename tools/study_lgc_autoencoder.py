#!/usr/bin/env python
"""How well LGC's autoencoder codes real gradients: records the train phase's vectors, then trains
autoencoder variants on them and measures their estimates on later steps.

In one process, W simulated workers train the Fashion-MNIST example's CNN on their shards (dense
averaged SGD for --dense steps), then run the train phase's leader-indexed sparse steps at --density
(the exact sum at the leader's indices, accumulators zeroed there), recording every worker's scaled
vector and innovation channel per step.  Each variant trains on the first --train steps as the
servers do (one Adam step per step on the replay buffer) and is scored on the rest: the relative
squared error |estimate - vector|^2 / |vector|^2 of every worker's estimate from the leader's code,
beside two references: estimating 0 (error 1) and the leader's own vector as every worker's estimate.

    .venv/bin/python -m tools.study_lgc_autoencoder [--workers 2] [--density 1e-3] [--steps 500]
"""
import argparse
import os
import time

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from examples import fashion_mnist
from examples.models import build_model, to_batch
from mxnet_gc.lgc import vectors
from mxnet_gc.lgc.autoencoder import Autoencoder, AutoencoderTrainer
from mxnet_gc.lgc.options import LGCOptions
from mxnet_gc.lgc.wire import WireFormat


def record(args, order):
    """Per step: (scaled vectors W x P, innovation channels W x P, leader)."""
    mx.random.seed(1)
    x, y = fashion_mnist.load("train")
    net = build_model("cnn")
    net.initialize(mx.init.Xavier(magnitude=2))
    net(mx.nd.zeros((1, 1, 28, 28)))
    params = [p for p in net.collect_params().values() if p.grad_req != "null"]
    options = LGCOptions({"density": args.density, "innovation_density": args.innovation_density, "order": order})
    coded = options.coded_keys(list(range(len(params))), [p.shape for p in params], {})
    fmt = WireFormat([params[i].data().size for i in coded], args.density, args.innovation_density, args.workers,
                     options.latent_channels)
    shards = [fashion_mnist.shard(x, y, r, args.workers) for r in range(args.workers)]
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    acc = [[np.zeros(params[i].data().size, np.float32) for i in coded] for _ in range(args.workers)]
    rng = np.random.default_rng(1)
    steps = []
    for step in range(args.dense + args.steps):
        grads = []
        for r, (xs, ys) in enumerate(shards):
            idx = rng.integers(0, len(xs), 64)
            xb, yb = to_batch(xs[idx], ys[idx])
            with autograd.record():
                loss = loss_fn(net(xb), yb)
            loss.backward()
            grads.append([p.grad().asnumpy().copy() for p in params])
        update = [sum(g[i] for g in grads) / args.workers for i in range(len(params))]
        if step >= args.dense:
            leader = step % args.workers
            for r in range(args.workers):
                for c, i in enumerate(coded):
                    acc[r][c] += grads[r][i].ravel() / args.workers
            lead = [vectors.top(v, k) for v, k in zip(acc[leader], fmt.k)]
            if order == "index":
                lead = [np.sort(t) for t in lead]
            vecs, chans = [], []
            summed = [np.zeros(n, np.float32) for n in fmt.sizes]
            for r in range(args.workers):
                scales = [vectors.scale_of(v) for v in acc[r]]
                own = [vectors.top(v, k) for v, k in zip(acc[r], fmt.ki)]
                vecs.append(vectors.scale_segments(fmt, vectors.gather(fmt, acc[r], lead), scales))
                chans.append(vectors.innovation_channel(fmt, lead, own, [v[i] for v, i in zip(acc[r], own)], scales))
                for c in range(len(coded)):
                    summed[c][lead[c]] += acc[r][c][lead[c]]
                    acc[r][c][lead[c]] = 0
            for c, i in enumerate(coded):
                update[i] = summed[c].reshape(update[i].shape)
            steps.append((np.array(vecs), np.array(chans), leader))
        for p, u in zip(params, update):
            p.set_data(p.data() - 0.05 * mx.nd.array(u))
    return steps, fmt


def score(ae, steps, fmt):
    errors = []
    for vecs, chans, leader in steps:
        code = ae.encode(vecs[leader])
        for w in range(len(vecs)):
            est = ae.decode(w, leader, code, chans[w], fmt.padded)[:fmt.K]
            truth = vecs[w][:fmt.K]
            errors.append(np.sum((est - truth) ** 2) / max(np.sum(truth ** 2), 1e-30))
    return float(np.median(errors)), float(np.mean(errors))


def leader_copy(steps, fmt):
    errors = [np.sum((v[l][:fmt.K] - v[w][:fmt.K]) ** 2) / max(np.sum(v[w][:fmt.K] ** 2), 1e-30)
              for v, _, l in steps for w in range(len(v))]
    return float(np.median(errors)), float(np.mean(errors))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--density", type=float, default=1e-3)
    p.add_argument("--innovation-density", type=float, default=1e-5)
    p.add_argument("--dense", type=int, default=200)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--train", type=int, default=300)
    args = p.parse_args()
    variants = [  # (name, channels, latent, lr, replay, code_weight, Adam steps per step)
        ("default", [8, 16, 16, 8], 4, 1e-3, 8, 0.1, 1),
        ("lr 1e-2", [8, 16, 16, 8], 4, 1e-2, 8, 0.1, 1),
        ("replay 64, 4 steps", [8, 16, 16, 8], 4, 3e-3, 64, 0.1, 4),
        ("paper size", [64, 128, 256, 64], 4, 1e-3, 8, 0.1, 1),
    ]
    print("| order | variant | median error | mean error | train ms/step |")
    print("|---|---|---:|---:|---:|")
    for order in ("index", "magnitude"):
        steps, fmt = record(args, order)
        train, test = steps[:args.train], steps[args.train:]
        print("| %s | zeros (reference) | 1.000 | 1.000 | |" % order)
        print("| %s | leader's own vector (reference) | %.3f | %.3f | |" % ((order,) + leader_copy(test, fmt)))
        for name, channels, latent, lr, replay, weight, repeats in variants:
            ae = Autoencoder(args.workers, channels, latent, 0)
            trainer = AutoencoderTrainer(ae, lr, replay, weight)
            start = time.time()
            for vecs, chans, leader in train:
                trainer.add(vecs, chans, leader)
                for _ in range(repeats):
                    trainer.train_step()
            ms = 1e3 * (time.time() - start) / len(train)
            print("| %s | %s | %.3f | %.3f | %.1f |" % ((order, name) + score(ae, test, fmt) + (ms,)), flush=True)


if __name__ == "__main__":
    main()
