#!/usr/bin/env python
"""The network benchmark: a Gluon training step per compression on a bandwidth-limited cluster.

    .venv/bin/python -m tools.bench_network                 # the whole benchmark (about 40 minutes, root)
    .venv/bin/python -m tools.bench_network --models fmnist-cnn --modes none 4bit --rates 1gbit --workers 2
    .venv/bin/python -m tools.bench_network ... --repeats 3   # every job 3 times, in rounds, pooled

Every job runs on its own hosts made by tools/netns_cluster.py (scheduler, --servers S and W workers,
each a network namespace whose link is shaped to the rate in both directions), started through
tools/launch.py's ssh launcher.  The hosts are emulated under time dilation (--dilation, 'auto' by
default: tools/host_cpu.py): each has 1/D of one core and its link the rate / D, and every time below
is divided by D, the emulated cluster's time (hosts of one core on links of the nominal rate); several
--dilation values run every job at each and add the validation table (the rows at each D side by side,
each job's runs against their median).  Each worker trains one model with Gluon and its kvstore:

    (the models of tools/netbench/models.py: mlp10m, mlp-deep, fmnist-cnn, cnn-fc)

in one of the modes of tools/netbench/modes.py (``--help`` lists them): MXNet's own store uncompressed
and with its 2bit, mxnet_gc's store uncompressed, with 2bit, 4bit, 4bit with per-layer groups and 4bit
with compressed pulls, and the layer-wise sparsification modes ('layerwise_topk', density 0.01, sparse
pulls, optimizer on the workers, backward unbulked: MXNET_EXEC_BULK_EXEC_TRAIN=0, two engine worker
threads, MXNET_CPU_WORKER_NTHREADS=2, and MXNET_CPU_TEMP_COPY=64, so that encoding can run beside
backward) with every layer alone, one message, the DP merge plan sent after backward or pipelined, and
fixed buckets of --bucket-bytes.

``hvd-gc-none`` and ``hvd-topk-*`` run the same on mxnet_gc's horovod store (allreduce when dense,
allgather of the payloads when sparse), W hosts, started by ``horovodrun --gloo`` on the first.  For
them the busiest link is a worker's (the most any worker sent or received), and there is no per-process
CPU report.

Measured per job: rank 0's step time (median, min, max over the timed steps after warm-up), from the
forward pass until the new parameters are ready, with trainer.step called right after backward as in a
training script (so that communication can overlap backward); compute, the median of 3 forward +
backward passes alone after the timed steps, and comm, the rest of the step time; the bytes each
worker's interface sent and received during the timed steps (the servers' links carry their sum, a
1/S share each: the table's "busiest link" is that mean server link); each
process's CPU time (tools/launch.py --report) and each worker's CPU time per timed step; the encode and
decode time of the mode's codec on this model's gradients (our codecs only; measured by this script
before the first job, outside the cluster); the whole machine's CPU busy fraction during rank 0's timed
steps (every host shares this machine's cores: near 100%, a job is CPU-bound, and overlapping
communication with backward cannot shorten it), and the part of it spent in the kernel, where the
emulated links move and shape the packets (on real hosts, work of the network cards and the switches).
Beside each row, the wire bound: the busier direction of the busier of the server link and the busiest
worker's link, at the link rate, the least time a step's traffic needs on average (the other workers'
traffic may spill over into rank 0's next step, so one step can be shorter).

Writes the rows to --csv, a plot to --plot, step time against workers (one line per mode and number
of servers) to --scaling-plot, and the tables to --markdown (replacing the part between
the benchmark's markers in a findings page of lab/).  Checks at the end that no namespace and no process
of the benchmark is left.  Needs root (network namespaces, tc).
"""
import argparse
import csv
import os
import re
import signal
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from tools import jobfiles, netns_cluster, progress, provenance
from tools.netbench import jobs, models, report, worker
from tools.netbench.modes import DEFAULT_MODES, DEFAULT_RATES, MODES, RATES_BITS


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="modes: " + "; ".join("%s: %s" % (m.name, m.description)
                                                                  for m in MODES.values()))
    parser.add_argument("--models", nargs="+", default=models.MODELS, choices=models.MODELS)
    parser.add_argument("--modes", nargs="+", default=DEFAULT_MODES, choices=list(MODES))
    parser.add_argument("--rates", nargs="+", default=DEFAULT_RATES, choices=list(RATES_BITS))
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--servers", type=jobs.servers_value, nargs="+", default=[1],
                        help="parameter servers per job, a number or 'half' (half the workers, at least 1; Horovod "
                             "modes: the first value only, they have none)")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per job")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps before them")
    parser.add_argument("--bucket-bytes", type=int, default=1 << 20, help="payload bytes per message of topk-fixed")
    parser.add_argument("--dilation", type=netns_cluster.dilation_value, nargs="+", default=["auto"],
                        help="time dilation D: each host 1/D of a core, links at rate / D, times divided by D ('auto': "
                             "the smallest D at which a job's hosts fit this machine; 'none': hosts share every core); "
                             "several: every job at each, and a table of how far they agree")
    parser.add_argument("--repeats", type=int, default=1, help="run every job this many times, in rounds, and pool")
    parser.add_argument("--job-timeout", type=int, default=1800, help="seconds before a job is ended")
    parser.add_argument("--csv", help="write the rows here")
    parser.add_argument("--from-csv", help="run nothing: make the tables (--markdown) and plots again from the rows "
                                           "of this CSV, which an earlier run wrote")
    parser.add_argument("--plot", help="write the plot here (.png)")
    parser.add_argument("--scaling-plot", help="write step time against workers, per servers, here (.png)")
    parser.add_argument("--markdown", help="put the tables between the benchmark's markers in this file")
    parser.add_argument("--section", default="", help="with --markdown: the markers <!-- bench_network:SECTION:begin "
                                                      "--> and :end (default: <!-- bench_network:begin -->)")
    jobfiles.add_worker_arguments(parser, "--model", "--mode", "--trace")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args


def run_all(args, tag):
    """Every job, --repeats times in rounds (every job once, then again: a job's runs are spread in
    time); returns one list of rows per round.  Ends every process and namespace it started."""
    codec = {}  # (model, mode) -> (encode, decode) seconds: measured first, while nothing else runs
    for model in args.models:
        gradients = models.local_gradients(model)
        for mode in args.modes:
            codec[model, mode] = models.codec_times(MODES[mode], gradients)
    jobs_list = []
    for model in args.models:
        for workers in args.workers:
            for servers in dict.fromkeys(jobs.servers_of(s, workers) for s in args.servers):
                jobs_list += [(model, mode, rate, workers, servers, dilation) for rate in args.rates
                              for mode in args.modes for dilation in args.dilation
                              if servers == jobs.servers_of(args.servers[0], workers) or not MODES[mode].horovod]
    runs, done = [], progress.Progress(args.repeats * len(jobs_list))
    try:
        for _ in range(args.repeats):
            runs.append([])
            for model, mode, rate, workers, servers, dilation in jobs_list:
                runs[-1].append(jobs.run(model, MODES[mode], rate, workers, servers, dilation, args, tag,
                                         codec[model, mode]))
                print(done.step(report.table(runs[-1][-1:]).splitlines()[-1]), flush=True)
    finally:
        left = jobs.end_leftovers(tag)
    return runs, left


def summary(rows, head):
    """The markdown text of a run from its pooled rows (each with every run's median step, so that the
    page can be made again from the CSV alone, ``--from-csv``): ``head`` (the command line), the table,
    the validation table where it applies, and the target ratios (pooled, and within each run)."""
    repeats = rows[0]["runs"]
    asked = list(dict.fromkeys(r["dilation_asked"] for r in rows))
    each = [{what: ratio for what, ratio, _, _ in report.targets([dict(r, step_ms=r["run_step_ms"][i]) for r in rows])}
            for i in range(repeats)]
    text = [head, ""]
    if repeats > 1:
        text += ["Each job ran %d times, in rounds (every job once, then every job again); a row gives the median, "
                 "minimum and maximum over all %d runs' timed steps, and the median of the runs' other columns.  A "
                 "target's ratio is of those medians; 'each run' gives the ratio of each run's median steps." % (
                     repeats, repeats), ""]
    text.append(report.table(rows))
    if len(asked) > 1 or repeats >= 3:
        text += ["", "Each job at %s, and its runs against their median (the emulation's validation):"
                 % " and ".join("D = %s" % d for d in asked), "", report.agreement(rows)]
    found = report.targets(rows)
    if found:  # (no target is defined for some sets of modes)
        text += ["", "Targets, each a ratio of two rows above:", "",
                 "| | ratio |%s target | met |" % (" each run |" if repeats > 1 else ""),
                 "|---|---:|%s---:|---|" % ("---|" if repeats > 1 else "")]
    for what, ratio, goal, ok in found:
        runs_column = " %s |" % " ".join("%.2f" % e[what] for e in each) if repeats > 1 else ""
        text.append("| %s | %.2f |%s %s | %s |" % (what, ratio, runs_column, goal, "yes" if ok else "**no**"))
    return text


TEXTS = ("model", "mode", "rate", "dilation_asked", "throttled_s_per_host", "tcp_congestion", "commit", "code", "date",
         "machine", "command")


RUN_STEP = re.compile(r"run(\d+)_step_ms$")  # each run's median step: a column per run


def write_rows(path, rows, made):
    """The pooled rows as a CSV, one row per job, one value per cell (``pandas.read_csv`` loads it as it is):
    each run's median step in a column of its own (run1_step_ms, ...), every timed step left out (the row
    keeps their median, minimum, maximum and count), the provenance ``made`` in every row."""
    flat = [{**{k: v for k, v in r.items() if k not in ("steps_ms", "run_step_ms")},
             **{"run%d_step_ms" % (i + 1): round(ms, 1) for i, ms in enumerate(r["run_step_ms"])}, **made}
            for r in rows]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(flat[0]))
        writer.writeheader()
        writer.writerows(flat)


def read_rows(path):
    """The pooled rows of a CSV of write_rows, with their types back (numbers, True/False, None for empty
    cells, the runs' steps as the list run_step_ms); refused when it predates the columns the page is made
    from."""
    def value(name, text):
        if name in TEXTS:
            return text
        if text in ("", "True", "False"):
            return {"": None, "True": True, "False": False}[text]
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text

    with open(path, newline="") as f:
        rows = [{name: value(name, text) for name, text in r.items()} for r in csv.DictReader(f)]
    for r in rows:
        runs = sorted((int(RUN_STEP.match(k).group(1)), k) for k in r if RUN_STEP.match(k))
        if runs:
            r["run_step_ms"] = [r.pop(k) for _, k in runs]
    if not rows or "run_step_ms" not in rows[0] or "dilation_asked" not in rows[0]:
        raise SystemExit("bench_network.py: %s has no rows with each run's step (run_step_ms) and the dilation "
                         "asked for: it predates --from-csv; run the benchmark again" % path)
    return rows


def link(path, markdown):
    """``path`` as a link from the page ``markdown`` (its own name without one)."""
    return os.path.relpath(path, os.path.dirname(os.path.abspath(markdown))) if markdown else os.path.basename(path)


def main():
    args = parse_args()
    if args.worker:
        rank, result = worker.run(MODES[args.mode], args.model, int(args.steps), int(args.warmup),
                                  int(args.bucket_bytes), args.trace)
        return jobfiles.save(args.out, rank, result)

    def interrupted(signum, _frame):
        raise KeyboardInterrupt("signal %d" % signum)

    signal.signal(signal.SIGTERM, interrupted)
    section = "bench_network" + (":" + args.section if args.section else "")
    if args.markdown:
        jobfiles.read_section_page(args.markdown, section)
    left = False
    if args.from_csv:  # the page and plots again from a run's rows
        rows = read_rows(args.from_csv)
        source = os.path.relpath(args.from_csv, ROOT)
        commands = "; ".join("`%s`" % c for c in dict.fromkeys(r["command"] for r in rows))
        head = "Command%s: %s (this text made from %s by `python -m tools.bench_network --from-csv`; %s)" % (
            "s" if ";" in commands else "", commands, source,
            provenance.data_note({source: rows})[len("Data: "):].rstrip("."))
    else:
        started = time.time()
        made = provenance.record(["python", "-m", "tools.bench_network"] + sys.argv[1:])
        runs, left = run_all(args, "MXGC_BENCH_NETWORK=%s" % uuid.uuid4().hex)
        rows = [jobs.pool(list(same)) for same in zip(*runs)]
        head = "Command: `%s` (%.0f minutes; %s)" % (made["command"], (time.time() - started) / 60,
                                                    provenance.line(made).split(": `")[0])
    text = summary(rows, head)
    print("\n".join(text[2:]))
    if args.csv and not args.from_csv:
        write_rows(args.csv, rows, made)
    if args.plot:
        report.plot(rows, args.plot)
        text += ["", "![step times](%s)" % link(args.plot, args.markdown)]
    if args.scaling_plot:
        report.plot_scaling(rows, args.scaling_plot)
        text += ["", "![step time against workers](%s)" % link(args.scaling_plot, args.markdown)]
    if args.markdown:
        jobfiles.write_section(args.markdown, section, "\n".join(text))
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
