#!/usr/bin/env python
"""Step time and traffic per compression on a bandwidth-limited cluster (tools/netns_cluster.py).

For every model, mode (see tools/bench_kvstore.py), link rate and worker count it runs one job on its
own namespaced hosts (scheduler, 1 server, W workers; every link shaped to the rate) in which each
worker pushes and pulls every parameter once per step.  Per run: rank 0's step time (median, min,
max of the timed steps), the bytes each host's interface sent and received over the whole job, and
the wire-time bound: the server link's bytes per timed step at the link rate, the least time a step
can take on that network.  The server link carries every worker's pushes in and pulls out; it is
computed as W x rank 0's bytes per timed step (kernel socket counters, workers being symmetric).

    .venv/bin/python tools/bench_network.py --models mlp10m --modes gc-none 4bit --rates 100mbit \\
        --workers 2 [--steps 5] [--csv results.csv]

Needs root (network namespaces, tc).  Still being built: the full benchmark of the issue (every
codec, 100 Mbit/s / 1 Gbit/s / unlimited, 2 and 4 workers, both models, with CPU time per process).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATES_BITS = {"100mbit": 100e6, "1gbit": 1e9, "unlimited": None}


def run(model, mode, rate, workers, args):
    with tempfile.TemporaryDirectory() as out:
        launch = ["-n", str(workers), "-s", "1", "--timeout", "1800"]
        launch += ["--mxnet-servers"] if mode.startswith("mxnet") else ["--env", "MXNET_GC_BUCKET_SIZE=262144"]
        launch += [sys.executable, os.path.join(ROOT, "tools", "bench_kvstore.py"), "--worker", "--model", model,
                   "--mode", mode, "--steps", str(args.steps), "--warmup", str(args.warmup), "--out", out]
        argv = [sys.executable, os.path.join(ROOT, "tools", "netns_cluster.py"), "--hosts", str(2 + workers),
                "--rate", rate, "--"] + launch
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit("%s %s %s failed:\n%s\n%s" % (model, mode, rate, proc.stdout[-3000:], proc.stderr[-3000:]))
        with open(os.path.join(out, "rank0.json")) as f:
            result = json.load(f)
    hosts = {}
    for line in proc.stdout.splitlines():
        if line.startswith("198.18.0."):
            host, sent, received = line.split()
            hosts[host] = (int(sent), int(received))
    busiest = workers * max(result["sent_per_step"], result["recv_per_step"])  # the server's link
    bits = RATES_BITS.get(rate)
    return {"model": model, "mode": mode, "rate": rate, "workers": workers, "step_ms": 1e3 * result["step_s"],
            "step_ms_min": 1e3 * result["step_s_spread"][0], "step_ms_max": 1e3 * result["step_s_spread"][1],
            "host_bytes_whole_job": hosts, "server_link_bytes_per_step": busiest, "wire_bound_ms": 1e3 * busiest * 8 / bits if bits else 0.0,
            "rank0_sent_per_step": result["sent_per_step"], "rank0_received_per_step": result["recv_per_step"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["mlp10m"])
    parser.add_argument("--modes", nargs="+", default=["gc-none", "mxnet-2bit", "gc_2bit", "4bit"])
    parser.add_argument("--rates", nargs="+", default=["100mbit"], choices=list(RATES_BITS))
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--csv", help="also write the rows here")
    args = parser.parse_args()
    rows = []
    print("| model | mode | rate | workers | step ms (median) | min | max | server link MB/step | wire bound ms |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for model in args.models:
        for rate in args.rates:
            for workers in args.workers:
                for mode in args.modes:
                    r = run(model, mode, rate, workers, args)
                    rows.append(r)
                    print("| %s | %s | %s | %d | %.0f | %.0f | %.0f | %.2f | %.0f |" % (
                        model, mode, rate, workers, r["step_ms"], r["step_ms_min"], r["step_ms_max"],
                        r["server_link_bytes_per_step"] / 1e6, r["wire_bound_ms"]), flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
