#!/usr/bin/env python
"""Accuracy against bytes: every method of mxnet_gc on the same epochs and seeds, as one picture and a
Pareto table per setting.

Settings (``PANELS``): the Fashion-MNIST CNN with 2 workers (3 epochs, seeds 1-3) and with 4 workers (6
epochs, the rate x0.1 after epochs 4 and 5, warmed up over the first epoch from lr / 4, seeds 1-3), and
cnn-fc with 2 workers (3 epochs of the first 20,000 images, lr 0.01, seeds 1-2).  Methods (``METHODS``):
uncompressed, MXNet 2bit at ``make study``'s best threshold, 4bit with per-layer groups with and without
compressed pulls, top-k with DGC's momentum at densities 1e-2 and 1e-3, top-k with error feedback at
1e-3, LGC without its autoencoder (its schedule, then each worker's top-k), LGC-PS and LGC-RAR at 1e-3,
and with DGC's momentum correction (SGD without momentum) LGC's ablation, LGC-PS (own codes, without
and with each value's sign and 'clip' error feedback) and LGC-RAR with every worker's candidates at W
times 1e-3.
Each run is a real job of tools/study_lgc.py, kept in that setting's lab/lgc_study/ file, so a
second call trains only what is missing; ``--report`` trains nothing.

A point is a method's mean final test accuracy over the seeds (bars: the lowest and highest seed)
against the bytes rank 0 sent per step in the last epoch (every step of it compressed); a method is on
the Pareto front when no other sends at most as many bytes for a higher mean accuracy.  Writes
lab/accuracy/pareto.png and, with ``--markdown``, the tables between the page's
``<!-- study_pareto:begin -->`` and ``:end`` markers.

    .venv/bin/python -m tools.study_pareto [--panels cnn-w2 cnn-w4 cnn-fc-w2] [--report] [--markdown lab/accuracy/findings.md]
"""
import argparse
import os

import numpy as np

from tools import provenance, study_lgc, study_runs
from tools.jobfiles import write_section
from tools import plots
from tools.plots import pyplot
from tools.study_accuracy import ROOT

RESULTS = os.path.join(ROOT, "lab", "lgc_study")
PICTURE = os.path.join(ROOT, "lab", "accuracy", "pareto.png")
# name -> (title, study_lgc's arguments, its file under RESULTS)
PANELS = {
    "cnn-w2": ("CNN, 2 workers, 3 epochs, seeds 1-3", ["--workers", "2", "--epochs", "3", "--seeds", "1", "2", "3"],
               "lgc_study_w2.jsonl"),
    "cnn-w4": ("CNN, 4 workers, 6 epochs, seeds 1-3", ["--workers", "4", "--epochs", "6", "--lr-steps", "4,5",
                                                       "--lr-warmup-epochs", "1", "--seeds", "1", "2", "3"],
               "lgc_study_w4.jsonl"),
    "cnn-fc-w2": ("cnn-fc, 2 workers, 3 epochs of 20,000 images, seeds 1-2",
                  ["--model", "cnn-fc", "--workers", "2", "--epochs", "3", "--limit", "20000", "--lr", "0.01",
                   "--dense", "100", "--ramp", "100", "--ae", "100", "--seeds", "1", "2"], "lgc_study_cnn-fc_w2.jsonl"),
}
METHODS = ["uncompressed", "MXNet 2bit", "4bit, per-layer groups", "4bit, per-layer groups, compressed pull",
           "top-k 1e-2, DGC momentum", "top-k 1e-3, DGC momentum", "top-k (error feedback)",
           "LGC without autoencoder", "LGC-PS", "LGC-RAR",
           # LGC's recommended settings (DGC's momentum correction, every worker's candidates; on the
           # parameter server each value's sign and 'clip') and its ablation
           "LGC without autoencoder, DGC momentum",
           "LGC-PS, own codes, every worker's candidates, density x workers, DGC momentum",
           "LGC-PS, own codes, every worker's candidates, density x workers, signs, clip, DGC momentum",
           "LGC-RAR, every worker's candidates, density x workers, DGC momentum"]
# the picture's two rows of panels (at most 8 methods a panel), uncompressed in both: the codecs and top-k, LGC
FAMILIES = [("codecs and top-k", METHODS[:7]), ("LGC", METHODS[:1] + METHODS[7:])]
LABELS = {  # the picture's names of the long ones
    "LGC-PS, own codes, every worker's candidates, density x workers, DGC momentum":
        "LGC-PS, own codes, every worker's top-k, DGC momentum",
    "LGC-PS, own codes, every worker's candidates, density x workers, signs, clip, DGC momentum":
        "LGC-PS, own codes, every worker's top-k, signs, 'clip', DGC momentum",
    "LGC-RAR, every worker's candidates, density x workers, DGC momentum": "LGC-RAR, every worker's top-k, DGC momentum",
}
DIVERGED = 0.2  # a final accuracy below this: the run diverged (10 classes: chance is 0.1)


def last_epoch_steps(log):
    return sum(p["steps"][1] + 1 - p["steps"][0] for p in log["epochs"][-1]["phases"])


def points(results):
    """method -> {seed: (final accuracy, bytes rank 0 sent per step in the last epoch)}, in METHODS order."""
    out = {}
    for method in METHODS:
        logs = results.get(method, [])
        if logs:
            out[method] = {log["args"]["seed"]: (log["epochs"][-1]["test_accuracy"],
                                                 log["epochs"][-1]["bytes_sent"] / last_epoch_steps(log))
                           for log in logs}
    return out


def front(summary):
    """The methods no other beats: none sends at most as many bytes for a higher mean accuracy."""
    return {m for m, (acc, sent) in summary.items()
            if not any(a > acc and s <= sent for n, (a, s) in summary.items() if n != m)}


def table(panel, pts):
    summary = {m: (np.mean([a for a, _ in by_seed.values()]), np.mean([s for _, s in by_seed.values()]))
               for m, by_seed in pts.items()}
    best = front(summary)
    base = pts.get("uncompressed", {})
    rows = ["| %s | seeds | final test accuracy, mean | lowest, highest seed | vs uncompressed, points (paired) "
            "| bytes sent by rank 0 per step | x fewer than uncompressed | Pareto front |" % panel,
            "|---|---|---:|---:|---:|---:|---:|---|"]
    for m in sorted(pts, key=lambda m: -summary[m][1]):
        accs = [a for a, _ in pts[m].values()]
        paired = [pts[m][s][0] - base[s][0] for s in pts[m] if s in base]
        died = sum(a < DIVERGED for a in accs)
        rows.append("| %s | %s | %.4f | %.4f, %.4f | %s | %s | %s | %s |" % (
            m, ", ".join(str(s) for s in sorted(pts[m])), summary[m][0], min(accs), max(accs),
            "" if m == "uncompressed" or not paired else "%+.2f" % (100 * np.mean(paired)),
            "{:,.0f}".format(summary[m][1]),
            "" if m == "uncompressed" or "uncompressed" not in summary else "%.0f" % (summary["uncompressed"][1]
                                                                                     / summary[m][1]),
            ("yes" if m in best else "") + (" (%d of its seeds diverged)" % died if died else "")))
    return "\n".join(rows)


def pareto_front(points):
    """The (bytes, accuracy) points that no other point beats on both: fewer or as many bytes and a higher
    accuracy; in order of bytes."""
    front = []
    for sent, acc in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or acc > front[-1][1]:
            front.append((sent, acc))
    return front


def plot(panels):
    """One column per setting, one row per family of methods; the setting's Pareto front (over all its
    methods) in both rows."""
    plt = pyplot()
    fig, axes = plots.grid(len(FAMILIES) * len(panels), width=6.5, height=5.8)
    for row, (family, methods) in enumerate(FAMILIES):
        for ax, (title, pts) in zip(axes[row * len(panels):], panels):
            trained = [a for s in pts.values() for a, _ in s.values() if a >= DIVERGED]
            low = min(trained) - 0.01  # the frame's bottom: a diverged seed's bar goes below it
            means = {}
            for m, by_seed in pts.items():
                accs = np.array([a for a, _ in by_seed.values()])
                means[m] = (np.mean([s for _, s in by_seed.values()]), accs.mean(), accs)
            front = pareto_front([(s, a) for s, a, _ in means.values() if a >= low])
            ax.step([s for s, _ in front], [a for _, a in front], where="post", color="0.4", linestyle="--", lw=1)
            for m in (m for m in methods if m in means):
                sent, mean, accs = means[m]
                i = methods.index(m)  # (a colour of its own in its family's panels; uncompressed the first)
                color, marker = plt.cm.tab10(i), "osD^v<>p"[i]
                if mean < low:  # diverged seeds pull the mean below the frame: a cross on its bottom
                    ax.plot([sent], [low + 0.002], "x", color=color, markersize=9, label="%s (%d of %d seeds "
                            "diverged)" % (LABELS.get(m, m), sum(accs < DIVERGED), len(accs)))
                    continue
                bars = [[max(0.0, mean - accs.min())], [max(0.0, accs.max() - mean)]]  # (a mean's rounding)
                ax.errorbar([sent], [mean], yerr=bars, fmt=marker, capsize=3, color=color, label=LABELS.get(m, m))
            ax.set_xscale("log")
            ax.set_xlabel("bytes sent by rank 0 per step (last epoch)")
            ax.set_ylabel("final test accuracy (mean; bars: lowest, highest seed)")
            ax.set_title("%s: %s" % (title, family), fontsize=10)
            ax.set_ylim(low, None)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12))  # below: no point hidden
    fig.suptitle("Dashed: the Pareto front of each setting (over both rows' methods: none more accurate for fewer "
                 "bytes); tools/study_pareto.py", fontsize=10)
    fig.tight_layout()
    fig.savefig(PICTURE, dpi=100, bbox_inches="tight")
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--panels", nargs="+", choices=list(PANELS), default=list(PANELS))
    parser.add_argument("--report", action="store_true", help="train nothing: the picture and tables of the saved runs")
    parser.add_argument("--markdown", help="a page whose study_pareto section gets the tables")
    args = parser.parse_args(argv)
    made, read = [], {}
    for name in args.panels:
        title, study_args, file_name = PANELS[name]
        path = os.path.join(RESULTS, file_name)
        if not args.report:
            study_lgc.main(study_args + ["--configs"] + METHODS + ["--reuse"])
        runs = study_runs.read(path)
        read["lab/lgc_study/" + file_name] = [run["provenance"] for run in runs]
        made.append((title, points(study_runs.by_config(runs))))
    plot(made)
    text = "\n\n".join(table(title, pts) for title, pts in made)
    print(text)
    if args.markdown:
        write_section(args.markdown, "study_pareto", "Command: `.venv/bin/python -m tools.study_pareto%s`\n\n%s\n\n%s"
                      % ("" if args.panels == list(PANELS) else " --panels " + " ".join(args.panels), text,
                         provenance.data_note(read)))


if __name__ == "__main__":
    main()
