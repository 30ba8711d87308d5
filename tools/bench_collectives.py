#!/usr/bin/env python
"""Horovod's collectives alone on emulated hosts, against their wire time: how near its bound a step that
sends through them can be.

    sudo .venv/bin/python -m tools.bench_collectives --workers 2 4 --megabytes 1 4 --rate 100mbit \\
        --csv lab/bench_emulated/collectives.csv

Each job runs horovodrun across W hosts of tools/netns_cluster.py (each 1/D of a core, links at the rate / D,
D 'auto': as the network benchmark's Horovod rows) and times, --repeats times each and after a barrier,
Horovod's allgather and alltoall of uint8 payloads of each size a worker (the compressed allreduce's two
phases) and its allreduce of float32 ones, and with W even, two alltoalls between pairs of workers (2k and
2k + 1): 'pairs one way', from the even worker of each pair to the odd one, and 'pairs both ways', each to
the other at once (a round of the compressed allreduce's alltoall in which workers send to each other),
each timed until a barrier after it; every time is divided by D.  A row gives each repeat's time, their
median, minimum and maximum, and the wire time: the bytes the collective must move through a worker's
link at the nominal rate, (W - 1) n for an allgather, (W - 1) / W n for an alltoall (n split evenly),
2 (W - 1) / W n for a ring allreduce and n for the pairs, for n bytes a worker.
"""
import argparse
import csv
import os
import statistics
import sys
import tempfile
import time
import uuid

from tools import jobfiles, netns_cluster, provenance
from tools.netbench import jobs
from tools.netbench.modes import RATES_BITS

COLLECTIVES = ("allgather", "alltoall", "allreduce", "pairs one way", "pairs both ways")
ROW_FIELDS = ["collective", "workers", "megabytes", "rate", "dilation", "repeats_ms", "ms", "ms_min", "ms_max",
              "wire_ms", "ratio", "tcp_congestion"]


def wire_bytes(collective, workers, n):
    """The bytes a collective of ``n`` bytes a worker must move through one worker's link (each way)."""
    return {"allgather": (workers - 1) * n, "alltoall": (workers - 1) / workers * n,
            "allreduce": 2 * (workers - 1) / workers * n, "pairs one way": n, "pairs both ways": n}[collective]


def collectives(workers):
    """The collectives timed with ``workers`` workers (the pairs need an even number)."""
    return COLLECTIVES if workers % 2 == 0 else COLLECTIVES[:3]


def pair_splits(rank, size, n, both_ways):
    """An alltoall's splits of ``n`` bytes from ``rank`` to its pair's other worker (rank ^ 1); one way, the odd
    worker keeps its bytes (its own part: no traffic)."""
    to = rank ^ 1 if both_ways or rank % 2 == 0 else rank
    return [n if r == to else 0 for r in range(size)]


def worker(args):
    """One rank: each collective of each size, --repeats times after a barrier; rank 0 writes its times
    (seconds of this machine) to OUT/rank0.json."""
    import mxnet as mx
    import numpy as np
    import horovod.mxnet as hvd

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    times = {}
    for megabytes in args.megabytes:
        n = int(megabytes * 1e6) // size * size  # (an alltoall's equal parts)
        payload = mx.nd.array(np.random.RandomState(rank).randint(0, 255, n), dtype="uint8")
        values = mx.nd.ones(n // 4)
        splits = mx.nd.array([n // size] * size, dtype="int32")
        pairs = [mx.nd.array(pair_splits(rank, size, n, both), dtype="int32") for both in (False, True)]
        start = {"allgather": lambda name: hvd.allgather(payload, name=name),
                 "alltoall": lambda name: hvd.alltoall(payload, splits=splits, name=name)[0],
                 "allreduce": lambda name: hvd.allreduce(values, name=name),
                 "pairs one way": lambda name: hvd.alltoall(payload, splits=pairs[0], name=name)[0],
                 "pairs both ways": lambda name: hvd.alltoall(payload, splits=pairs[1], name=name)[0]}
        for collective in collectives(size):
            seconds = []
            for i in range(args.repeats):
                name = "%s.%g.%d" % (collective, megabytes, i)
                hvd.allreduce(mx.nd.zeros(1), name="barrier." + name).wait_to_read()
                began = time.perf_counter()
                start[collective](name).wait_to_read()
                if collective.startswith("pairs"):  # (until every receiver has its part: a sender's alltoall
                    # returns once its bytes are in its socket)
                    hvd.allreduce(mx.nd.zeros(1), name="received." + name).wait_to_read()
                seconds.append(time.perf_counter() - began)
            times["%s %g" % (collective, megabytes)] = seconds
    if rank == 0:
        jobfiles.save(args.out, 0, times)


def measure(args, workers, tag):
    """One job of ``workers`` ranks: its rows."""
    dilation = netns_cluster.dilation_for(workers, "auto")
    slower = dilation or 1
    timeout = int(args.job_timeout * slower)
    with tempfile.TemporaryDirectory() as out:
        command = jobfiles.worker_command("tools.bench_collectives", out=out, repeats=args.repeats)
        command += ["--megabytes"] + ["%g" % m for m in args.megabytes]
        env = {tag.split("=")[0]: tag.split("=")[1], "OMP_NUM_THREADS": "1"}
        code, _traffic, _throttled = jobs.run_horovod(workers, args.rate, dilation, command, env, timeout)
        if code != 0:
            raise SystemExit("bench_collectives.py: the job of %d workers failed (exit %d)" % (workers, code))
        times = jobfiles.load(out, 1)[0]
    rows = []
    for collective in collectives(workers):
        for megabytes in args.megabytes:
            ms = [s * 1e3 / slower for s in times["%s %g" % (collective, megabytes)]]
            wire_ms = 1e3 * 8 * wire_bytes(collective, workers, megabytes * 1e6) / RATES_BITS[args.rate]
            rows.append({"collective": collective, "workers": workers, "megabytes": megabytes, "rate": args.rate,
                         "dilation": slower, "repeats_ms": " ".join("%.1f" % t for t in ms),
                         "ms": statistics.median(ms), "ms_min": min(ms), "ms_max": max(ms), "wire_ms": wire_ms,
                         "ratio": statistics.median(ms) / wire_ms, "tcp_congestion": netns_cluster.CONGESTION})
    return rows


def table(rows):
    lines = ["| collective | W | MB a worker | D | ms median | min–max | each repeat | wire ms | median / wire |",
             "|---|---:|---:|---:|---:|---|---|---:|---:|"]
    for r in rows:
        lines.append("| %s | %s | %g | %g | %.1f | %.1f–%.1f | %s | %.1f | %.2f |" % (
            r["collective"], r["workers"], float(r["megabytes"]), float(r["dilation"]), float(r["ms"]),
            float(r["ms_min"]), float(r["ms_max"]), r["repeats_ms"], float(r["wire_ms"]), float(r["ratio"])))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--megabytes", type=float, nargs="+", default=[1.0, 4.0], help="payload a worker")
    parser.add_argument("--rate", default="100mbit", choices=[r for r in RATES_BITS if RATES_BITS[r]])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--job-timeout", type=int, default=600)
    parser.add_argument("--csv", help="write the rows here")
    parser.add_argument("--from-csv", help="run nothing: the table again from these rows")
    parser.add_argument("--markdown", help="put the table between this tool's markers in this page")
    parser.add_argument("--section", default="", help="with --markdown: <!-- bench_collectives:SECTION:begin -->")
    jobfiles.add_worker_arguments(parser)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    section = "bench_collectives" + (":" + args.section if args.section else "")
    if args.markdown:
        jobfiles.read_section_page(args.markdown, section)
    if args.from_csv:
        with open(args.from_csv, newline="") as f:
            rows = list(csv.DictReader(f))
        made = rows[0]
        head = "Command: `%s` (this table made from %s by `python -m tools.bench_collectives --from-csv`; %s)" % (
            made["command"], os.path.relpath(args.from_csv), provenance.line(
                dict(made, clean=made["clean"] == "True")).split(": `")[0])
    else:
        started = time.time()
        made = provenance.record(["python", "-m", "tools.bench_collectives"] + sys.argv[1:])
        tag = "MXGC_BENCH_COLLECTIVES=%s" % uuid.uuid4().hex
        rows = []
        try:
            for workers in args.workers:
                rows += measure(args, workers, tag)
        finally:
            left = jobs.end_leftovers(tag)
        if args.csv:
            with open(args.csv, "w", newline="") as f:
                out = csv.DictWriter(f, ROW_FIELDS + list(made))
                out.writeheader()
                for r in rows:
                    out.writerow(dict(r, **made))
        head = "Command: `%s` (%.0f minutes; %s)" % (made["command"], (time.time() - started) / 60,
                                                    provenance.line(made).split(": `")[0])
    text = head + "\n\n" + table(rows)
    print(text)
    if args.markdown:
        jobfiles.write_section(args.markdown, section, text)
    return 1 if not args.from_csv and left else 0


if __name__ == "__main__":
    sys.exit(main())
