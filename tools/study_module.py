#!/usr/bin/env python
"""The original 2bit context: MXNet 1.x's Module.fit with the optimizer (SGD, momentum) on the servers.

Every run is a real job of examples/classic_fashion_mnist.py (Fashion-MNIST, a 784-128-64-10 MLP, batch
100 per worker, SGD lr 0.1, wd 1e-4, momentum on the servers), W workers and 1 server started by
tools/launch.py.  Runs are kept in the JSON file as they finish (an interrupted study resumes); a run is
identified by its arguments, seed and workers.

``--diagnose``: the failure's setting (2 workers, the first 12,000 images, 2 epochs), 4bit's named
groups and 'auto' against uncompressed, momentum 0 and 0.9; per run the final accuracy and, from the
example's log, rank 0's residual against its gradient (the largest ratio ||residual|| / ||gradient|| over
the keys, at the last sample, and how many samples in a row it grew) and the update's norm.

Without it: the study of docs/accuracy.md's "original 2bit context" (5 epochs of the 60k images, 3 seeds,
2 and 4 workers, momentum 0 and 0.9): uncompressed, MXNet-kernel 2bit at the best of a threshold sweep
(seed 1, momentum 0.9, 2 workers), 4bit with its default thresholds and with each named group.

    .venv/bin/python tools/study_module.py --diagnose --json docs/results/module_diagnosis.json
    .venv/bin/python tools/study_module.py --json docs/results/module_study.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from study_accuracy import difference_text, t_interval  # noqa: E402

SWEEP_2BIT = (0.01, 0.05, 0.2, 0.5, 1.0)
CONFIGS = {"uncompressed": ["--gc-type", "none"], "4bit (default)": ["--gc-type", "4bit"],
           "4bit 'auto'": ["--gc-type", "4bit", "--gc-thresholds", "auto"],
           "4bit 'small'": ["--gc-type", "4bit", "--gc-thresholds", "small"],
           "4bit 'medium'": ["--gc-type", "4bit", "--gc-thresholds", "medium"],
           "4bit 'large'": ["--gc-type", "4bit", "--gc-thresholds", "large"]}


class Runs:
    """The runs done so far, in a JSON file."""

    def __init__(self, path):
        self.path, self.runs = path, []
        if os.path.exists(path):
            with open(path) as f:
                self.runs = json.load(f)["runs"]

    def get(self, argv, workers):
        for run in self.runs:
            if run["argv"] == argv and run["workers"] == workers:
                return run["log"]
        print("training (%d workers): %s" % (workers, " ".join(argv)), flush=True)
        log = train(argv, workers)
        self.runs.append({"argv": argv, "workers": workers, "log": log})
        with open(self.path, "w") as f:
            json.dump({"runs": self.runs}, f)
        return log


def train(argv, workers):
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.json")
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "launch.py"), "-n", str(workers), "-s", "1",
                               "--timeout", "3600", sys.executable, os.path.join(ROOT, "examples", "classic_fashion_mnist.py"),
                               "--log", log] + argv, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit("run %s failed:\n%s\n%s" % (" ".join(argv), proc.stdout[-3000:], proc.stderr[-3000:]))
        with open(log) as f:
            return json.load(f)


def final(log):
    return log["epochs"][-1]["test_accuracy"]


def residual_growth(log):
    """(largest ||residual|| / ||gradient|| over the keys at the last sample, most samples in a row any key's
    ratio grew) from a run's log; (nan, 0) without coded pushes."""
    last, streak = float("nan"), 0
    for rows in log["residuals"].values():
        ratios = [r / max(g, 1e-30) for _, g, r in rows]
        if not ratios:
            continue
        last = ratios[-1] if np.isnan(last) else max(last, ratios[-1])
        run = best = 0
        for a, b in zip(ratios, ratios[1:]):
            run = run + 1 if b > a else 0
            best = max(best, run)
        streak = max(streak, best)
    return last, streak


def update_norm(log):
    """The mean over the last 10 samples of the update's norm (all parameters)."""
    rows = log["updates"][-10:]
    return float(np.mean([np.sqrt(sum(v ** 2 for v in r["update_norm"].values())) for r in rows])) if rows else float("nan")


def diagnose(runs):
    base = ["--num-examples", "12000", "--num-epochs", "2", "--seed", "1"]
    lines = ["| configuration | momentum | test accuracy | residual / gradient (last sample, largest key) | "
             "samples it grew in a row | update norm (last 10 samples) |", "|---|---:|---:|---:|---:|---:|"]
    for mom in ("0.9", "0"):
        for name in ("uncompressed", "4bit 'small'", "4bit 'medium'", "4bit 'large'", "4bit 'auto'"):
            log = runs.get(base + ["--mom", mom] + CONFIGS[name], 2)
            ratio, streak = residual_growth(log)
            lines.append("| %s | %s | %.4f | %s | %d | %.3g |" % (name, mom, final(log), "–" if np.isnan(ratio) else
                                                                "%.2f" % ratio, streak, update_norm(log)))
    return "\n".join(lines)


def study(runs, seeds, workers_list):
    base = ["--num-epochs", "5"]
    sweep = {t: final(runs.get(base + ["--mom", "0.9", "--gc-type", "2bit", "--gc-threshold", repr(t), "--seed",
                                       str(seeds[0])], 2)) for t in SWEEP_2BIT}
    best = max(sweep, key=sweep.get)
    configs = dict(CONFIGS, **{"MXNet 2bit %g" % best: ["--gc-type", "2bit", "--gc-threshold", repr(best)]})
    lines = ["MXNet 2bit's sweep (seed %d, momentum 0.9, 2 workers): %s" % (
        seeds[0], ", ".join("%g: %.4f" % (t, a) for t, a in sweep.items())), "",
        "| workers | momentum | configuration | seeds | final test accuracy, mean | min | max | "
        "difference to uncompressed |", "|---:|---:|---|---:|---:|---:|---:|---|"]
    for workers in workers_list:
        for mom in ("0.9", "0"):
            finals = {name: {s: final(runs.get(base + ["--mom", mom, "--seed", str(s)] + argv, workers)) for s in seeds}
                      for name, argv in configs.items()}
            for name, by_seed in finals.items():
                values = list(by_seed.values())
                diff = "" if name == "uncompressed" else difference_text(
                    *t_interval([by_seed[s] - finals["uncompressed"][s] for s in seeds]))
                lines.append("| %d | %s | %s | %d | %.4f | %.4f | %.4f | %s |" % (
                    workers, mom, name, len(values), np.mean(values), min(values), max(values), diff))
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--diagnose", action="store_true", help="the failure's setting, with the residual's norms")
    p.add_argument("--json", required=True, help="the runs, kept as they finish")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    args = p.parse_args()
    runs = Runs(args.json)
    print(diagnose(runs) if args.diagnose else study(runs, args.seeds, args.workers))


if __name__ == "__main__":
    main()
