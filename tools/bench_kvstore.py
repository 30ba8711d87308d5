#!/usr/bin/env python
"""Traffic and step time of the dist kvstore per compression, on real jobs over loopback.

For each model (the parameter shapes of gluoncv's cifar_resnet20_v1 and of a 10M-parameter MLP) and
each mode it launches a job (tools/launch.py, W workers, 1 server) in which every worker pushes a
gradient for every parameter and pulls the result, once per step, all keys in one call:

    mxnet-none   MXNet's own dist_sync store and server, uncompressed
    mxnet-2bit   MXNet's own dist_sync store and server, MXNet's 2bit
    gc-none      mxnet_gc's store and server, uncompressed
    gc-mx2bit    mxnet_gc's store and server, MXNet's 2bit kernels ({'type': '2bit'})
    gc_2bit      mxnet_gc's store and server, mxnet_gc's 2bit
    4bit         mxnet_gc's store and server, mxnet_gc's 4bit
    4bit-cpull   the same, and the servers send the sum 4bit-encoded too (compressed pull)

mxnet_gc's store runs with consecutive keys sharing messages of up to --bucket-bytes of float32
(default 1 MiB, as the Gluon trainer's default messages on the parameter server).

Bytes are measured from the traffic itself: each worker reads the kernel's counters of its own TCP
connections (``ss -tinp``: bytes acknowledged by the peer, bytes received) before and after the
timed steps.
A run of the same keys with one value each ('headers') measures the fixed per-message cost.

    .venv/bin/python -m tools.bench_kvstore [--workers 2] [--steps 20] [--repeats 3] [--models resnet20 mlp10m]
"""
import argparse
import os
import statistics
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from tools import jobfiles, targets
MODELS = ["resnet20", "mlp10m"]
MODES = ["mxnet-none", "mxnet-2bit", "gc-none", "gc-mx2bit", "gc_2bit", "4bit", "4bit-cpull"]
COMPRESSION = {"mxnet-2bit": {"type": "2bit", "threshold": 0.01}, "gc-mx2bit": {"type": "2bit", "threshold": 0.01},
               "gc_2bit": {"type": "gc_2bit", "threshold": 0.01, "warmup_steps": 0},
               "4bit": {"type": "4bit", "thresholds": "medium", "warmup_steps": 0},
               "4bit-cpull": {"type": "4bit", "thresholds": "medium", "compressed_pull": True, "warmup_steps": 0},
               "gc-none": {"type": "none"}}


def model_shapes(model):
    if model == "mlp10m":
        sizes = [1024, 2048, 2048, 2048, 10]
        shapes = []
        for a, b in zip(sizes, sizes[1:]):
            shapes += [(b, a), (b,)]
        return shapes
    import mxnet as mx
    from gluoncv import model_zoo

    net = model_zoo.get_model("cifar_resnet20_v1", classes=10)
    net.initialize()
    net(mx.nd.zeros((1, 3, 32, 32)))
    return [p.shape for p in net.collect_params().values()]


def worker(args):
    """One worker of a benchmark job: writes its measurements to args.out/rank<r>.json."""
    import numpy as np
    import mxnet as mx
    import mxnet_gc
    from mxnet_gc.merge_policy import fixed_groups
    from mxnet_gc.traffic import socket_bytes

    shapes = model_shapes(args.model)
    if args.headers:
        shapes = [(1,)] * len(shapes)
    if args.mode.startswith("mxnet"):
        kv = mx.kv.create("dist_sync")
        if args.mode == "mxnet-2bit":
            kv.set_gradient_compression(COMPRESSION[args.mode])
    else:
        kv = mxnet_gc.kvstore.create("dist_sync")
        kv.set_gradient_compression(COMPRESSION[args.mode])
    keys = list(range(len(shapes)))
    grouping = {}  # MXNet's own store takes no groups
    if not args.mode.startswith("mxnet") and args.bucket_bytes:
        grouping["groups"] = fixed_groups(keys, [int(np.prod(s)) for s in shapes], args.bucket_bytes)
    kv.init(keys, [mx.nd.zeros(s) for s in shapes], **grouping)
    rng = np.random.default_rng(kv.rank)
    grads = [mx.nd.array(rng.standard_normal(s).astype(np.float32) * 0.01) for s in shapes]
    outs = [mx.nd.zeros(s) for s in shapes]

    def step():
        kv.push(keys, grads)
        kv.pull(keys, out=outs)
        for o in outs:
            o.wait_to_read()

    for _ in range(args.warmup):
        step()
    times = []
    before = socket_bytes()
    if before is None:
        raise SystemExit("bench_kvstore.py measures traffic with `ss`: install iproute2")
    sent0, recv0 = before
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    sent1, recv1 = socket_bytes()
    result = {"rank": kv.rank, "values": int(sum(np.prod(s) for s in shapes)), "keys": len(shapes),
              "step_s": statistics.median(times), "step_s_spread": [min(times), max(times)],
              "sent_per_step": (sent1 - sent0) / args.steps, "recv_per_step": (recv1 - recv0) / args.steps}
    jobfiles.save(args.out, kv.rank, result)


def run(model, mode, args, headers=False):
    """Launches one job; returns rank 0's measurements."""
    with tempfile.TemporaryDirectory() as out:
        argv = jobfiles.worker_command("tools.bench_kvstore", model=model, mode=mode, steps=args.steps, warmup=args.warmup,
                                       bucket_bytes=args.bucket_bytes, headers=int(headers))
        return jobfiles.local_job(argv, out, args.workers, mxnet_servers=mode.startswith("mxnet"),
                                  what="job %s %s" % (model, mode))[0]


def pooled(runs):
    """One row from a job's runs: the median of the runs' step medians (and those medians), the median of
    their byte counts."""
    row = {name: statistics.median(r[name] for r in runs) for name in ("step_s", "sent_per_step", "recv_per_step")}
    row["values"] = runs[0]["values"]
    row["spread"] = " / ".join("%.1f" % (1e3 * r["step_s"]) for r in runs)
    return row


def theoretical_push(mode, shapes):
    """Payload bytes of one worker's pushes per step."""
    per_value = {"mxnet-none": 4, "gc-none": 4, "mxnet-2bit": 0.25, "gc-mx2bit": 0.25, "gc_2bit": 0.25,
                 "4bit": 0.5, "4bit-cpull": 0.5}[mode]
    words_per = {4: 1, 0.25: 16, 0.5: 8}[per_value]
    total = 0
    for s in shapes:
        n = 1
        for d in s:
            n *= d
        total += 4 * (-(-n // words_per))
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--models", nargs="+", choices=MODELS, default=MODELS)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=MODES)
    parser.add_argument("--bucket-bytes", type=int, default=1 << 20,  # the parameter-server store's message_bytes
                        help="mxnet_gc's store: consecutive keys share messages of up to this many bytes of float32 "
                             "(0: one message per key)")
    parser.add_argument("--repeats", type=int, default=1, help="run every job this many times, in rounds, and pool")
    parser.add_argument("--headers", type=int, default=0, help=argparse.SUPPRESS)
    jobfiles.add_worker_arguments(parser, "--model", "--mode")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    print("%d workers, 1 server, loopback, %d timed steps after %d warm-up, %d run(s) of every job in rounds; "
          "mxnet_gc messages of up to %d bytes; per worker per step\n"
          % (args.workers, args.steps, args.warmup, args.repeats, args.bucket_bytes))
    jobs = [(model, mode, False) for model in args.models for mode in args.modes]
    if "4bit" in args.modes:
        jobs += [(model, "4bit", True) for model in args.models]
    runs = {job: [] for job in jobs}
    for _ in range(args.repeats):  # every job once, then every job again: they see the same machine load
        for job in jobs:
            runs[job].append(run(job[0], job[1], args, headers=job[2]))
    print("| model | mode | values | step ms (median) | runs' medians | sent bytes | payload bytes (theory) "
          "| sent / theory | received bytes |")
    print("|---|---|---:|---:|---|---:|---:|---:|---:|")
    results = {}
    for model in args.models:
        shapes = model_shapes(model)
        for mode in args.modes:
            r = results[model, mode] = pooled(runs[model, mode, False])
            theory = theoretical_push(mode, shapes)
            print("| %s | %s | %d | %.1f | %s | %.0f | %d | %.3f | %.0f |" % (
                model, mode, r["values"], 1e3 * r["step_s"], r["spread"], r["sent_per_step"], theory,
                r["sent_per_step"] / theory, r["recv_per_step"]))
        if "4bit" in args.modes:
            h = results[model, "headers"] = pooled(runs[model, "4bit", True])
            payload = results[model, "4bit"]["sent_per_step"] - h["sent_per_step"]
            theory = theoretical_push("4bit", shapes) - theoretical_push("4bit", [(1,)] * len(shapes))
            print("| %s | 4bit, 1 value per key (fixed cost) | %d | %.1f | %s | %.0f | | | %.0f |"
                  % (model, h["values"], 1e3 * h["step_s"], h["spread"], h["sent_per_step"], h["recv_per_step"]))
            results[model, "4bit_payload_ratio"] = payload / theory
    print("\nTargets:")
    for model in args.models:
        if (model, "4bit_payload_ratio") in results:
            print(targets.line("%s: 4bit push traffic beyond the fixed per-message cost / (n/2 bytes), "
                               "less 1, in absolute value" % model, abs(results[model, "4bit_payload_ratio"] - 1),
                               "<=", 0.03))
        if (model, "gc_2bit") in results and (model, "mxnet-2bit") in results:
            print(targets.line("%s: gc_2bit step time / MXNet's stock 2bit step time" % model,
                               results[model, "gc_2bit"]["step_s"] / results[model, "mxnet-2bit"]["step_s"], "<=", 1.0))
        if (model, "gc_2bit") in results and (model, "gc-mx2bit") in results:
            print("- %s: gc_2bit step time / MXNet's 2bit kernels in mxnet_gc's store: %.2f"
                  % (model, results[model, "gc_2bit"]["step_s"] / results[model, "gc-mx2bit"]["step_s"]))
        if (model, "headers") in results and (model, "mxnet-none") in results:
            print(targets.line("%s: 4bit with 1 value per key / MXNet's whole dense step" % model,
                               results[model, "headers"]["step_s"] / results[model, "mxnet-none"]["step_s"], "<=", 0.3))
        if (model, "gc-none") in results and (model, "mxnet-none") in results:
            print(targets.line("%s: uncompressed step time / MXNet's dist_sync" % model,
                               results[model, "gc-none"]["step_s"] / results[model, "mxnet-none"]["step_s"], "<=", 1.05))
        if (model, "4bit-cpull") in results and (model, "4bit") in results:
            a, b = results[model, "4bit-cpull"], results[model, "4bit"]
            print("- %s: compressed pull: received bytes x %.3f, step time x %.2f (against 4bit with full pulls)"
                  % (model, a["recv_per_step"] / b["recv_per_step"], a["step_s"] / b["step_s"]))


if __name__ == "__main__":
    main()
