#!/usr/bin/env python
"""Accuracy study: uncompressed, a tuned MXNet 2bit, 4bit (one group, per-layer groups, compressed pulls), top-k.

Every run trains the Fashion-MNIST example (examples/train_fashion_mnist.py) on a real job, 2 workers (--workers) and
1 server started by tools/launch.py, with the same model, epochs and hyperparameters; every
threshold-compressed configuration pushes dense gradients for its first 50 steps (the per-layer groups
are calibrated on them), and so does the top-k one.

1. Sweeps, on the first seed: MXNet's 2bit over thresholds spanning the batch-summed gradients' scale,
   and 4bit with one group for all layers over the base of its geometric levels (base * 2**k, k < 7).
2. The main configurations, 2bit and one-group 4bit at the sweep's best value: uncompressed, MXNet
   2bit and 4bit with per-layer groups on every seed, the others on the first ``--few-seeds`` seeds.
3. Statistics: per configuration the mean and standard deviation of the final test accuracy and the
   95% t interval of its difference to uncompressed, paired by seed; each claim gets a verdict
   (supported, refuted, or cannot tell at this number of seeds).

Runs are written to the runs file (JSON Lines, tools/study_runs.py; default lab/accuracy/accuracy.jsonl) as they finish, each with its
provenance (commit, code hash, date, machine, command); a study runs fresh: ``--reuse FILE`` takes the runs of
FILE that ran the same code (an interrupted study continues with ``--reuse`` of its own file), printed as
"stored" with their commit and date; ``--report`` prints a file's runs as they are, every one "stored".  Writes the plots
``<prefix>_epochs.png`` (test accuracy against epoch, mean and min-max band over seeds),
``<prefix>_bytes.png`` (against rank 0's traffic) and, with sweeps, ``<prefix>_sweeps.png``; prints the
tables and verdicts for lab/accuracy/findings.md.

    .venv/bin/python -m tools.study_accuracy                      # the CNN study (make study)
    .venv/bin/python -m tools.study_accuracy --model resnet20 --epochs 5 --lr-steps 3,4 --seeds 1 2 \\
        --no-sweep --tuned-by lab/accuracy/accuracy.jsonl --configs uncompressed "MXNet 2bit" \\
        "4bit, per-layer groups" "4bit, per-layer groups, compressed pull" --json lab/accuracy/accuracy_resnet20.jsonl
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

from tools import horovodrun as hvdrun, plots, study_runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP = "50"  # dense steps before the compression starts, for every compressed configuration
SWEEP_2BIT = (0.001, 0.005, 0.02, 0.05, 0.2, 0.5, 1.0)  # MXNet 2bit thresholds
SWEEP_4BIT = (2.0 ** -8, 2.0 ** -6, 2.0 ** -4, 2.0 ** -2, 1.0)  # bases of one group's levels ('medium' is 2**-4)
MARGIN = 0.002  # the targets' 0.2 points


def mxnet_2bit(threshold):
    return ["--compression", "2bit", "--threshold", repr(threshold), "--dense-warmup-steps", WARMUP]


def one_group(base):
    levels = ",".join(repr(base * 2.0 ** k) for k in range(7))
    return ["--compression", "4bit", "--thresholds", levels, "--dense-warmup-steps", WARMUP]


GROUPS = ["--compression", "4bit", "--groups", "--calibration-steps", WARMUP]


def configurations(threshold, base):
    """Name -> (the example's arguments, 'all' or 'few' seeds); 2bit and one group at the given values."""
    return {
        "uncompressed": (["--compression", "none"], "all"),
        "MXNet 2bit": (mxnet_2bit(threshold), "all"),
        "4bit, per-layer groups": (GROUPS, "all"),
        "mxnet_gc 2bit": (["--compression", "gc_2bit", "--threshold", repr(threshold), "--dense-warmup-steps",
                           WARMUP], "few"),
        "4bit, one group": (one_group(base), "few"),
        "4bit, per-layer groups, compressed pull": (GROUPS + ["--compressed-pull"], "few"),
        "4bit, per-layer groups, compressed pull, 5 bits": (GROUPS + ["--compressed-pull", "--pull-bits", "5"], "few"),
        "4bit, per-layer groups, compressed allreduce (Horovod)": (GROUPS + ["--compressed-pull", "--kvstore", "horovod"],
                                                                   "few"),
        # DGC's momentum correction: the momentum is applied before sparsification, in the codec, and the
        # optimizer on the workers is plain SGD
        "layer-wise top-k 1%, DGC momentum": (["--compression", "layerwise_topk", "--density", "0.01", "--merge",
                                              "dp", "--topk-momentum", "0.9", "--momentum", "0",
                                              "--dense-warmup-steps", WARMUP], "few"),
    }


class Runs:
    """The study's runs (tools/study_runs.py) by the example's arguments, seed and workers."""

    def __init__(self, path, args, reuse=(), any_code=False):
        self.args = args
        self.runs = study_runs.Runs(path, reuse, any_code)

    def argv(self, example_args, seed):
        a = self.args
        warmup = ["--lr-warmup-epochs", repr(a.lr_warmup_epochs)] if a.lr_warmup_epochs else []
        return ["--model", a.model, "--epochs", str(a.epochs), "--lr-steps", a.lr_steps] + warmup + \
            ["--seed", str(seed)] + list(example_args)

    def key(self, example_args, seed):
        return {"argv": self.argv(example_args, seed), "workers": self.args.workers}

    def get(self, example_args, seed, train_missing=True, config=None):
        """The epochs' log of this run: made now, or stored and reused (None if neither and not to train);
        ``config``: the study's name for the configuration, stored with a run made now."""
        argv, workers = self.argv(example_args, seed), self.args.workers

        def make():
            print("training (%d workers): %s" % (workers, " ".join(argv)), flush=True)
            return train(argv, workers, pull_stats=self.args.pull_stats)

        return self.runs.get(self.key(example_args, seed), make if train_missing else None,
                             command=job_command(argv, workers, pull_stats=self.args.pull_stats), config=config)

    def label(self, example_args, seed):
        """'' for a run of this invocation, ' (stored: commit C, DATE)' for a reused one."""
        return self.runs.label(self.key(example_args, seed))


def job_command(argv, workers=2, example="train_fashion_mnist.py", pull_stats=0, log="log.json"):
    """The command line of one job of an example writing its JSON log to ``log``: horovodrun with
    ``--kvstore horovod`` in ``argv`` (no servers), else the launcher with one server."""
    if "horovod" in argv:
        launcher = hvdrun.ARGV + ["-np", str(workers), "-H",
                    "localhost:%d" % workers, "--gloo", "--start-timeout", "60"]
    else:
        launcher = [sys.executable, os.path.join(ROOT, "tools", "launch.py"), "-n", str(workers), "-s", "1",
                    "--timeout", "7200"] + ["--verbose"] * bool(pull_stats)  # (the servers' lines too)
    # (--log-file: horovodrun would take --log for an abbreviation of its own options)
    return launcher + [sys.executable, os.path.join(ROOT, "examples", example), "--log-file", log] + list(argv)


def train(argv, workers=2, example="train_fashion_mnist.py", pull_stats=0, output=False):
    """One job of an example (its ``--log-file`` is its JSON log): that log.  With ``--kvstore horovod`` in
    ``argv`` horovodrun starts it (no servers), else the launcher.  ``pull_stats``: MXNET_GC_PULL_STATS of
    the job, whose servers' samples the log then holds as 'pull_stats'.  ``output``: return (the log,
    the job's printed output) instead."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.json")
        env = dict(os.environ, MXNET_GC_PULL_STATS=str(pull_stats)) if pull_stats else None
        proc = subprocess.run(job_command(argv, workers, example, pull_stats, log), cwd=ROOT, capture_output=True,
                              text=True, env=env)
        if proc.returncode != 0:
            sys.exit("run %s failed:\n%s\n%s" % (" ".join(argv), proc.stdout[-3000:], proc.stderr[-3000:]))
        with open(log) as f:
            result = json.load(f)
        stats = [json.loads(line.split("pull stats ", 1)[1]) for line in (proc.stdout + proc.stderr).splitlines()
                 if "pull stats {" in line]
        if stats:  # the servers' samples of their compressed pulls (mxnet_gc/kvstore/ps/pull_monitor.py)
            result["pull_stats"] = stats
        return (result, proc.stdout + proc.stderr) if output else result


def tuned_2bit(path=os.path.join(ROOT, "lab", "accuracy", "accuracy.jsonl")):
    """The MXNet 2bit threshold of the best final accuracy in ``make study``'s sweep (the CNN, 2 workers, 6
    epochs, seed 1), read from its saved runs."""
    runs = Runs(None, argparse.Namespace(model="cnn", epochs=6, lr_steps="4,5", workers=2, lr_warmup_epochs=0,
                                         pull_stats=0), reuse=[path], any_code=True)
    points = [(t, runs.get(mxnet_2bit(t), 1, train_missing=False)) for t in SWEEP_2BIT]
    points = [(t, final(log)) for t, log in points if log is not None]
    if not points:
        sys.exit("no MXNet 2bit sweep in %s: run `make study` first" % path)
    return max(points, key=lambda p: p[1])[0]


def final(log):
    return log["epochs"][-1]["test_accuracy"]


def t_interval(diffs, level=0.95):
    """Mean and the two-sided t interval of the mean of paired differences (nan bounds for one value)."""
    from scipy import stats

    d = np.asarray(diffs, dtype=np.float64)
    mean = float(d.mean())
    if len(d) < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))
    return mean, mean - half, mean + half


def verdict(low, high, at_least):
    """'supported' when the whole interval is >= at_least, 'refuted' when all of it is below, else 'cannot tell'."""
    if math.isnan(low):
        return "cannot tell"
    if low >= at_least:
        return "supported"
    if high < at_least:
        return "refuted"
    return "cannot tell"


def paired(a, b):
    """Final accuracies of two configurations' runs on the seeds both have: (a's - b's) per seed."""
    common = sorted(set(a) & set(b))
    return [final(a[s]) - final(b[s]) for s in common]


def difference_text(mean, low, high):
    """A difference of accuracies and its interval, in points (one seed has no interval)."""
    if math.isnan(low):
        return "%+.2f points (one seed: no interval)" % (100 * mean)
    return "%+.2f [%+.2f, %+.2f] points" % (100 * mean, 100 * low, 100 * high)


def table(results):
    rows = ["| configuration | seeds | final test accuracy, mean | std | min | max | difference to uncompressed, "
            "mean [95% interval] | MB sent / received per epoch (rank 0) |",
            "|---|---:|---:|---:|---:|---:|---|---:|"]
    for name, logs in results.items():
        acc = np.array([final(log) for log in logs.values()])
        std = "%.4f" % acc.std(ddof=1) if len(acc) > 1 else "-"
        if name == "uncompressed" or "uncompressed" not in results:
            diff = "-"
        else:
            mean, low, high = t_interval(paired(logs, results["uncompressed"]))
            diff = difference_text(mean, low, high)
        sent = np.mean([e["bytes_sent"] for log in logs.values() for e in log["epochs"]]) / 1e6
        received = np.mean([e["bytes_received"] for log in logs.values() for e in log["epochs"]]) / 1e6
        rows.append("| %s | %s | %.4f | %s | %.4f | %.4f | %s | %.1f / %.1f |"
                    % (name, ",".join(map(str, logs)), acc.mean(), std, acc.min(), acc.max(), diff, sent, received))
    return "\n".join(rows)


def claims(results):
    """The study's claims: (text, mean, low, high, verdict), differences in accuracy (fractions)."""
    out = []

    def claim(text, a, b, at_least):
        if a in results and b in results:
            mean, low, high = t_interval(paired(results[a], results[b]))
            out.append((text, mean, low, high, verdict(low, high, at_least)))

    claim("4bit with per-layer groups within 0.2 points of uncompressed (difference >= -0.2)",
          "4bit, per-layer groups", "uncompressed", -MARGIN)
    claim("4bit with per-layer groups above the tuned MXNet 2bit (difference > 0)", "4bit, per-layer groups",
          "MXNet 2bit", 1e-9)
    claim("compressed pulls cost at most 0.2 points (difference to 4bit groups >= -0.2)",
          "4bit, per-layer groups, compressed pull", "4bit, per-layer groups", -MARGIN)
    claim("compressed pulls on 5 bits cost at most 0.2 points (difference to 4bit groups >= -0.2)",
          "4bit, per-layer groups, compressed pull, 5 bits", "4bit, per-layer groups", -MARGIN)
    claim("per-layer groups above one group (difference > 0)", "4bit, per-layer groups", "4bit, one group", 1e-9)
    claim("layer-wise top-k with DGC within 0.2 points of uncompressed (difference >= -0.2)",
          "layer-wise top-k 1%, DGC momentum", "uncompressed", -MARGIN)
    for text, a, b in (("mxnet_gc's 2bit matches MXNet's 2bit (the interval holds 0)", "mxnet_gc 2bit", "MXNet 2bit"),
                       ("the compressed allreduce on Horovod matches the parameter server's compressed pull (the "
                        "interval holds 0)", "4bit, per-layer groups, compressed allreduce (Horovod)",
                        "4bit, per-layer groups, compressed pull")):
        if a in results and b in results:
            mean, low, high = t_interval(paired(results[a], results[b]))
            same = "cannot tell" if math.isnan(low) else "supported" if low <= 0 <= high else "refuted"
            out.append((text, mean, low, high, same))
    return out


def pull_table(results):
    """What the servers' compressed pulls carried, per configuration whose runs sampled them (--pull-stats):
    the residual's norm against the pulled update's and the sum's (root of the squares summed over every
    sample), and the shares of values sent as 0 and at the top level (weighted by the messages' sizes)."""
    rows = ["| configuration | seeds | samples | residual / pulled update (norms) | residual / sum | values sent as 0 "
            "(of the sum's non-zero) | values at the top pull level |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, logs in results.items():
        stats = [s for log in logs.values() for s in log.get("pull_stats", [])]
        if not stats:
            continue
        energy = {k: math.sqrt(sum(s[k] ** 2 for s in stats)) for k in ("sum", "pulled", "residual")}
        weight = sum(s["values"] for s in stats)
        zeros, top = (sum(s[k] * s["values"] for s in stats) / weight for k in ("zeros", "top"))
        rows.append("| %s | %s | %d | %.3f | %.3f | %.1f%% | %.2f%% |" % (
            name, ",".join(str(seed) for seed, log in logs.items() if "pull_stats" in log), len(stats),
            energy["residual"] / energy["pulled"], energy["residual"] / energy["sum"], 100 * zeros, 100 * top))
    return "\n".join(rows) if len(rows) > 2 else ""


def plot_curves(results, path, x_of, xlabel):
    """Test accuracy against ``x_of(log)`` per configuration (mean over seeds, min-max band), at most
    plots.SERIES configurations a panel (the reference, uncompressed if there, else the first, in each),
    each panel's legend below it."""
    plt = plots.pyplot()
    panels = plots.panels_of(sorted(results, key=lambda name: name != "uncompressed"))
    fig, axes = plots.grid(len(panels), width=6.0, height=4.0 + 0.22 * max(len(p) for p in panels))
    for ax, names in zip(axes, panels):
        for k, name in enumerate(names):  # (line styles tell apart curves that coincide)
            logs = results[name]
            xs = np.mean([x_of(log) for log in logs.values()], axis=0)
            acc = np.array([[e["test_accuracy"] for e in log["epochs"]] for log in logs.values()])
            line, = ax.plot(xs, acc.mean(axis=0), marker="o^sv"[k % 4], linestyle=["-", "--", "-.", ":"][k % 4],
                            color="C%d" % k, label="%s (%d seed%s)" % (name, len(logs), "s" * (len(logs) > 1)))
            ax.fill_between(xs, acc.min(axis=0), acc.max(axis=0), color=line.get_color(), alpha=0.15)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy (mean; band: min-max)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def plot_sweeps(sweeps, path):
    plt = plots.pyplot()
    fig, axes = plt.subplots(1, len(sweeps), figsize=(5 * len(sweeps), 4))
    for ax, (name, (xlabel, points)) in zip(np.atleast_1d(axes), sweeps.items()):
        ax.semilogx([x for x, _ in points], [acc for _, acc in points], marker="o")
        ax.set_title(name)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("final test accuracy (first seed)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["cnn", "resnet20"], default="cnn")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--lr-steps", default="4,5")
    parser.add_argument("--workers", type=int, default=2, help="workers of every job (1 server)")
    parser.add_argument("--lr-warmup-epochs", type=float, default=0, help="the example's warm-up of the learning "
                        "rate (from lr / workers to lr): 1 with 4 workers, whose summed steps diverge without it")
    parser.add_argument("--pull-stats", type=int, default=0, help="the servers sample their compressed pulls every "
                        "this many rounds (MXNET_GC_PULL_STATS), kept with each new run and summed up in a table")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--few-seeds", type=int, default=3, help="seeds of the configurations marked 'few'")
    parser.add_argument("--json", default=os.path.join(ROOT, "lab", "accuracy", "accuracy.jsonl"), help="the runs; plots "
                        "are written next to it, named after it")
    parser.add_argument("--no-sweep", action="store_true", help="take the tuned values from --tuned-by")
    parser.add_argument("--tuned-by", help="a study's JSON whose sweeps choose the 2bit threshold and the one "
                        "group's base (default: --json)")
    parser.add_argument("--configs", nargs="+", help="run only these configurations")
    parser.add_argument("--reuse", nargs="+", default=[], help="files of stored runs: those that ran this code "
                        "(the same code hash) are reused, and printed as stored")
    parser.add_argument("--report", action="store_true", help="train nothing: the tables and plots of the runs "
                        "the file has (every one printed as stored)")
    args = parser.parse_args()
    if args.report:
        runs = Runs(None, args, reuse=[args.json], any_code=True)
    else:
        runs = Runs(args.json, args, reuse=args.reuse)
    tuned = runs if not args.tuned_by else Runs(None, argparse.Namespace(**{**vars(args), **{
        "model": "cnn", "epochs": 6, "lr_steps": "4,5", "workers": 2, "lr_warmup_epochs": 0,
        "pull_stats": 0}}), reuse=[args.tuned_by], any_code=True)
    sweeps = {}
    for name, xlabel, values, make in (("MXNet 2bit", "threshold", SWEEP_2BIT, mxnet_2bit),
                                       ("4bit, one group", "base of the levels (base * 2**k)", SWEEP_4BIT,
                                        one_group)):
        points = []
        for value in values:
            seed = tuned.args.seeds[0]
            log = tuned.get(make(value), seed, train_missing=not (args.no_sweep or args.report),
                            config="%s sweep, %g" % (name, value))
            if log is not None:
                points.append((value, final(log)))
                print("sweep %s %g: final test accuracy %.4f%s" % (name, value, final(log),
                                                                  tuned.label(make(value), seed)), flush=True)
        if not points:
            sys.exit("no %s sweep in %s: run it first, or drop --no-sweep" % (name, args.tuned_by or args.json))
        sweeps[name] = (xlabel, points)
    threshold = max(sweeps["MXNet 2bit"][1], key=lambda p: p[1])[0]
    base = max(sweeps["4bit, one group"][1], key=lambda p: p[1])[0]
    print("tuned: MXNet 2bit threshold %g, 4bit one group base %g" % (threshold, base), flush=True)

    chosen = {name: c for name, c in configurations(threshold, base).items() if not args.configs or name in args.configs}
    results = {name: {} for name in chosen}
    for seed in args.seeds:  # a seed's every configuration first: an interrupted study has paired results
        for name, (example_args, which) in chosen.items():
            if which == "all" or seed in args.seeds[:args.few_seeds]:
                log = runs.get(example_args, seed, train_missing=not args.report, config=name)
                if log is not None:
                    results[name][seed] = log
                    print("%s, seed %d: final test accuracy %.4f%s" % (name, seed, final(log),
                                                                      runs.label(example_args, seed)), flush=True)
    results = {name: logs for name, logs in results.items() if logs}

    prefix = os.path.splitext(args.json)[0]
    plot_curves(results, prefix + "_epochs.png", lambda log: [e["epoch"] for e in log["epochs"]], "epoch")
    plot_curves(results, prefix + "_bytes.png",
                lambda log: np.cumsum([e["bytes_sent"] + e["bytes_received"] for e in log["epochs"]]) / 1e6,
                "MB sent + received by rank 0 (cumulative)")
    if not args.no_sweep:
        plot_sweeps(sweeps, prefix + "_sweeps.png")
    print("\nMXNet 2bit threshold %g and one group's base %g (best final test accuracy of the sweeps, seed %d)\n"
          % (threshold, base, tuned.args.seeds[0]))
    for name, (xlabel, points) in sweeps.items():
        print("| %s: %s | %s |\n|---|%s" % (name, xlabel, " | ".join("%g" % x for x, _ in points),
                                           "---:|" * len(points)))
        print("| final test accuracy | %s |\n" % " | ".join("%.4f" % acc for _, acc in points))
    print(table(results))
    print("\n| claim | difference, mean [95% interval] | verdict |\n|---|---|---|")
    for text, mean, low, high, says in claims(results):
        print("| %s | %s | %s |" % (text, difference_text(mean, low, high), says))
    pulls = pull_table(results)
    if pulls:
        print("\nThe servers' compressed pulls (every %s rounds of a message):\n\n%s" % (args.pull_stats or "N", pulls))


if __name__ == "__main__":
    main()
