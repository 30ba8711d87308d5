#!/usr/bin/env python
"""The experiment behind the default threshold groups (mxnet_gc/groups.py, lab/threshold_groups/findings.md).

It trains each example model on Fashion-MNIST (one process, uncompressed, the example's settings)
and, on every step's real gradients, runs the 4bit codec with error feedback for many candidate
ladders per parameter: geometric with ratio 2 or 1.5, and linear (t_k = k t1), each for base levels
t1 = 2^-22 ... 2^3.  The error of a step is ||a - q||^2 / ||a||^2, where a = residual + gradient and
q what 4bit sends: the share of the accumulated gradient left unsent.  Per parameter it reports the
gradient RMS and the best base; then it derives three ladders (bases at the size-weighted 1/6, 1/2, 5/6
quantiles of the best bases) and compares one group for all layers with the best of the three per layer
(the trainer's rule: it measures these errors during calibration and picks the smallest).

    .venv/bin/python -m tools.study_threshold_groups [--steps 200] [--out lab/threshold_groups/threshold_groups.json]
"""
import argparse
import itertools
import math
import json
import os

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from examples import fashion_mnist, models
import mxnet_gc
from tools import provenance

BASES = [2.0 ** k for k in range(-22, 4)]
FAMILIES = {"geometric x2": lambda b: [b * 2 ** k for k in range(7)],
            "geometric x1.5": lambda b: [b * 1.5 ** k for k in range(7)],
            "linear": lambda b: [b * (k + 1) for k in range(7)]}


class Candidate:
    """One ladder run with error feedback on one parameter's gradients."""

    def __init__(self, levels, size):
        self.codec = mxnet_gc.codecs.create({"type": "4bit", "thresholds": levels})
        self.residual = np.zeros(size, np.float32)
        self.payload = np.zeros(self.codec.payload_size(size), np.float32)
        self.sent = np.zeros(size, np.float32)
        self.error = 0.0

    def step(self, grad):
        accumulated = self.residual + grad
        self.codec.encode_numpy(grad, self.residual, self.payload)
        self.codec.decode_numpy(self.payload, self.sent)
        norm = float(np.dot(accumulated, accumulated))
        if norm > 0:
            self.error += float(np.dot(self.residual, self.residual)) / norm


def study(model, steps, batch_size, seed):
    mx.random.seed(seed)
    images, labels = fashion_mnist.load("train")
    net = models.build_model(model)
    net.initialize(mx.init.Xavier(magnitude=2))
    net(mx.nd.zeros((1, 1, 28, 28)))
    params = [p for p in net.collect_params().values() if p.grad_req != "null"]
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.05, "momentum": 0.9, "wd": 1e-4}, kvstore=None)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    candidates = {p.name: {(f, b): Candidate(make(b), p.data().size) for f, make in FAMILIES.items() for b in BASES}
                  for p in params}
    rms_sum = {p.name: 0.0 for p in params}
    order = np.random.default_rng(seed).permutation(len(images))
    for step in range(steps):
        idx = order[step * batch_size:(step + 1) * batch_size]
        x, y = models.to_batch(images[idx], labels[idx])
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        for p in params:
            g = p.grad().asnumpy().ravel()
            rms_sum[p.name] += math.sqrt(float(np.dot(g, g)) / g.size)
            for c in candidates[p.name].values():
                c.step(g)
        trainer.step(batch_size)
    rows = []
    for p in params:
        errors = {key: c.error / steps for key, c in candidates[p.name].items()}
        best = {f: min(BASES, key=lambda b: errors[f, b]) for f in FAMILIES}
        rows.append({"model": model, "name": p.name, "size": int(p.data().size), "grad_rms": rms_sum[p.name] / steps,
                     "best_base": {f: best[f] for f in FAMILIES},
                     "best_error": {f: errors[f, best[f]] for f in FAMILIES},
                     "errors_geometric_x2": {repr(b): errors["geometric x2", b] for b in BASES}})
    return rows


def three_bases(rows):
    """The three bases t1 (from the candidate grid) whose ladders, each layer taking the best of the
    three, give the smallest error averaged over the layers (each layer counts once)."""
    errors = np.array([[r["errors_geometric_x2"][repr(b)] for b in BASES] for r in rows])
    best = min(itertools.combinations(range(len(BASES)), 3), key=lambda t: errors[:, list(t)].min(axis=1).mean())
    return [BASES[i] for i in best]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["cnn", "resnet20"])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="write every measurement as JSON here")
    args = parser.parse_args()
    rows = [r for m in args.models for r in study(m, args.steps, args.batch_size, args.seed)]
    family = "geometric x2"
    print("| model | parameter | size | grad RMS | best t1, x2 | best t1 / RMS | error at best t1: x2 | x1.5 | linear |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %s | %d | %.2e | %.2e | %.2f | %.3f | %.3f | %.3f |" % (
            r["model"], r["name"], r["size"], r["grad_rms"], r["best_base"][family],
            r["best_base"][family] / r["grad_rms"], r["best_error"]["geometric x2"], r["best_error"]["geometric x1.5"],
            r["best_error"]["linear"]))
    ratios = [r["best_base"][family] / r["grad_rms"] for r in rows]
    base_per_rms = float(np.exp(np.median(np.log(ratios))))
    weights = np.array([r["size"] for r in rows], float)
    ladder_bases = three_bases(rows)

    def mean_error(pick):
        """(size-weighted, per-layer) mean error when each layer r uses the ladder of base pick(r)."""
        e = np.array([r["errors_geometric_x2"][repr(pick(r))] for r in rows])
        return float(np.dot(weights, e) / weights.sum()), float(e.mean())

    one_group = {b: mean_error(lambda r, b=b: b) for b in BASES}
    best_single = min(one_group, key=lambda b: one_group[b][1])
    per_layer = mean_error(lambda r: min(ladder_bases, key=lambda b: r["errors_geometric_x2"][repr(b)]))
    oracle = mean_error(lambda r: r["best_base"][family])
    family_errors = {f: float(np.dot(weights, [r["best_error"][f] for r in rows]) / weights.sum()) for f in FAMILIES}
    summary = {"base_per_rms": base_per_rms, "ladder_bases": ladder_bases, "best_single_base": best_single,
               "error_best_single_group": one_group[best_single], "error_per_layer_groups": per_layer,
               "error_best_base_per_layer": oracle, "error_by_family_at_best_base": family_errors}
    print("\nsize-weighted mean error per family at each layer's best base: %s"
          % ", ".join("%s %.4f" % kv for kv in family_errors.items()))
    print("BASE_PER_RMS (median best t1 / RMS): %.3f" % base_per_rms)
    print("three ladder bases (the best triple, each layer taking the best of the three): %s"
          % ", ".join("%.3g" % b for b in ladder_bases))
    print("\n| ladders | error, size-weighted | error, mean over layers |\n|---|---:|---:|")
    print("| one group for all layers, the best (t1 = %.3g) | %.4f | %.4f |" % ((best_single,) + one_group[best_single]))
    for b in ladder_bases:
        print("| one group for all layers, t1 = %.3g | %.4f | %.4f |" % ((b,) + one_group[b]))
    print("| per layer, the best of the three groups | %.4f | %.4f |" % per_layer)
    print("| each layer at its own best t1 (bound) | %.4f | %.4f |" % oracle)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"provenance": provenance.record(), "args": vars(args), "summary": summary, "parameters": rows},
                      f, indent=1)


if __name__ == "__main__":
    main()
