#!/usr/bin/env python
"""Where a training step's time goes: the timeline of one step per benchmark mode, and each worker
thread's CPU time per step, on emulated hosts.

    .venv/bin/python -m tools.profile_pipeline      # mlp10m at 1 Gbit/s, layer-wise top-k pipelined and not
    .venv/bin/python -m tools.profile_pipeline --model fmnist-cnn --rate 100mbit --modes 4bit-cpull hvd-4bit-cpull \
        --csv lab/pipeline/cnn_4bit.csv --plot lab/pipeline/cnn_4bit.png --markdown lab/pipeline/findings.md
    .venv/bin/python -m tools.profile_pipeline --from-csv lab/pipeline/cnn_4bit.csv --plot ... --markdown ...

Each mode (of tools/netbench/modes.py) runs as one job of tools/bench_network.py, on the same emulated
hosts (tools/netns_cluster.py: each host 1/D of a core, links at the rate / D, times divided by D).
After the timed steps, rank 0 records one more step with MXNet's profiler (every engine operation and
C API call, with its thread) and measures each of its threads' CPU time per timed step.  The spans of
the recorded step, by lane, go to --csv (a row per span, times in ms of the emulated cluster from the
step's start), from which the table (--markdown) and the picture (--plot) are made:

    compute   forward and backward (MXNet's operators, bulked or not)
    autoencoder  LGC's encoder and decoder (the operators with LeakyReLU layers: the models have none)
    encode    the stores' encodes (mxgc_message_encode)
    push      pushes to the servers; Horovod's collectives (their time on Horovod's thread)
    barrier   the parameter server's barriers (rank 0's Python thread waits in them)
    pull      pulls from the servers
    decode    the stores' decodes (mxgc_message_decode)
    update    the optimizer's update on the worker
    copy      copies between arrays
    wait      rank 0's Python thread waiting for an array (the trainer's or the script's; not Horovod's own
              waits for a collective)

Needs root (network namespaces, tc, cgroups).
"""
import argparse
import collections
import csv
import json
import os
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from tools import jobfiles, netns_cluster, provenance
from tools.netbench import jobs
from tools.netbench.modes import MODES, RATES_BITS

LANES = ["compute", "autoencoder", "encode", "push", "barrier", "pull", "decode", "update", "copy", "wait"]
IGNORED = {"DeleteVariable", "WaitForVar"}  # the engine's own bookkeeping
BULK_MS = 0.5
WAITS = {"MXNDArrayWaitToWrite", "MXNDArrayWaitToRead", "MXNDArraySyncCopyToCPU", "MXNDArrayWaitAll"}
SPAN_FIELDS = ["mode", "lane", "name", "thread", "start_ms", "end_ms"]
STEP_FIELDS = ["mode", "model", "rate", "workers", "servers", "dilation", "step_ms", "timed_step_ms",
               "worker_cpu_ms_per_step", "python_cpu_ms_per_step", "threads"]


def lane_of(event, main_thread):
    """The lane of one trace event (None: not drawn)."""
    name, category = event["name"], event.get("cat")
    if category == "MXNET_C_API":
        if name == "MXKVStoreBarrier":
            return "barrier"
        return "wait" if name in WAITS and event["tid"] == main_thread else None
    if category != "operator" or name in IGNORED:
        return None
    if "LeakyReLU" in name:
        return "autoencoder"
    if name == "mxgc_message_encode":
        return "encode"
    if name == "mxgc_message_decode":
        return "decode"
    if "Push" in name or name.lower().startswith("horovod"):
        return "push"
    if "Pull" in name:
        return "pull"
    if "update" in name:
        return "update"
    if "copy" in name.lower():
        return "copy"
    return "compute"


def spans(trace_path, dilation):
    """[(lane, name, thread, start ms, end ms)] of the recorded step (its 'step' task of domain 'bench'),
    in ms of the emulated cluster (divided by ``dilation``) from the step's start."""
    with open(trace_path) as f:
        events = sorted((e for e in json.load(f)["traceEvents"] if "ts" in e and "name" in e), key=lambda e: e["ts"])
    opened, found = {}, []
    for e in events:
        ident = (e["name"], e.get("tid"), e.get("cat"))
        if e["ph"] in ("B", "b"):
            opened[ident] = e
        elif e["ph"] in ("E", "e") and ident in opened:
            found.append((opened.pop(ident), e["ts"]))
        elif e["ph"] == "X":
            found.append((e, e["ts"] + e.get("dur", 0)))
    step = [(e["ts"], end, e["tid"]) for e, end in found if e["name"] == "step" and e.get("cat") == "bench"]
    if not step:
        raise SystemExit("profile_pipeline.py: %s has no 'step' task: was it recorded by the benchmark's worker?"
                         % trace_path)
    start, stop, main_thread = step[-1]
    threads = {}  # (thread ids as numbers from 0, in order of appearance)
    out = []
    for e, end in found:
        lane = lane_of(e, main_thread)
        if lane is None or e["ts"] < start or end > stop:
            continue
        thread = threads.setdefault(e["tid"], len(threads))
        out.append((lane, e["name"], thread, (e["ts"] - start) / 1e3 / dilation, (end - start) / 1e3 / dilation))
    return sorted(out, key=lambda s: s[3]), (stop - start) / 1e3 / dilation


def is_backward(span):
    """Whether a span (a CSV row) is backward's: an operator '_backward...' (unbulked), or a bulk of
    operators (MXNet bulks backward's, not forward's) of at least BULK_MS (the stores' few small
    operations after backward are bulked too)."""
    if span["name"].startswith("_backward"):
        return True
    return span["name"] == "ImperativeBulk" and float(span["end_ms"]) - float(span["start_ms"]) >= BULK_MS


def busy(intervals):
    """The time covered by a list of (start, end) intervals (their union)."""
    total, reach = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e > reach:
            total += e - max(s, reach)
            reach = e
    return total


def summary(steps, span_rows):
    """The markdown table of a run: per mode, the recorded step, when its phases started and ended, and
    where rank 0's CPU went."""
    lines = ["| mode | W | D | step ms (recorded; timed median) | backward ends | first push | last pull ends | "
             "busy ms: compute / autoencoder / encode / push / barrier / pull / decode / update | Python thread "
             "blocked in MXNet ms | "
             "worker CPU ms/step: all workers' mean / rank 0's main thread / its busiest other threads |",
             "|---|---:|---:|---|---:|---:|---:|---|---:|---|"]
    for step in steps:
        by_lane = collections.defaultdict(list)  # lane -> its spans (CSV rows)
        for r in span_rows:
            if r["mode"] == step["mode"]:
                by_lane[r["lane"]].append(r)

        def intervals(lane):
            return [(float(r["start_ms"]), float(r["end_ms"])) for r in by_lane[lane]]

        def at(lane, which, backward=False):
            values = [float(r["end_ms" if which else "start_ms"]) for r in by_lane[lane]
                      if not backward or is_backward(r)]
            if not values:
                return "–"
            return "%.1f" % (max(values) if which else min(values))

        others = [t for t in json.loads(step["threads"]) if t[1] != "main"][:3]
        lines.append("| %s | %s | %s | %.1f; %.1f | %s | %s | %s | %s | %.1f | %.1f / %.1f / %s |" % (
            step["mode"], step["workers"], step["dilation"], float(step["step_ms"]), float(step["timed_step_ms"]),
            at("compute", 1, backward=True), at("push", 0), at("pull", 1),
            " / ".join("%.1f" % busy(intervals(lane)) for lane in LANES[:8]),
            busy(intervals("wait") + intervals("barrier")), float(step["worker_cpu_ms_per_step"]),
            float(step["python_cpu_ms_per_step"]), " ".join("%.1f" % ms for ms, _ in others) or "–"))
    return "\n".join(lines)


def plot(steps, span_rows, path):
    """One panel per mode: the recorded step's spans by lane."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(steps), 1, figsize=(10, 1.2 + 1.6 * len(steps)), sharex=True, squeeze=False)
    for ax, step in zip(axes[:, 0], steps):
        for row, lane in enumerate(LANES):
            bars = [(float(r["start_ms"]), max(float(r["end_ms"]) - float(r["start_ms"]), 0.05))
                    for r in span_rows if r["mode"] == step["mode"] and r["lane"] == lane]
            ax.broken_barh(bars, (row - 0.4, 0.8), color="C%d" % row)
        ax.set_yticks(range(len(LANES)), LANES, fontsize=8)
        ax.invert_yaxis()
        ax.set_title("%s, %s, %s workers, %s: one step (D = %s)" % (
            step["model"], step["mode"], step["workers"], step["rate"], step["dilation"]), fontsize=9)
    axes[-1, 0].set_xlabel("ms of the emulated cluster from the step's start (rank 0); tools/profile_pipeline.py")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def profile(args, tag):
    """Runs every mode's job; returns (step rows, span rows)."""
    steps, span_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes:
            trace = os.path.join(tmp, "%s.json" % mode)
            row = jobs.run(args.model, MODES[mode], args.rate, args.workers, jobs.servers_of(args.servers, args.workers),
                           args.dilation, args, tag,
                           (None, None), trace=trace)
            found, step_ms = spans(trace, row["dilation"])
            threads = [(round(ms, 2), name) for ms, name in row["threads"]]
            steps.append({"mode": mode, "model": args.model, "rate": args.rate, "workers": args.workers,
                          "servers": row["servers"], "dilation": row["dilation"], "step_ms": round(step_ms, 2),
                          "timed_step_ms": round(row["step_ms"], 2),
                          "worker_cpu_ms_per_step": round(row["worker_cpu_ms_per_step"], 2),
                          "python_cpu_ms_per_step": sum(ms for ms, name in threads if name == "main"),
                          "threads": json.dumps(threads)})
            span_rows += [dict(zip(SPAN_FIELDS, (mode, lane, name, thread, round(s, 3), round(e, 3))))
                          for lane, name, thread, s, e in found]
            print("%s: step %.1f ms (recorded), %.1f ms (timed median)" % (mode, step_ms, row["step_ms"]), flush=True)
    return steps, span_rows


def write(path, steps, span_rows, made):
    """The run's rows: one per mode (kind 'step') and one per span (kind 'span'), each with the run's
    commit, date, machine and command."""
    fields = ["kind"] + list(dict.fromkeys(STEP_FIELDS + SPAN_FIELDS)) + list(made)
    with open(path, "w", newline="") as f:
        out = csv.DictWriter(f, fields)
        out.writeheader()
        for kind, rows in (("step", steps), ("span", span_rows)):
            for r in rows:
                out.writerow(dict(r, kind=kind, **made))


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["clean"] = r["clean"] == "True"
    return [r for r in rows if r["kind"] == "step"], [r for r in rows if r["kind"] == "span"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="mlp10m", help="a model of tools/netbench/models.py")
    parser.add_argument("--modes", nargs="+", default=["topk-pipelined", "topk-merged"], choices=list(MODES))
    parser.add_argument("--rate", default="1gbit", choices=list(RATES_BITS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--servers", type=jobs.servers_value, default=1, help="parameter servers, a number or 'half' "
                        "(half the workers, at least 1)")
    parser.add_argument("--dilation", type=netns_cluster.dilation_value, default="auto")
    parser.add_argument("--steps", type=int, default=6, help="timed steps (the CPU per thread) before the recorded one")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--bucket-bytes", type=int, default=1 << 20, help="payload bytes per message of topk-fixed")
    parser.add_argument("--job-timeout", type=int, default=1800)
    parser.add_argument("--csv", help="write the spans and steps here")
    parser.add_argument("--from-csv", help="run nothing: the table and picture again from this CSV")
    parser.add_argument("--plot", help="write the timelines here (.png)")
    parser.add_argument("--markdown", help="put the table between this tool's markers in this page")
    parser.add_argument("--section", default="", help="with --markdown: <!-- profile_pipeline:SECTION:begin -->")
    args = parser.parse_args()
    section = "profile_pipeline" + (":" + args.section if args.section else "")
    if args.markdown:
        jobfiles.read_section_page(args.markdown, section)
    if args.from_csv:
        steps, span_rows = read(args.from_csv)
        head = "Command: `%s` (this text made from %s by `python -m tools.profile_pipeline --from-csv`; %s)" % (
            steps[0]["command"], os.path.relpath(args.from_csv, ROOT),
            provenance.line(steps[0]).split(": `")[0])
    else:
        started = time.time()
        made = provenance.record(["python", "-m", "tools.profile_pipeline"] + sys.argv[1:])
        tag = "MXGC_PROFILE_PIPELINE=%s" % uuid.uuid4().hex
        try:
            steps, span_rows = profile(args, tag)
        finally:
            left = jobs.end_leftovers(tag)
        if args.csv:
            write(args.csv, steps, span_rows, made)
        head = "Command: `%s` (%.0f minutes; %s)" % (made["command"], (time.time() - started) / 60,
                                                    provenance.line(made).split(": `")[0])
    text = head + "\n\n" + summary(steps, span_rows)
    print(text)
    if args.plot:
        plot(steps, span_rows, args.plot)
        text += "\n\n![one step per mode](%s)" % (os.path.relpath(args.plot, os.path.dirname(os.path.abspath(
            args.markdown))) if args.markdown else os.path.basename(args.plot))
    if args.markdown:
        jobfiles.write_section(args.markdown, section, text)
    return 1 if not args.from_csv and left else 0


if __name__ == "__main__":
    sys.exit(main())
