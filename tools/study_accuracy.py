#!/usr/bin/env python
"""Accuracy study: uncompressed, MXNet's 2bit, 4bit (one group, per-layer groups), layer-wise top-k.

Each configuration trains the Fashion-MNIST example (examples/train_fashion_mnist.py) on a real job,
2 workers and 1 server started by tools/launch.py, with the same model, epochs and hyperparameters,
once per seed; every threshold-compressed configuration pushes dense gradients for its first 50 steps
(the per-layer groups are calibrated on them); the top-k one sparsifies from the first step.  It prints the table and the verdict for docs/accuracy.md,
and writes docs/accuracy_epochs.png (test accuracy against
epoch) and docs/accuracy_bytes.png (against the bytes rank 0 sent), and every epoch's log to
docs/accuracy.json.

    .venv/bin/python tools/study_accuracy.py [--epochs 6] [--seeds 1 2] [--model cnn]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP = "50"  # dense steps before the compression starts, for every compressed configuration
CONFIGS = {
    "uncompressed": ["--compression", "none"],
    "MXNet 2bit (threshold 0.5)": ["--compression", "2bit", "--threshold", "0.5", "--dense-warmup-steps", WARMUP],
    "MXNet 2bit (threshold 2)": ["--compression", "2bit", "--threshold", "2", "--dense-warmup-steps", WARMUP],
    "4bit, one group (medium)": ["--compression", "4bit", "--thresholds", "medium", "--dense-warmup-steps", WARMUP],
    "4bit, per-layer groups": ["--compression", "4bit", "--groups", "--calibration-steps", WARMUP],
    "layer-wise top-k 1%, DP-merged": ["--compression", "layerwise_topk", "--density", "0.01", "--merge", "dp",
                                       "--dense-warmup-steps", "0"],
    # DGC's momentum correction: the momentum is applied before sparsification, in the codec, and the
    # optimizer on the workers is plain SGD; dense steps first, as for the other codecs
    "layer-wise top-k 1%, DGC momentum, warm-up": ["--compression", "layerwise_topk", "--density", "0.01",
                                                   "--merge", "dp", "--topk-momentum", "0.9", "--momentum", "0",
                                                   "--dense-warmup-steps", WARMUP],
}


def run(config, seed, args, configs=CONFIGS, workers=2):
    """The example's JSON log of one configuration (its arguments: ``configs[config]``) and seed."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.json")
        if "horovod" in configs[config]:  # --kvstore horovod: started by horovodrun, no servers
            launcher = [os.path.join(os.path.dirname(sys.executable), "horovodrun"), "-np", str(workers), "-H",
                        "localhost:%d" % workers, "--gloo", "--start-timeout", "60"]
        else:
            launcher = [sys.executable, os.path.join(ROOT, "tools", "launch.py"), "-n", str(workers), "-s", "1",
                        "--timeout", "7200"]
        # (--log-file: horovodrun would take --log for an abbreviation of its own options)
        argv = launcher + [sys.executable, os.path.join(ROOT, "examples", "train_fashion_mnist.py"), "--model",
                           args.model, "--epochs", str(args.epochs), "--lr-steps", args.lr_steps, "--seed", str(seed),
                           "--log-file", log]
        proc = subprocess.run(argv + configs[config], cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit("run %s seed %d failed:\n%s\n%s" % (config, seed, proc.stdout[-3000:], proc.stderr[-3000:]))
        with open(log) as f:
            return json.load(f)


def plot(results, path, x_of, xlabel):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for config, logs in results.items():
        xs = np.mean([x_of(log) for log in logs], axis=0)
        acc = np.array([[e["test_accuracy"] for e in log["epochs"]] for log in logs])
        ax.errorbar(xs, acc.mean(axis=0), yerr=[acc.mean(0) - acc.min(0), acc.max(0) - acc.mean(0)], marker="o",
                    capsize=3, label=config)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test accuracy (mean, min-max over seeds)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["cnn", "resnet20"], default="cnn")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--lr-steps", default="4,5")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--docs", default=os.path.join(ROOT, "docs"))
    parser.add_argument("--only", nargs="+", choices=list(CONFIGS), help="run only these configurations and "
                        "keep the others' results from docs/accuracy.json")
    args = parser.parse_args()
    results = {}
    saved = os.path.join(args.docs, "accuracy.json")
    if args.only and os.path.exists(saved):
        with open(saved) as f:
            results = {k: v for k, v in json.load(f)["results"].items() if k not in args.only}
    for config in args.only or CONFIGS:
        results[config] = []
        for seed in args.seeds:
            log = run(config, seed, args)
            results[config].append(log)
            print("%s, seed %d: final test accuracy %.4f" % (config, seed, log["epochs"][-1]["test_accuracy"]),
                  flush=True)
    results = {k: results[k] for k in CONFIGS if k in results}
    with open(saved, "w") as f:
        json.dump({"args": vars(args), "results": results}, f, indent=1)
    plot(results, os.path.join(args.docs, "accuracy_epochs.png"),
         lambda log: [e["epoch"] for e in log["epochs"]], "epoch")
    plot(results, os.path.join(args.docs, "accuracy_bytes.png"),
         lambda log: np.cumsum([e["bytes_sent"] for e in log["epochs"]]) / 1e6, "MB sent by rank 0 (cumulative)")
    rows = ["| configuration | final test accuracy, mean | min | max | MB sent per epoch (rank 0) |",
            "|---|---:|---:|---:|---:|"]
    finals = {}
    for config, logs in results.items():
        acc = [log["epochs"][-1]["test_accuracy"] for log in logs]
        finals[config] = float(np.mean(acc))
        sent = np.mean([e["bytes_sent"] for log in logs for e in log["epochs"]]) / 1e6
        rows.append("| %s | %.4f | %.4f | %.4f | %.1f |" % (config, np.mean(acc), min(acc), max(acc), sent))
    table = "\n".join(rows)
    print(table)
    groups = finals["4bit, per-layer groups"]
    best_2bit = max((v, k) for k, v in finals.items() if "2bit" in k)
    verdict = ("4bit with per-layer groups: %+.2f points against uncompressed (claim: within 0.5), %+.2f points "
               "against the better MXNet 2bit run, %s (claim: above)"
               % (100 * (groups - finals["uncompressed"]), 100 * (groups - best_2bit[0]), best_2bit[1]))
    print(verdict)
    for topk in (k for k in finals if k.startswith("layer-wise top-k")):
        print("%s: %+.2f points against uncompressed (claim: within 0.5)"
              % (topk, 100 * (finals[topk] - finals["uncompressed"])))


if __name__ == "__main__":
    main()
