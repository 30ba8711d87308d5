#!/usr/bin/env python
"""The original 2bit context: MXNet 1.x's Module.fit with the optimizer (SGD, momentum) on the servers.

Every run is a real job of examples/classic_fashion_mnist.py (Fashion-MNIST scaled to [0, 1], a
784-128-64-10 MLP, Xavier initialization, batch 100 per worker, SGD lr 0.1, wd 1e-4, the optimizer on the
servers), W workers and 1 server started by tools/launch.py.  Runs are kept in the runs file (JSON Lines, tools/study_runs.py) as they
finish (an interrupted study resumes); a run is identified by its arguments and workers.

``--diagnose``: the short setting (2 workers, the first 12,000 images, 2 epochs, 120 steps of which 50
dense), momentum 0.9 and 0, 3 seeds: uncompressed against 4bit before (the 'medium' group, floor
rounding) and with each change alone and together (rounding to nearest; 'auto' levels), and the same
with gradients 10x larger and smaller (the loss scaled, rescale_grad divided: the same training);
gc_2bit at 0.01 and with 'threshold': 'auto' (one level fitted as 4bit's ladder is), with either rounding.  Per
configuration the mean final accuracy, and from rank 0's log the residual against the gradient (the
largest ||residual|| / ||gradient|| over the keys at the last sample) and the update's norm.

Without it: the long setting (5 epochs of the 60k images, 2 and 4 workers, momentum 0.9 and 0, 3 seeds):
uncompressed, 4bit's default ('auto' levels, rounding to nearest) and MXNet-kernel 2bit at the best of
a threshold sweep (first seed, momentum 0.9, 2 workers); 4bit before and with each fix alone, and gc_2bit
with 'threshold': 'auto' (2 workers, momentum 0.9); uncompressed against 4bit's default through a plain gluon.Trainer (2 workers, momentum
0.9); and both with the batch 10x smaller (10 per worker, lr 0.01; the first 12,000 images, 2 epochs:
1,200 steps) and 10x larger (1,000 per worker; 5 epochs of the 60k: 150 steps, the first 50 dense).

    .venv/bin/python -m tools.study_module --diagnose --json lab/module_study/module_diagnosis.jsonl \
        --markdown lab/accuracy/findings.md
    .venv/bin/python -m tools.study_module --json lab/module_study/module_study.jsonl --markdown lab/accuracy/findings.md

``--weight-pulls``: Module.fit (2 and 4 workers) and a plain gluon.Trainer (2 workers), momentum 0.9, 5
epochs, 3 seeds: uncompressed, 4bit's default with float32 weight pulls, and 4bit both ways
('compressed_pull': the servers send their weights' difference).  Every run records its provenance.

    .venv/bin/python -m tools.study_module --weight-pulls --json lab/module_study/weight_pulls.jsonl \
        --markdown lab/accuracy/findings.md
"""
import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from tools import provenance, study_runs
from tools.jobfiles import write_section
from tools.study_accuracy import difference_text, job_command, t_interval, train

SWEEP_2BIT = (0.01, 0.05, 0.2, 0.5, 1.0)
CONFIGS = {"uncompressed": ["--gc-type", "none"],
           "4bit before: 'medium', floor": ["--gc-type", "4bit", "--gc-thresholds", "medium", "--gc-rounding", "floor"],
           "4bit 'medium', nearest": ["--gc-type", "4bit", "--gc-thresholds", "medium", "--gc-rounding", "nearest"],
           "4bit 'auto', floor": ["--gc-type", "4bit", "--gc-thresholds", "auto", "--gc-rounding", "floor"],
           "4bit default: 'auto', nearest": ["--gc-type", "4bit"]}
SCALED = {"uncompressed, gradients x10": ["--gc-type", "none", "--loss-scale", "10"],
          "4bit before, gradients x10": CONFIGS["4bit before: 'medium', floor"] + ["--loss-scale", "10"],
          "4bit 'medium', nearest, gradients x10": CONFIGS["4bit 'medium', nearest"] + ["--loss-scale", "10"],
          "4bit default, gradients x10": ["--gc-type", "4bit", "--loss-scale", "10"],
          "uncompressed, gradients x0.1": ["--gc-type", "none", "--loss-scale", "0.1"],
          "4bit before, gradients x0.1": CONFIGS["4bit before: 'medium', floor"] + ["--loss-scale", "0.1"],
          "4bit default, gradients x0.1": ["--gc-type", "4bit", "--loss-scale", "0.1"]}
GC_2BIT = {"gc_2bit 0.01, floor": ["--gc-type", "gc_2bit", "--gc-threshold", "0.01", "--gc-rounding", "floor"],
           "gc_2bit 0.01, nearest": ["--gc-type", "gc_2bit", "--gc-threshold", "0.01", "--gc-rounding", "nearest"],
           "gc_2bit 'auto', floor": ["--gc-type", "gc_2bit", "--gc-threshold", "auto", "--gc-rounding", "floor"],
           "gc_2bit 'auto' (nearest)": ["--gc-type", "gc_2bit", "--gc-threshold", "auto"]}
# the long study's rows (the ablations at other gradient scales, and gc_2bit, are the short diagnosis's)
GLUON = {"uncompressed": CONFIGS["uncompressed"], "4bit default: 'auto', nearest": CONFIGS["4bit default: 'auto', nearest"]}
ABLATIONS = dict({name: CONFIGS[name] for name in ("uncompressed", "4bit before: 'medium', floor", "4bit 'medium', nearest",
                                                   "4bit 'auto', floor")},
                 **{"gc_2bit 'auto' (nearest)": GC_2BIT["gc_2bit 'auto' (nearest)"]})
# per worker; batch 10 with lr 0.01 (lr 0.1 does not train uncompressed there: the mean gradient of 10 images is
# too noisy for it with momentum 0.9)
BATCHES = {10: ["--num-examples", "12000", "--num-epochs", "2", "--lr", "0.01"], 1000: ["--num-epochs", "5"]}


class Runs:
    """The study's runs (tools/study_runs.py) by the example's arguments and workers."""

    def __init__(self, path, reuse=()):
        self.runs = study_runs.Runs(path, reuse)

    def get(self, argv, workers, config=None):
        """The log of the run of the example's ``argv`` on ``workers`` (``config``: the study's name for it)."""
        def make():
            print("training (%d workers): %s" % (workers, " ".join(argv)), flush=True)
            return train(argv, workers, "classic_fashion_mnist.py")

        return self.runs.get({"argv": argv, "workers": workers}, make,
                             command=job_command(argv, workers, "classic_fashion_mnist.py"), config=config)

    def label(self, argv, workers):
        return self.runs.label({"argv": argv, "workers": workers})


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


def rows(runs, base, workers, seeds, configs, diagnostics, moms=("0.9", "0"), prefix="", versus=None):
    """A table row per (momentum, configuration): the mean, min and max final accuracy over the seeds,
    the paired difference to uncompressed (and to the configuration ``versus``) and, with ``diagnostics``,
    the residual and update norms."""
    lines = []
    for mom in moms:
        logs = {name: [runs.get(base + ["--mom", mom, "--seed", str(s)] + argv, workers,
                                "%s%s, momentum %s" % (prefix, name, mom)) for s in seeds]
                for name, argv in configs.items()}
        for name, by_seed in logs.items():
            finals = [final(log) for log in by_seed]
            diff = "" if name == "uncompressed" else difference_text(
                *t_interval([final(a) - final(u) for a, u in zip(by_seed, logs["uncompressed"])]))
            row = "| %d | %s | %s%s | %.4f | %.4f | %.4f | %s |" % (workers, mom, prefix, name, np.mean(finals),
                                                               min(finals), max(finals), diff)
            if versus:
                row += " %s |" % ("" if name in ("uncompressed", versus) else difference_text(
                    *t_interval([final(a) - final(u) for a, u in zip(by_seed, logs[versus])])))
            if diagnostics:
                ratios = [residual_growth(log)[0] for log in by_seed]
                row += " %s | %.3g |" % ("–" if np.isnan(ratios).all() else "%.2f" % np.nanmean(ratios),
                                         np.mean([update_norm(log) for log in by_seed]))
            lines.append(row)
    return lines


HEADER = ("| workers | momentum | configuration | final test accuracy, mean | min | max | difference to "
          "uncompressed |")


def diagnose(runs, seeds):
    base = ["--num-examples", "12000", "--num-epochs", "2"]
    lines = [HEADER + " residual / gradient, last sample | update norm, last 10 samples |",
             "|---:|---:|---|---:|---:|---:|---|---:|---:|"]
    return "\n".join(lines + rows(runs, base, 2, seeds, dict(CONFIGS, **SCALED, **GC_2BIT), True))


def study(runs, seeds, workers_list):
    base = ["--num-epochs", "5"]
    sweep = {t: final(runs.get(base + ["--mom", "0.9", "--seed", str(seeds[0]), "--gc-type", "2bit", "--gc-threshold",
                                       repr(t)], 2, "MXNet 2bit sweep, %g" % t)) for t in SWEEP_2BIT}
    best = max(sweep, key=sweep.get)
    configs = dict(GLUON, **{"MXNet 2bit %g" % best: ["--gc-type", "2bit", "--gc-threshold", repr(best)]})
    lines = ["MXNet 2bit's sweep (seed %d, momentum 0.9, 2 workers): %s" % (
        seeds[0], ", ".join("%g: %.4f" % (t, a) for t, a in sweep.items())), "", HEADER, "|---:|---:|---|---:|---:|---:|---|"]
    for workers in workers_list:
        lines += rows(runs, base, workers, seeds, configs, False)
        if workers == 2:
            lines += rows(runs, base, 2, seeds, ABLATIONS, False, moms=("0.9",))[1:]  # (uncompressed: above)
            lines += rows(runs, base + ["--api", "gluon"], 2, seeds, GLUON, False, moms=("0.9",),
                          prefix="plain gluon.Trainer: ")
    for batch, setting in BATCHES.items():
        lines += rows(runs, setting + ["--batch-size", str(batch)], 2, seeds, GLUON, False, moms=("0.9",),
                      prefix="batch %d%s: " % (batch, ", lr 0.01" if "--lr" in setting else ""))
    return "\n".join(lines)


WEIGHT_PULLS = {"uncompressed": CONFIGS["uncompressed"], "4bit, float32 pulls": ["--gc-type", "4bit"],
                "4bit both ways (compressed weight pulls)": ["--gc-type", "4bit", "--gc-compressed-pull"]}


def weight_pulls(runs, seeds, workers_list):
    """Compressed weight pulls (the servers' weights' differences) against float32 pulls and uncompressed:
    Module.fit with momentum 0.9 on the servers, 5 epochs, and a plain gluon.Trainer with 2 workers."""
    base, versus = ["--num-epochs", "5"], "4bit, float32 pulls"
    lines = [HEADER + " difference to %s |" % versus, "|---:|---:|---|---:|---:|---:|---|---|"]
    for workers in workers_list:
        lines += rows(runs, base, workers, seeds, WEIGHT_PULLS, False, moms=("0.9",), versus=versus)
    lines += rows(runs, base + ["--api", "gluon"], 2, seeds, WEIGHT_PULLS, False, moms=("0.9",),
                  prefix="plain gluon.Trainer: ", versus=versus)
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--diagnose", action="store_true", help="the short setting, with the residual's norms")
    p.add_argument("--weight-pulls", action="store_true",
                   help="compressed weight pulls against float32 pulls (5 epochs, momentum 0.9)")
    p.add_argument("--json", required=True, help="the runs of this invocation, written as they finish")
    p.add_argument("--reuse", nargs="+", default=[], help="files of stored runs: those that ran this code (the "
                   "same code hash) are reused (an interrupted study continues with --reuse of its own --json)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    p.add_argument("--markdown", help="a page whose section between <!-- study_module:NAME:begin/end --> "
                                      "markers (NAME: diagnose or study) gets the table")
    args = p.parse_args()
    runs = Runs(args.json, args.reuse)
    name = "diagnose" if args.diagnose else "weight_pulls" if args.weight_pulls else "study"
    table = diagnose(runs, args.seeds) if args.diagnose else weight_pulls(runs, args.seeds, args.workers) \
        if args.weight_pulls else study(runs, args.seeds, args.workers)
    command = "`.venv/bin/python -m tools.study_module %s`" % " ".join(sys.argv[1:])
    read = {os.path.relpath(args.json, ROOT): [r["provenance"] for r in runs.runs.runs]}
    text = "Command: %s\n\n%s\n\n%s\n" % (command, table, provenance.data_note(read))
    print(text)
    if args.markdown:
        write_section(args.markdown, "study_module:%s" % name, text)


if __name__ == "__main__":
    main()
