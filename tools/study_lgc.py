#!/usr/bin/env python
"""LGC study: LGC-PS and LGC-RAR against uncompressed training, layer-wise top-k and LGC without its
autoencoder, on the Fashion-MNIST example, the same epochs and seeds for each, on real jobs.

The rows: uncompressed, layer-wise top-k (error feedback), LGC-PS, LGC-RAR and LGC without its
autoencoder (the ablation: LGC's dense tensors and density ramp, then top-k at the ramp's last density)
on the Fashion-MNIST example (and, by name, the other methods of tools/study_pareto.py: MXNet 2bit at
``make study``'s best threshold, 4bit with per-layer groups with and without compressed pulls, top-k with
DGC's momentum at densities 1e-2 and 1e-3, each dense for the same first --dense steps), the same epochs, hyperparameters and seeds for each, on real jobs (W
workers; 1 server through tools/launch.py, or for LGC-RAR the horovod store through horovodrun).  Top-k and LGC push dense for their first --dense steps; LGC then ramps its
density and trains its autoencoder (docs/lgc.md).  The default rows keep error feedback only, with
the optimizer's momentum on the sum (with DGC's momentum correction instead, top-k at density 1e-3 and
no ramp diverged here); the rows named "DGC momentum" run LGC with DGC's momentum correction (0.9) and
SGD without momentum, beside their control, "uncompressed, SGD without momentum" (", dense momentum":
the tensors sent dense push DGC's velocity too, option ``dense_momentum``).

Writes lab/lgc_study/lgc_study_<name>.jsonl (one run per line, tools/study_runs.py; every epoch in its log), lab/lgc_study/lgc_study_<name>_epochs.png and
lab/lgc_study/lgc_study_<name>_bytes.png, <name> being w<W> for the CNN, <model>_w<W> for another model, and
prints the table for lab/lgc_study/findings.md.

    .venv/bin/python -m tools.study_lgc [--model cnn] [--workers 2] [--epochs 3] [--seeds 1 2 3] [--density 1e-3]
        [--limit N] [--lr LR] [--configs uncompressed LGC-PS ... | --table-rows] [--more [--rerun LGC-PS ...]]
"""
import argparse
import json
import os

import numpy as np

from tools import progress, study_runs
from tools.doc_tables import LGC_ROWS
from tools.study_accuracy import ROOT, plot_curves, train, tuned_2bit


DEFAULT_CONFIGS = ["uncompressed", "top-k (error feedback)", "LGC-PS", "LGC-RAR", "LGC without autoencoder"]


def configs(args):
    dense = str(args.dense)
    sparse = ["--density", str(args.density)]
    common = (["--limit", str(args.limit)] if args.limit else []) + (["--lr", str(args.lr)] if args.lr else [])
    table = {
        "uncompressed": ["--compression", "none"],
        # the control of the rows with DGC's momentum correction, which replaces SGD's momentum
        "uncompressed, SGD without momentum": ["--compression", "none", "--momentum", "0"],
        "top-k (error feedback)": ["--compression", "layerwise_topk", "--dense-warmup-steps", dense] + sparse,
        "LGC-PS": ["--compression", "lgc", "--lgc-dense-steps", dense, "--ramp-steps", str(args.ramp),
                   "--ae-steps", str(args.ae)] + sparse,
        "LGC-RAR": ["--kvstore", "horovod", "--compression", "lgc", "--lgc-dense-steps", dense, "--ramp-steps",
                    str(args.ramp), "--ae-steps", str(args.ae)] + sparse,
        # the ablation: LGC's dense tensors and ramp, then the ramp's top-k to the end, no autoencoder
        "LGC without autoencoder": ["--compression", "lgc", "--lgc-dense-steps", dense, "--ramp-steps",
                                    str(args.ramp), "--lgc-options", json.dumps({"autoencoder": False})] + sparse,
    }
    def dgc(density):  # DGC's momentum correction in the codec, plain SGD on the workers
        return ["--compression", "layerwise_topk", "--density", density, "--merge", "dp", "--topk-momentum", "0.9",
                "--momentum", "0", "--dense-warmup-steps", dense]

    groups = ["--compression", "4bit", "--groups", "--calibration-steps", dense]
    table.update({
        "MXNet 2bit": ["--compression", "2bit", "--threshold", repr(args.threshold_2bit or tuned_2bit()),
                       "--dense-warmup-steps", dense],
        "4bit, per-layer groups": groups,
        "4bit, per-layer groups, compressed pull": groups + ["--compressed-pull"],
        "top-k 1e-2, DGC momentum": dgc("0.01"),
        "top-k 1e-3, DGC momentum": dgc("0.001"),
    })
    variants = {  # LGC-PS with other options
        "LGC-PS, fine-tuned every 100": {"fine_tune_every": 100},  # one more training step every 100 steps
        "LGC-PS, larger autoencoder": {"encoder_channels": [64, 128, 256, 64]},
        "LGC-PS, own codes": {"codes": "own"},  # every worker codes its own vector at the leader's indices
        # the index set drawn in turns from every worker's top-k, not the leader's alone
        "LGC-PS, own codes, every worker's candidates": {"codes": "own", "index": "union"},
        "LGC-PS, own codes, every worker's candidates, subtract": {"codes": "own", "index": "union",
                                                                  "error_feedback": "subtract"},
        "LGC-PS, innovation 1e-4": {"innovation_density": 1e-4},  # 10x more of each worker's own values, exact
        # the train phase to the end: every worker's exact values at the leader's indices (no estimate), which
        # separates what the estimates cost from what the leader's choice of coordinates costs
        "LGC-PS, exact at the leader's indices": {"ae_steps": 10 ** 6},
        "LGC-PS, exact at every worker's candidates": {"codes": "own", "index": "union", "ae_steps": 10 ** 6},
        "LGC-PS, exact at every worker's candidates, density x workers": {
            "codes": "own", "index": "union", "ae_steps": 10 ** 6, "density": args.density * args.workers},
        # as many coordinates a step as the ablation, whose W workers each send their own top-k
        "LGC-PS, density x workers": {"density": args.density * args.workers},
        "LGC-PS, own codes, every worker's candidates, density x workers": {
            "codes": "own", "index": "union", "density": args.density * args.workers},
        "LGC-PS, own codes, every worker's candidates, density x workers, subtract": {
            "codes": "own", "index": "union", "density": args.density * args.workers, "error_feedback": "subtract"},
        "LGC-PS, own codes, every worker's candidates, density 2 x workers, subtract": {
            "codes": "own", "index": "union", "density": 2 * args.density * args.workers, "error_feedback": "subtract"},
    }
    for config, options in variants.items():
        table[config] = table["LGC-PS"] + ["--lgc-options", json.dumps(options)]
    # LGC-RAR with every worker's candidates (an allgather of them), at W times the density, +- 'subtract'
    for feedback in ("zero", "subtract"):
        name = "LGC-RAR, every worker's candidates, density x workers" + ("" if feedback == "zero" else ", subtract")
        options = {"index": "union", "density": args.density * args.workers, "error_feedback": feedback}
        table[name] = table["LGC-RAR"] + ["--lgc-options", json.dumps(options)]
    # DGC's momentum correction (0.9) in LGC's accumulators and ramp, plain SGD on the workers; with
    # 'clip' error feedback (what an estimate missed, kept, no accumulator grown by its error)
    # (and, for LGC-PS with the candidates, a code of twice the channels, 10x more of each worker's own
    # values exact, fine-tuning, or each value's sign beside the code, without and with 'clip' and with
    # training on whole vectors: what the estimates cost against bytes; the train phase to the end at
    # the same set and the ablation at about LGC-PS's bytes: where LGC-PS's loss against the ablation
    # comes from)
    candidates = "every worker's candidates, density x workers"
    clip, latent, innovation = {"error_feedback": "clip"}, {"latent_channels": 8}, {"innovation_density": 1e-4}
    tuned = {"fine_tune_every": 100}
    for config, label, more in (("LGC without autoencoder", "", {}), ("LGC-PS", "", {}),
                                ("LGC without autoencoder", ", density 0.7 x", {"density": 0.7 * args.density}),
                                ("LGC-PS, own codes, " + candidates, "", {}),
                                ("LGC-PS, exact at " + candidates, "", {}),
                                ("LGC-PS, own codes, " + candidates + ", subtract", "", {}),
                                ("LGC-PS, own codes, " + candidates, ", clip", clip),
                                ("LGC-PS, own codes, " + candidates, ", latent 8", latent),
                                ("LGC-PS, own codes, " + candidates, ", innovation 1e-4", innovation),
                                ("LGC-PS, own codes, " + candidates, ", fine-tuned every 100", tuned),
                                ("LGC-PS, own codes, " + candidates, ", signs", {"signs": True}),
                                ("LGC-PS, own codes, " + candidates, ", signs, clip", dict(clip, signs=True)),
                                ("LGC-PS, own codes, " + candidates, ", signs, clip, whole vectors",
                                 dict(clip, signs=True, ae_window=0)),
                                ("LGC-RAR, " + candidates, "", {}), ("LGC-RAR, " + candidates, ", clip", clip)):
        argv, options = list(table[config]), {}
        if "--lgc-options" in argv:
            at = argv.index("--lgc-options")
            options = json.loads(argv.pop(at + 1))
            argv.pop(at)
        name = config + label + ", DGC momentum"
        table[name] = argv + ["--momentum", "0", "--lgc-options", json.dumps(dict(options, momentum=0.9, **more))]
        # the velocity on the dense tensors too
        if not more and not any(w in config for w in ("subtract", "RAR", "exact")):
            table[name + ", dense momentum"] = argv + ["--momentum", "0", "--lgc-options", json.dumps(
                dict(options, momentum=0.9, dense_momentum=True))]
    return {config: argv + common for config, argv in table.items()}


def example_args(config, seed, args, table):
    """The example's arguments for one configuration (its own: ``table[config]``) and seed."""
    warmup = ["--lr-warmup-epochs", repr(args.lr_warmup_epochs)] if args.lr_warmup_epochs else []
    return ["--model", args.model, "--epochs", str(args.epochs), "--lr-steps", args.lr_steps] + warmup + \
        ["--seed", str(seed)] + table[config]


def plot(results, path, x_of, xlabel):
    """The curves of ``results`` (configuration -> the logs of its seeds)."""
    plot_curves({c: {log["args"]["seed"]: log for log in logs} for c, logs in results.items() if logs}, path, x_of,
                xlabel)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["cnn", "cnn-fc"], default="cnn")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr-steps", default="")
    parser.add_argument("--lr-warmup-epochs", type=float, default=0, help="the example's warm-up of the learning rate "
                        "(from lr / workers to lr; lab/accuracy/findings.md: 1 with 4 workers)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--density", type=float, default=1e-3)
    parser.add_argument("--dense", type=int, default=200)
    parser.add_argument("--ramp", type=int, default=200)
    parser.add_argument("--ae", type=int, default=300)
    parser.add_argument("--limit", type=int, default=0, help="train on the first N images only (every run)")
    parser.add_argument("--lr", type=float, default=0, help="the learning rate (default: the example's)")
    parser.add_argument("--threshold-2bit", type=float, default=0, help="MXNet 2bit's threshold (default: the best "
                        "of make study's sweep)")
    parser.add_argument("--configs", nargs="+", help="run these configurations (default: %s)" % DEFAULT_CONFIGS)
    parser.add_argument("--table-rows", action="store_true", help="run every configuration of lab/lgc_study/findings.md's table "
                        "of this model and number of workers (tools/doc_tables.py's LGC_ROWS)")
    parser.add_argument("--results", default=os.path.join(ROOT, "lab", "lgc_study"), help="where the runs and plots go")
    parser.add_argument("--reuse", action="store_true", help="reuse the runs of --results' file that ran the same "
                        "code (printed as stored) and keep them there; the others run again")
    args = parser.parse_args(argv)
    table = configs(args)
    if args.table_rows:
        args.configs = [config for _, config in LGC_ROWS[args.model, args.workers]]
    unknown = set(args.configs or []) - set(table)
    if unknown:
        raise SystemExit("--configs: unknown %s; known: %s" % (sorted(unknown), list(table)))
    table = {c: a for c, a in table.items() if c in (args.configs or DEFAULT_CONFIGS)}
    name = "lgc_study_%sw%d" % ("" if args.model == "cnn" else args.model + "_", args.workers)
    path = os.path.join(args.results, name + ".jsonl")
    runs = study_runs.Runs(path, [path] if args.reuse and os.path.exists(path) else [])
    keys = {(c, seed): {"argv": example_args(c, seed, args, table), "workers": args.workers}
            for c in table for seed in args.seeds}
    todo = [ck for ck, key in keys.items() if runs.find(key) is None]
    done = progress.Progress(len(todo))
    results = {c: [] for c in table}
    for (config, seed), key in keys.items():
        made = (config, seed) in todo
        log = runs.get(key, lambda: train(key["argv"], args.workers), config=config)
        results[config].append(log)
        line = "%s, seed %d: final test accuracy %.4f%s" % (config, seed, log["epochs"][-1]["test_accuracy"],
                                                          runs.label(key))
        print(done.step(line) if made else line, flush=True)  # (each run is written to the file as it ends)
    if args.reuse:
        runs.keep_stored()
    runs.save()
    plot(results, os.path.join(args.results, name + "_epochs.png"), lambda log: [e["epoch"] for e in log["epochs"]],
         "epoch")
    plot(results, os.path.join(args.results, name + "_bytes.png"),
         lambda log: np.cumsum([e["bytes_sent"] for e in log["epochs"]]) / 1e6, "MB sent by rank 0 (cumulative)")
    rows = ["| %d workers | final test accuracy, mean | min | max | MB sent by rank 0, last epoch |" % args.workers,
            "|---|---:|---:|---:|---:|"]
    for config, logs in results.items():
        acc = [log["epochs"][-1]["test_accuracy"] for log in logs]
        sent = np.mean([log["epochs"][-1]["bytes_sent"] for log in logs]) / 1e6
        rows.append("| %s | %.4f | %.4f | %.4f | %.2f |" % (config, np.mean(acc), min(acc), max(acc), sent))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
