#!/usr/bin/env python
"""The tables of README.md, docs/choosing.md, docs/results.md and the LGC study's findings, made from the
result files under lab/.

    python -m tools.doc_tables           # rewrites the tables between their markers
    python -m tools.doc_tables --check   # exits 1 (naming the table) where a page differs from its data

Each number in those tables is read from one file: the 6-epoch accuracy studies (`make study`,
lab/accuracy/accuracy.jsonl; `make study-seeds`, 10 seeds of uncompressed and 4bit with groups,
lab/accuracy/accuracy_10seeds.jsonl), the sparse methods' studies (`make study-lgc`,
lab/lgc_study/lgc_study_w2.jsonl, lgc_study_w4.jsonl and lgc_study_cnn-fc_w2.jsonl; `make study-lgc-seeds`,
lab/lgc_study/seeds/lgc_study_w2.jsonl) and the step times on emulated hosts (`make
bench-emulated-targets`, lab/bench_emulated/cnn.csv).  tests/test_doc_numbers.py runs ``--check`` and, in
README.md and docs/choosing.md, also refuses a measured number written by hand outside the tables.
"""
import argparse
import csv
import os
import sys

import numpy as np

from tools import provenance, study_runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "lab")
PAGES = {"README.md": ("speed", "methods"), os.path.join("docs", "choosing.md"): ("choosing",),
         os.path.join("docs", "results.md"): ("seeds", "scaling"),
         os.path.join("lab", "lgc_study", "findings.md"): ("lgc_w2", "lgc_w4", "lgc_cnn-fc_w2", "lgc_seeds_w2")}


READ = {}  # the data a table read: source file -> the provenance of each row read (tools/provenance.py)


def _read(source, provenances):
    READ.setdefault(source, []).extend(provenances)


def _final(log):
    return log["epochs"][-1]["test_accuracy"]


class Study:
    """One accuracy study's runs: configuration -> {seed: log}."""

    def __init__(self, configs, command, source, epochs):
        self.configs, self.command, self.source, self.epochs = configs, command, source, epochs

    def seeds(self, config):
        return sorted(self.configs[config])

    def accuracy(self, config):
        return float(np.mean([_final(log) for log in self.configs[config].values()]))

    def difference(self, config, baseline="uncompressed"):
        """The mean over the seeds both have of (config's final accuracy - the baseline's), in points."""
        a, b = self.configs[config], self.configs[baseline]
        return 100 * float(np.mean([_final(a[s]) - _final(b[s]) for s in sorted(set(a) & set(b))]))

    def mb_last_epoch(self, config):
        """MB rank 0's sockets sent in the last epoch, mean over seeds."""
        return float(np.mean([log["epochs"][-1]["bytes_sent"] for log in self.configs[config].values()])) / 1e6


def accuracy_study(file_name="accuracy.jsonl", command="make study"):
    """A 6-epoch CNN study of tools/study_accuracy.py (`make study`, or `make study-seeds`: 10 seeds of
    fewer configurations), its configurations told apart by the example's arguments (the tuned 2bit
    threshold and one group are the ones run on the most seeds)."""
    by_config, provs = {}, {}
    for run in study_runs.read(os.path.join(RESULTS, "accuracy", file_name)):
        a = run["log"]["args"]
        kind = a["compression"]
        if kind == "none":
            name = "uncompressed"
        elif kind in ("2bit", "gc_2bit"):
            name = "%s 2bit (threshold %g)" % ("MXNet" if kind == "2bit" else "mxnet_gc", a["threshold"])
        elif kind == "4bit" and a["groups"]:
            name = "4bit, per-layer groups" + (", compressed pull" if a["compressed_pull"] else "") + \
                (", %d bits" % a["pull_bits"] if a.get("pull_bits") else "")
        elif kind == "4bit":
            name = "4bit, one group (%s)" % a["thresholds"]
        else:
            name = "layer-wise top-k %g, DGC momentum" % a["density"]
        by_config.setdefault(name, {})[a["seed"]] = run["log"]
        provs.setdefault(name, {})[a["seed"]] = run["provenance"]
    best = {prefix: max((n for n in by_config if n.startswith(prefix)), key=lambda n: len(by_config[n]))
            for prefix in ("MXNet 2bit", "4bit, one group") if any(n.startswith(prefix) for n in by_config)}
    tuned = {n: runs for n, runs in by_config.items()  # (the sweeps' other points: seed 1 only)
             if all(not n.startswith(prefix) or n == b for prefix, b in best.items())}
    _read("lab/accuracy/" + file_name, [provs[n][s] for n in tuned for s in tuned[n]])
    return Study(tuned, command, "lab/accuracy/" + file_name, 6)


def seeds_study():
    """`make study-seeds`: uncompressed and 4bit with groups, with and without compressed pulls, 10 seeds."""
    return accuracy_study("accuracy_10seeds.jsonl", "make study-seeds")


def sparse_study(workers=2, model="cnn", folder="lgc_study", command="make study-lgc study-pareto"):
    """Every method on the CNN with 2 workers, 3 epochs, 3 seeds (`make study-lgc` and `tools/study_pareto.py`),
    or with 4 workers, 6 epochs; on cnn-fc with 2 workers, 3 short epochs, 2 seeds (``folder``
    "lgc_study/seeds": `make study-lgc-seeds`, a few of them on more seeds)."""
    name = "lgc_study_%sw%d.jsonl" % ("" if model == "cnn" else model + "_", workers)
    runs = study_runs.read(os.path.join(RESULTS, folder, name))
    data = study_runs.by_config(runs)
    _read("lab/%s/%s" % (folder, name), [run["provenance"] for run in runs])
    return Study({c: {log["args"]["seed"]: log for log in logs} for c, logs in data.items()},
                 command, "lab/%s/%s" % (folder, name), 3 if workers == 2 else 6)


STEPS = "`make bench-emulated-targets`"
STEPS_FILE = ("bench_emulated", "cnn.csv")


def step_times():
    """Step times of the CNN on emulated hosts (`make bench-emulated-targets`): {(mode, rate, workers): row}."""
    with open(os.path.join(RESULTS, *STEPS_FILE)) as f:
        rows = list(csv.DictReader(f))
    _read("lab/" + "/".join(STEPS_FILE), rows)
    return {(r["mode"], r["rate"], int(r["workers"])): r for r in rows}


def steps_per_epoch(study, config):
    log = next(iter(study.configs[config].values()))
    return log["epochs"][-1]["phases"][-1]["steps"][1] + 1 - log["epochs"][-1]["phases"][0]["steps"][0]


CLASSIC_ROWS = [("none", "MXNet's own `dist_sync`, uncompressed", "`mx.kv.create('dist_sync')`"),
                ("classic-2bit", "MXNet's 2bit (its own kernels), on mxnet_gc's store",
                 "`{'type': '2bit', 'threshold': 0.5}`"),
                ("classic-4bit", "4bit pushes, float32 weight pulls", "`{'type': '4bit', 'compressed_pull': False}`"),
                ("classic-4bit-cpull", "**4bit both ways** (the default)", "`{'type': '4bit'}`")]


def speed_table():
    """README.md's first table: a Module.fit-shaped step (the optimizer on the servers) per setting, with its
    speed-up over MXNet's uncompressed dist_sync and the bytes a worker receives."""
    rows = {mode: r for (mode, rate, workers), r in step_times().items() if (rate, workers) == ("100mbit", 2)}
    base = float(rows["none"]["step_ms"])
    out = ["| what the workers send and pull | `set_gradient_compression(...)` | step, ms | faster than MXNet's "
           "dist_sync | received per step, KB |", "|---|---|---:|---:|---:|"]
    for mode, name, params in CLASSIC_ROWS:
        r = rows[mode]
        out.append("| %s | %s | %.0f | %.1fx | %.0f |" % (name, params, float(r["step_ms"]), base / float(r["step_ms"]),
                                                         1e3 * float(r["worker0_received_mb_per_step"])))
    return "\n".join(out + ["", "Source: %s (lab/%s: the Fashion-MNIST CNN, %s parameters, 2 workers and "
                                "a server, emulated hosts of one core each on links of 100 Mbit/s, MXNet's own "
                                "gluon.Trainer with SGD and momentum 0.9 on the servers as "
                                "Module.fit trains; the median step of 3 runs, timed after the warm-up; the benchmark gives 4bit the fixed "
                                "levels 'medium', which change no byte)."
                             % (STEPS, "/".join(STEPS_FILE), "{:,}".format(int(rows["none"]["parameters"])))])


def methods_table():
    """README.md: every method on the same job, epochs and seeds (the CNN, 2 workers, 3 epochs, seeds 1-3:
    `tools/study_pareto.py`'s first setting), with its step time on shaped links."""
    study, bench = sparse_study(), step_times()
    rows = [
        ("uncompressed, parameter server", "`{'type': 'none'}`", "uncompressed", "gc-none"),
        ("uncompressed, Horovod allreduce", "`{'type': 'none'}` on `create('horovod')`", None, "hvd-gc-none"),
        ("MXNet 2bit, its best threshold", "`{'type': '2bit', 'threshold': 0.005}`", "MXNet 2bit", None),
        ("4bit, per-layer threshold groups", "`{'type': '4bit'}` + `threshold_groups='auto'`",
         "4bit, per-layer groups", "4bit-groups"),
        ("4bit groups, compressed pulls", "... + `'compressed_pull': True`", "4bit, per-layer groups, compressed pull",
         None),
        ("layer-wise top-k 1e-2, DGC momentum",
         "`{'type': 'layerwise_topk', 'density': 1e-2, 'momentum': 0.9}`, SGD without momentum",
         "top-k 1e-2, DGC momentum", None),
        ("layer-wise top-k 1e-3, DGC momentum", "the same at `'density': 1e-3`", "top-k 1e-3, DGC momentum", None),
        ("layer-wise top-k 1e-3, error feedback", "`{'type': 'layerwise_topk', 'density': 1e-3}`",
         "top-k (error feedback)", "topk-1e-3"),
        ("LGC's schedule without the autoencoder", "`{'type': 'lgc', 'density': 1e-3, 'autoencoder': False}`",
         "LGC without autoencoder", None),
        ("LGC-PS, density 1e-3", "`{'type': 'lgc', 'density': 1e-3}`", "LGC-PS", "lgc"),
        ("LGC-RAR, density 1e-3", "the same on `create('horovod')`", "LGC-RAR", "hvd-lgc"),
        ("uncompressed, SGD without momentum", "`{'type': 'none'}`, SGD without momentum",
         "uncompressed, SGD without momentum", None),
        ("LGC's schedule without the autoencoder, DGC momentum",
         "`{'type': 'lgc', 'density': 1e-3, 'autoencoder': False, 'momentum': 0.9}`, SGD without momentum",
         "LGC without autoencoder, DGC momentum", None),
        ("LGC-PS, every worker's top 1e-3 coded, DGC momentum",
         "`{'type': 'lgc', 'density': 2e-3, 'codes': 'own', 'index': 'union', 'momentum': 0.9}` (2 workers), "
         "SGD without momentum", "LGC-PS, own codes, every worker's candidates, density x workers, DGC momentum", None),
        ("LGC-PS, the same with each value's sign and 'clip'", "... + `'signs': True, 'error_feedback': 'clip'`",
         "LGC-PS, own codes, every worker's candidates, density x workers, signs, clip, DGC momentum", None),
        ("LGC-RAR, every worker's top 1e-3 coded, DGC momentum",
         "`{'type': 'lgc', 'density': 2e-3, 'index': 'union', 'momentum': 0.9}` on `create('horovod')`, SGD "
         "without momentum", "LGC-RAR, every worker's candidates, density x workers, DGC momentum", None),
    ]
    out = ["| method | `compression_params` | final test accuracy | vs uncompressed, points | bytes sent by rank 0 "
           "per step | step, emulated hosts at 100 Mbit/s, ms |", "|---|---|---:|---:|---:|---:|"]
    for name, params, config, mode in rows:
        cells = [name, params]
        if config is None:
            cells += ["", "", ""]
        else:
            died = " (diverged, every seed)" if study.accuracy(config) < 0.2 else ""
            cells += ["%.4f%s" % (study.accuracy(config), died), "" if config == "uncompressed" else
                      "%+.2f" % study.difference(config),
                      "{:,.0f}".format(1e6 * study.mb_last_epoch(config) / steps_per_epoch(study, config))]
        row = bench.get((mode, "100mbit", 2))
        cells.append("" if row is None else "%.0f" % float(row["step_ms"]))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out + ["", "Sources: accuracy and bytes `%s` (%s: the Fashion-MNIST CNN, 2 workers and a "
                                "server, %d epochs, seeds %s; each difference the mean over seeds of the paired "
                                "difference to uncompressed; bytes: rank 0's sockets in the last epoch, a "
                                "parameter-server worker's pushes, on Horovod everything it sends); step times "
                                "%s (lab/%s: the same model, 2 workers, emulated hosts of one core each "
                                "on links of 100 Mbit/s, median of 3 runs)."
                                % (study.command, study.source, study.epochs,
                                   ", ".join(map(str, study.seeds("uncompressed"))), STEPS, "/".join(STEPS_FILE))])


def choosing_table():
    """docs/choosing.md: which option when, its measured column from the same files."""
    six, ten, three, bench = accuracy_study(), seeds_study(), sparse_study(), step_times()
    two_bit = next(n for n in six.configs if n.startswith("MXNet 2bit"))
    one_group = next(n for n in six.configs if n.startswith("4bit, one group"))

    def acc(study, config):
        return "%+.2f points vs uncompressed (%d epochs, %d seeds; `%s`)" % (
            study.difference(config), study.epochs, len(study.seeds(config)), study.command)

    def step(mode, workers=2):
        return "%.0f ms a step on emulated hosts at 100 Mbit/s, %d workers (%s)" % (
            float(bench[(mode, "100mbit", workers)]["step_ms"]), workers, STEPS)

    rows = [
        ("`{'type': 'none'}` on mxnet_gc's store", "nothing on the wire", "", "the baseline; small models on fast "
         "links", step("gc-none")),
        ("`'2bit'`", "pushes 16x smaller (pulls stay float32)", "MXNet's kernels; every value sent is +-t, and most "
         "thresholds stop the network from learning (accuracy.md's sweep)", "comparing with MXNet; otherwise "
         "prefer `4bit`", "%s at its best threshold" % acc(six, two_bit)),
        ("`'gc_2bit'`", "the same bytes as `'2bit'`, bit for bit", "as `'2bit'`, with mxnet_gc's kernels and a "
         "dense warm-up", "you need exactly MXNet's 2bit encoding", "the same accuracy as `'2bit'` on every seed "
         "(accuracy.md)"),
        ("`'4bit'`", "pushes 8x smaller; 7 levels, so small and large values both survive", "the codec's time; a "
         "dense warm-up; levels too small for the gradients kill the network", "bandwidth-bound pushes, any "
         "model", "%s at the sweep's best levels" % acc(six, one_group)),
        ("`'4bit'` + `threshold_groups='auto'` (trainer)", "as 4bit, each layer its best of three threshold "
         "groups", "dense calibration steps", "layers whose gradients differ in scale; no sweep of the levels "
         "needed", "%s; %s" % (acc(ten, "4bit, per-layer groups"), step("4bit-groups"))),
        ("`... 'compressed_pull': True`", "pulls 8x smaller too: the servers re-encode the sum (the optimizer on "
         "the workers), or send their weights' changes (the optimizer on the servers)", "the servers' codec time; "
         "with the optimizer on the servers a copy of the weights on them and a warm-up; some accuracy",
         "the pull direction is the bottleneck (servers' links carry W pulls): with the optimizer on the servers, "
         "always", acc(ten, "4bit, per-layer groups, compressed pull")),
        ("`{'type': 'layerwise_topk', 'density': d}`", "pushes about 2d of the dense bytes (values and indices), "
         "pulls sparse", "error feedback; accuracy needs a warm-up and DGC's momentum correction (`'momentum'`)",
         "slow links and large layers; d of 1e-2 to 1e-3", "at 1e-2 with DGC's momentum: %s; at 1e-3 with "
         "error feedback: %s; %s" % (acc(three, "top-k 1e-2, DGC momentum"), acc(three, "top-k (error feedback)"),
                                     step("topk-1e-3"))),
        ("trainer `merge='dp'`, `pipeline=True`", "one message for many small layers, sent as soon as backward "
         "produced them", "profile steps", "many small layers, or slow links where overlap pays",
         "layerwise_sparsification.md"),
        ("`mxnet_gc.kvstore.create('horovod')`", "no servers: ring allreduce (dense), allgather (coded), or for "
         "2bit and 4bit with `'compressed_pull': True` the compressed allreduce (alltoall and allgather of parts: "
         "constant bytes per worker as workers grow, "
         "[kvstore.md](kvstore.md#the-compressed-allreduce-compressed_pull-true-2bit-and-4bit))",
         "needs Horovod built with MXNet and Gloo (`make horovod`); allgathered messages grow with the workers "
         "(migration.md)", "no spare machines for servers; dense gradients on fast links",
         "uncompressed: %s" % step("hvd-gc-none")),
        ("`{'type': 'lgc', 'density': d}`", "on the coded layers fewer bytes than top-k at the same density",
         "an autoencoder trained during the first phase; CPU time per step", "very slow links, models whose "
         "workers' gradients share structure", "LGC-PS at 1e-3: %s; with DGC's momentum and every worker's top 1e-3 "
         "coded: %s; %s" % (acc(three, "LGC-PS"), acc(three, "LGC-PS, own codes, every worker's candidates, density x "
                                                        "workers, DGC momentum"), step("lgc"))),
        ("`create('dist_async')`", "no barrier: each push applied at once", "stale gradients, as MXNet's "
         "dist_async", "stragglers; the optimizer runs on the servers", "kvstore.md"),
    ]
    out = ["| option | saves | costs | use it when | measured |", "|---|---|---|---|---|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _dgc_rows(density, subtract=False, tuned=False):
    """The rows with DGC's momentum correction, the same for 2 and 4 workers but for the density of every
    worker's candidates (W x 1e-3) in their labels and two rows run with one of them (``subtract``,
    ``tuned``)."""
    cand, config = "LGC-PS, own codes, every worker's candidates, density %s" % density, \
        "LGC-PS, own codes, every worker's candidates, density x workers"
    rar, rar_config = "LGC-RAR, every worker's candidates, density %s" % density, \
        "LGC-RAR, every worker's candidates, density x workers"
    rows = [("uncompressed, SGD without momentum", "uncompressed, SGD without momentum"),
            ("LGC without autoencoder, DGC momentum (`momentum` 0.9, SGD without momentum)",
             "LGC without autoencoder, DGC momentum"),
            ("LGC-PS, density 1e-3, DGC momentum", "LGC-PS, DGC momentum"),
            (cand + ", DGC momentum", config + ", DGC momentum")]
    if subtract:
        rows.append((cand + ", `error_feedback` 'subtract', DGC momentum", config + ", subtract, DGC momentum"))
    rows += [(cand + ", `error_feedback` 'clip', DGC momentum", config + ", clip, DGC momentum"),
             (rar + ", DGC momentum", rar_config + ", DGC momentum"),
             (rar + ", `error_feedback` 'clip', DGC momentum", rar_config + ", clip, DGC momentum"),
             ("LGC without autoencoder, DGC momentum, `dense_momentum` (the tensors sent dense too)",
              "LGC without autoencoder, DGC momentum, dense momentum"),
             ("LGC-PS, density 1e-3, DGC momentum, `dense_momentum`", "LGC-PS, DGC momentum, dense momentum"),
             (cand + ", DGC momentum, `dense_momentum`", config + ", DGC momentum, dense momentum"),
             (cand + ", `latent_channels` 8, DGC momentum", config + ", latent 8, DGC momentum"),
             (cand + ", `innovation_density` 1e-4, DGC momentum", config + ", innovation 1e-4, DGC momentum")]
    if tuned:
        rows.append((cand + ", fine-tuned every 100, DGC momentum", config + ", fine-tuned every 100, DGC momentum"))
    return rows + [
        (cand + ", `signs`, DGC momentum", config + ", signs, DGC momentum"),
        (cand + ", `signs`, `error_feedback` 'clip', DGC momentum", config + ", signs, clip, DGC momentum"),
        ("LGC-PS, exact at every worker's candidates, density %s (the train phase to the end), DGC momentum"
         % density, "LGC-PS, exact at every worker's candidates, density x workers, DGC momentum"),
        ("LGC without autoencoder, density 7e-4 (about LGC-PS's bytes with the candidates), DGC momentum",
         "LGC without autoencoder, density 0.7 x, DGC momentum")]


# lab/lgc_study/findings.md's study tables: (row label, configuration of tools/study_lgc.py)
LGC_ROWS = {
    ("cnn", 2): [("uncompressed", "uncompressed"),
        ("top-k (error feedback), density 1e-3", "top-k (error feedback)"),
        ("LGC-PS, density 1e-3", "LGC-PS"),
        ("LGC-RAR, density 1e-3", "LGC-RAR"),
        ("LGC without autoencoder", "LGC without autoencoder"),
        ("LGC-PS, own codes (`codes: 'own'`)", "LGC-PS, own codes"),
        ("LGC-PS, `innovation_density` 1e-4", "LGC-PS, innovation 1e-4"),
        ("LGC-PS, fine-tuned every 100 (`fine_tune_every: 100`)", "LGC-PS, fine-tuned every 100"),
        ("LGC-PS, larger autoencoder (`encoder_channels` [64, 128, 256, 64])", "LGC-PS, larger autoencoder"),
        ("LGC-PS, density 2e-3 (`density` x workers)", "LGC-PS, density x workers"),
        ("LGC-PS, own codes, every worker's candidates (`index` 'union')", "LGC-PS, own codes, every worker's candidates"),
        ("LGC-PS, own codes, every worker's candidates, density 2e-3, `error_feedback` 'subtract'",
         "LGC-PS, own codes, every worker's candidates, density x workers, subtract"),
        ("LGC-RAR, every worker's candidates, density 2e-3", "LGC-RAR, every worker's candidates, density x workers"),
        ("LGC-RAR, every worker's candidates, density 2e-3, `error_feedback` 'subtract'",
         "LGC-RAR, every worker's candidates, density x workers, subtract")] + _dgc_rows("2e-3", subtract=True),
    ("cnn", 4): [("uncompressed", "uncompressed"),
        ("top-k (error feedback), density 1e-3", "top-k (error feedback)"),
        ("LGC-PS, density 1e-3", "LGC-PS"),
        ("LGC-RAR, density 1e-3", "LGC-RAR"),
        ("LGC without autoencoder", "LGC without autoencoder"),
        ("LGC-PS, own codes", "LGC-PS, own codes"),
        ("LGC-PS, density 4e-3 (`density` x workers)", "LGC-PS, density x workers"),
        ("LGC-PS, exact at the leader's indices (the train phase to the end)", "LGC-PS, exact at the leader's indices"),
        ("LGC-PS, own codes, every worker's candidates (`index` 'union')", "LGC-PS, own codes, every worker's candidates"),
        ("LGC-PS, own codes, every worker's candidates, `error_feedback` 'subtract'",
         "LGC-PS, own codes, every worker's candidates, subtract"),
        ("LGC-PS, exact at every worker's candidates (the train phase to the end)",
         "LGC-PS, exact at every worker's candidates"),
        ("LGC-PS, own codes, every worker's candidates, density 4e-3",
         "LGC-PS, own codes, every worker's candidates, density x workers"),
        ("LGC-PS, own codes, every worker's candidates, density 4e-3, `error_feedback` 'subtract'",
         "LGC-PS, own codes, every worker's candidates, density x workers, subtract"),
        ("LGC-PS, own codes, every worker's candidates, density 8e-3, `error_feedback` 'subtract'",
         "LGC-PS, own codes, every worker's candidates, density 2 x workers, subtract"),
        ("LGC-RAR, every worker's candidates, density 4e-3", "LGC-RAR, every worker's candidates, density x workers"),
        ("LGC-RAR, every worker's candidates, density 4e-3, `error_feedback` 'subtract'",
         "LGC-RAR, every worker's candidates, density x workers, subtract")] + _dgc_rows("4e-3", tuned=True),
    ("cnn-fc", 2): [("uncompressed", "uncompressed"),
                    ("top-k (error feedback), density 1e-3", "top-k (error feedback)"),
                    ("LGC-PS, density 1e-3", "LGC-PS"),
                    ("LGC-RAR, density 1e-3", "LGC-RAR"),
                    ("LGC without autoencoder", "LGC without autoencoder"),
                    ("LGC without autoencoder, DGC momentum (`momentum` 0.9, SGD without momentum)",
                     "LGC without autoencoder, DGC momentum"),
                    ("LGC-PS, own codes, every worker's candidates, density 2e-3, DGC momentum",
                     "LGC-PS, own codes, every worker's candidates, density x workers, DGC momentum"),
                    ("LGC-RAR, every worker's candidates, density 2e-3, DGC momentum",
                     "LGC-RAR, every worker's candidates, density x workers, DGC momentum"),
                    ("LGC without autoencoder, DGC momentum, `dense_momentum` (the tensors sent dense too)",
                     "LGC without autoencoder, DGC momentum, dense momentum"),
                    ("LGC-PS, own codes, every worker's candidates, density 2e-3, DGC momentum, `dense_momentum`",
                     "LGC-PS, own codes, every worker's candidates, density x workers, DGC momentum, dense momentum"),
                    ("LGC-PS, exact at every worker's candidates, density 2e-3 (the train phase to the end), DGC "
                     "momentum", "LGC-PS, exact at every worker's candidates, density x workers, DGC momentum"),
                    ("LGC-PS, own codes, every worker's candidates, density 2e-3, `signs`, DGC momentum",
                     "LGC-PS, own codes, every worker's candidates, density x workers, signs, DGC momentum"),
                    ("LGC-PS, own codes, every worker's candidates, density 2e-3, `signs`, `error_feedback` 'clip', "
                     "DGC momentum", "LGC-PS, own codes, every worker's candidates, density x workers, signs, clip, "
                     "DGC momentum"),
                    ("LGC-PS, the same, trained on whole vectors (`ae_window` 0)", "LGC-PS, own codes, every worker's "
                     "candidates, density x workers, signs, clip, whole vectors, DGC momentum")],
}
DIVERGED = 0.15  # a final accuracy near chance (10 classes): the run diverged


def lgc_table(workers, model="cnn"):
    """lab/lgc_study/findings.md: the study of ``model`` with ``workers`` workers, a row per configuration run (seeds, mean,
    difference to uncompressed with its standard deviation, MB rank 0 sent in the last epoch)."""
    study = sparse_study(workers, model)
    steps = steps_per_epoch(study, "uncompressed")
    seeds = study.seeds("uncompressed")
    lines = ["| %s%d workers | seeds %s | mean | vs uncompressed, points | MB sent by rank 0, last epoch (%d steps) |"
             % ("" if model == "cnn" else model + ", ", workers, ", ".join(map(str, seeds)), steps),
             "|---|---|---:|---:|---:|"]
    base = study.configs["uncompressed"]
    for label, config in LGC_ROWS[model, workers]:
        if config not in study.configs:
            continue
        runs = study.configs[config]
        accs = ["%.4f%s" % (_final(runs[s]), " (diverged)" if _final(runs[s]) < DIVERGED else "") for s in sorted(runs)]
        diffs = [100 * (_final(runs[s]) - _final(base[s])) for s in sorted(runs)]
        diff = "" if config == "uncompressed" else "%+.2f (sd %.2f)" % (np.mean(diffs), np.std(diffs, ddof=1))
        trained = [s for s in sorted(runs) if _final(runs[s]) >= DIVERGED]
        if config != "uncompressed" and not trained:
            diff += "; every seed diverged"
        elif config != "uncompressed" and len(trained) < len(runs):
            diff += "; seeds %s: %+.2f" % (", ".join(map(str, trained)),
                                          np.mean([100 * (_final(runs[s]) - _final(base[s])) for s in trained]))
        lines.append("| %s | %s | %.4f | %s | %.2f |" % (label, ", ".join(accs), study.accuracy(config), diff,
                                                         study.mb_last_epoch(config)))
    return "\n".join(lines)


ABLATION = "LGC without autoencoder, DGC momentum"
SEEDS_ROWS = [("uncompressed", "uncompressed"),
              ("LGC without autoencoder, DGC momentum (the ablation)", ABLATION),
              ("LGC-PS, own codes, every worker's candidates, density 2e-3, `signs`, `error_feedback` 'clip', DGC "
               "momentum", "LGC-PS, own codes, every worker's candidates, density x workers, signs, clip, DGC momentum")]


def lgc_seeds_table():
    """lab/lgc_study/findings.md: LGC-PS's recommended setting, its ablation and uncompressed on more seeds (the CNN, 2
    workers): each seed's accuracy, the mean, and the mean paired difference to uncompressed and to the
    ablation with its standard deviation."""
    study = sparse_study(2, folder=os.path.join("lgc_study", "seeds"), command="make study-lgc-seeds")
    lines = ["| 2 workers, `%s` | seeds %s | mean | vs uncompressed, points | vs the ablation, points |"
             % (study.command, ", ".join(map(str, study.seeds("uncompressed")))), "|---|---|---:|---:|---:|"]
    for label, config in SEEDS_ROWS:
        runs = study.configs[config]
        cells = []
        for baseline in ("uncompressed", ABLATION):
            base = study.configs[baseline]
            diffs = [100 * (_final(runs[s]) - _final(base[s])) for s in sorted(runs)]
            cells.append("" if config == baseline else "%+.2f (sd %.2f)" % (np.mean(diffs), np.std(diffs, ddof=1)))
        lines.append("| %s | %s | %.4f | %s | %s |" % (label, ", ".join("%.4f" % _final(runs[s]) for s in sorted(runs)),
                                                      study.accuracy(config), *cells))
    return "\n".join(lines)


def seeds_table():
    """docs/results.md: uncompressed, 4bit with per-layer groups and with compressed pulls on 10 seeds (the CNN,
    2 workers, 6 epochs): the mean final accuracy, the paired difference with its spread, the bytes."""
    study = seeds_study()
    out = ["| `%s`: the CNN, 2 workers, %d epochs | seeds | final test accuracy, mean | vs uncompressed, points "
           "(sd) | MB sent by rank 0, last epoch |" % (study.command, study.epochs), "|---|---:|---:|---:|---:|"]
    base = study.configs["uncompressed"]
    for config in ("uncompressed", "4bit, per-layer groups", "4bit, per-layer groups, compressed pull"):
        runs = study.configs[config]
        diffs = [100 * (_final(runs[s]) - _final(base[s])) for s in sorted(set(runs) & set(base))]
        out.append("| %s | %d | %.4f | %s | %.1f |" % (
            config, len(runs), study.accuracy(config),
            "" if config == "uncompressed" else "%+.2f (%.2f)" % (np.mean(diffs), np.std(diffs, ddof=1)),
            study.mb_last_epoch(config)))
    return "\n".join(out)


SCALING_FILES = {"fmnist-cnn": ("bench_emulated", "scaling_cnn.csv"),
                 "mlp10m": ("bench_emulated", "scaling_mlp10m.csv")}


def scaling_table():
    """docs/results.md: 4bit both ways on the parameter server (W/2 servers) and on Horovod, 2 to 16 workers on
    emulated hosts at 100 Mbit/s: the step against the larger of its wire bound and its compute."""
    out = ["| model | mode | workers | step, ms | wire bound, ms | compute, ms | step / max(bound, compute) |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for model, parts in SCALING_FILES.items():
        with open(os.path.join(RESULTS, *parts)) as f:
            rows = list(csv.DictReader(f))
        _read("lab/" + "/".join(parts), rows)
        for r in sorted(rows, key=lambda r: (r["mode"], int(r["workers"]))):
            step, bound, compute = (float(r[k]) for k in ("step_ms", "wire_bound_ms", "compute_ms"))
            out.append("| %s | %s | %s | %.0f | %.0f | %.0f | %.2f |" % (
                model, r["mode"], r["workers"], step, bound, compute, step / max(bound, compute)))
    return "\n".join(out)


TABLES = {"speed": speed_table, "methods": methods_table, "choosing": choosing_table, "lgc_w2": lambda: lgc_table(2),
          "lgc_w4": lambda: lgc_table(4), "lgc_cnn-fc_w2": lambda: lgc_table(2, "cnn-fc"),
          "lgc_seeds_w2": lgc_seeds_table, "seeds": seeds_table, "scaling": scaling_table}


def made(name):
    """Table ``name`` with the line naming its data (data_note)."""
    READ.clear()
    table = TABLES[name]()
    return table + "\n\n" + provenance.data_note(READ)


def markers(name):
    return "<!-- doc_tables:%s:begin -->" % name, "<!-- doc_tables:%s:end -->" % name


def section(text, name):
    """The text between a table's markers in a page."""
    begin, end = markers(name)
    if begin not in text or end not in text:
        raise SystemExit("doc_tables.py: no %s ... %s markers" % (begin, end))
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare the pages with their data; change nothing")
    args = parser.parse_args(argv)
    stale = []
    for page, names in PAGES.items():
        path = os.path.join(ROOT, page)
        with open(path) as f:
            text = f.read()
        for name in names:
            table = made(name)
            if section(text, name) != table:
                stale.append("%s: table %r" % (page, name))
                begin, end = markers(name)
                head, rest = text.split(begin, 1)
                text = head + begin + "\n" + table + "\n" + end + rest.split(end, 1)[1]
        if not args.check:
            with open(path, "w") as f:
                f.write(text)
    if args.check and stale:
        print("doc_tables.py: differs from its data: %s (run python -m tools.doc_tables)" % "; ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
