#!/usr/bin/env python
"""The network benchmark: a Gluon training step per compression on a bandwidth-limited cluster.

    .venv/bin/python tools/bench_network.py                 # the whole benchmark (about 40 minutes, root)
    .venv/bin/python tools/bench_network.py --models fmnist-cnn --modes none 4bit --rates 1gbit --workers 2
    .venv/bin/python tools/bench_network.py ... --repeats 3   # every job 3 times, in rounds, pooled

Every job runs on its own hosts made by tools/netns_cluster.py (scheduler, 1 server and W workers,
each a network namespace whose link is shaped to the rate in both directions), started through
tools/launch.py's ssh launcher.  Each worker trains one model with Gluon and its kvstore:

    mlp10m      an MLP 1024-2048-2048-2048-10 (10.5M parameters) on synthetic input, batch 32
    mlp-deep    an MLP of 16 hidden layers of 768 (9.6M parameters, 34 tensors), synthetic input, batch
                32: the many-layer case that merging and pipelining are for
    fmnist-cnn  the Fashion-MNIST example's CNN (examples/train_fashion_mnist.py), real images, batch 64
    cnn-fc      a VGG-like network on Fashion-MNIST images, batch 64: four 3x3 convolutions (32, 32, 64,
                64 channels; most of the compute) under fully connected layers 3136-2048-2048-10 (10.7M
                parameters, nearly all in the head, whose gradients backward produces first): the
                layout pipelining is for

and one of these modes:

    none         MXNet's own dist_sync store and server, uncompressed (gluon.Trainer)
    mxnet-2bit   MXNet's own dist_sync store and server, MXNet's built-in 2bit (gluon.Trainer)
    gc-none      mxnet_gc's store and server, uncompressed (mxnet_gc.gluon.Trainer, shared messages)
    gc_2bit      mxnet_gc's store, its 2bit codec
    4bit         mxnet_gc's store, 4bit (group 'medium' for every layer)
    4bit-groups  4bit with a threshold group per layer, chosen during dense calibration steps
    4bit-cpull   4bit, and the servers send the sum 4bit-encoded too (compressed pull; the optimizer
                 then runs on the workers, in the others on the servers)

and the layer-wise sparsification modes (``--modes`` names them; 'layerwise_topk', density 0.01,
sparse pulls, optimizer on the workers, backward unbulked: MXNET_EXEC_BULK_EXEC_TRAIN=0, two engine
worker threads, MXNET_CPU_WORKER_NTHREADS=2, and MXNET_CPU_TEMP_COPY=64, so that encoding can run beside
backward; see mxnet_gc/gluon.py):

    topk-layerwise  every layer its own message, sent after the whole backward
    topk-one        one message for all layers
    topk-merged     the DP merge plan, sent after the whole backward
    topk-pipelined  the DP merge plan, each message sent as soon as its gradients are ready
    topk-fixed      consecutive layers filled into messages of at least --bucket-bytes payload bytes
                    (the last may be smaller), each sent as soon as its gradients are ready

``hvd-gc-none`` and ``hvd-topk-*`` run the same on mxnet_gc's horovod store (allreduce when dense,
allgather of the payloads when sparse), W hosts, started by ``horovodrun --gloo`` on the first.  For
them the busiest link is a worker's (the most any worker sent or received), and there is no per-process
CPU report.

Measured per job: rank 0's step time (median, min, max over the timed steps after warm-up), from the
forward pass until the new parameters are ready, with trainer.step called right after backward as in a
training script (so that communication can overlap backward); compute, the median of 3 forward +
backward passes alone after the timed steps, and comm, the rest of the step time; the bytes each
worker's interface sent and received during the timed steps (the server's link carries their sum); each
process's CPU time (tools/launch.py --report) and each worker's CPU time per timed step; the encode and
decode time of the mode's codec on this model's gradients (our codecs only; measured by this script
before the first job, outside the cluster); the whole machine's CPU busy fraction during rank 0's timed
steps (every host shares this machine's cores: near 100%, a job is CPU-bound, and overlapping
communication with backward cannot shorten it), and the part of it spent in the kernel, where the
emulated links move and shape the packets (on real hosts, work of the network cards and the switches). Beside each row, the wire bound: the server link's
busier direction at the link rate, the least time a step's traffic needs on average (the other workers'
traffic may spill over into rank 0's next step, so one step can be shorter).

Writes the rows to --csv, a plot to --plot and the tables to --markdown (replacing the part between
the benchmark's markers in docs/performance.md).  Checks at the end that no namespace and no process
of the benchmark is left.  Needs root (network namespaces, tc).
"""
import argparse
import csv
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import launch  # noqa: E402
import netns_cluster  # noqa: E402
from mxnet_gc.config import PIPELINE_TEMP_COPIES  # noqa: E402
from mxnet_gc.profiling import machine_ticks  # noqa: E402  (the namespaces share /proc/stat)

RATES_BITS = {"100mbit": 100e6, "1gbit": 1e9, "unlimited": None}
MODES = ["none", "mxnet-2bit", "gc-none", "gc_2bit", "4bit", "4bit-groups", "4bit-cpull"]
TOPK = {"type": "layerwise_topk", "density": 0.01, "compressed_pull": True}
SPARSE_MODES = {"topk-layerwise": ("layerwise", False), "topk-one": ("one", True), "topk-merged": ("dp", False),
                "topk-pipelined": ("dp", True), "topk-fixed": ("fixed", True)}  # mode -> (merge plan, pipeline)
HOROVOD = "hvd-"  # prefix: the same mode on mxnet_gc's horovod store, started by horovodrun
HOROVOD_MODES = [HOROVOD + m for m in ["gc-none"] + list(SPARSE_MODES)]
MODELS = ["mlp10m", "mlp-deep", "fmnist-cnn", "cnn-fc"]
MLP_WIDTHS = {"mlp10m": (2048,) * 3, "mlp-deep": (768,) * 16}
COMPRESSION = {"none": None, "mxnet-2bit": {"type": "2bit", "threshold": 0.5}, "gc-none": {"type": "none"},
               "gc_2bit": {"type": "gc_2bit", "threshold": 0.5}, "4bit": {"type": "4bit", "thresholds": "medium"},
               "4bit-groups": {"type": "4bit", "thresholds": "medium"},
               "4bit-cpull": {"type": "4bit", "thresholds": "medium", "compressed_pull": True},
               **{mode: TOPK for mode in SPARSE_MODES}}
COMPRESSION.update({HOROVOD + m: COMPRESSION[m] for m in ["gc-none"] + list(SPARSE_MODES)})
COMPUTE_STEPS = 3  # forward + backward alone, after the timed steps (the compute column)
CALIBRATION_STEPS = 3  # dense steps of 4bit-groups before its groups are chosen (part of the warm-up)
MARKERS = "<!-- bench_network%s:begin -->", "<!-- bench_network%s:end -->"


# ---------------------------------------------------------------- the worker (inside the cluster)

def transport_of(mode):
    """(runs on Horovod, the mode without its hvd- prefix)."""
    horovod = mode.startswith(HOROVOD)
    return horovod, mode[len(HOROVOD):] if horovod else mode


def model_and_batches(model, rank, workers):
    """(network, batch size, function step -> (x, y)) of one worker."""
    import numpy as np
    import mxnet as mx
    from mxnet import gluon

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import fashion_mnist
    import train_fashion_mnist

    if model in MLP_WIDTHS:
        net = gluon.nn.HybridSequential()
        for width in MLP_WIDTHS[model]:
            net.add(gluon.nn.Dense(width, activation="relu"))
        net.add(gluon.nn.Dense(10))
        rng = np.random.default_rng(rank)
        x = mx.nd.array(rng.standard_normal((32, 1024)).astype(np.float32))
        y = mx.nd.array(rng.integers(0, 10, 32).astype(np.float32))
        return net, (1, 1024), 32, lambda step: (x, y)
    images, labels = fashion_mnist.shard(*fashion_mnist.load("train"), rank, workers)
    batch = 64

    def batches(step):
        start = (step * batch) % (len(images) - batch)
        return train_fashion_mnist.to_batch(images[start:start + batch], labels[start:start + batch])

    if model == "fmnist-cnn":
        return train_fashion_mnist.build_model("cnn"), (1, 1, 28, 28), batch, batches
    net = gluon.nn.HybridSequential()
    for i, channels in enumerate((32, 32, 64, 64)):
        net.add(gluon.nn.Conv2D(channels, 3, padding=1, activation="relu"))
        if i % 2:
            net.add(gluon.nn.MaxPool2D(2))
    net.add(gluon.nn.Flatten(), gluon.nn.Dense(2048, activation="relu"), gluon.nn.Dense(2048, activation="relu"),
            gluon.nn.Dense(10))
    return net, (1, 1, 28, 28), batch, batches


def interface_bytes():
    """(sent, received) bytes of this host's interface in the cluster (eth0), else of this process's sockets."""
    if os.path.exists("/sys/class/net/eth0/statistics/tx_bytes"):
        values = []
        for counter in ("tx_bytes", "rx_bytes"):
            with open("/sys/class/net/eth0/statistics/" + counter) as f:
                values.append(int(f.read()))
        return tuple(values)
    from mxnet_gc.traffic import socket_bytes

    return socket_bytes()


def codec_times(mode, arrays, repeats=5):
    """Median seconds to encode, and to decode, all ``arrays`` with the mode's codec (our codecs only)."""
    import mxnet as mx
    import mxnet_gc

    params = dict(COMPRESSION[mode] or {})
    kind = {"gc_2bit": "2bit", "4bit": "4bit", "layerwise_topk": "layerwise_topk"}.get(params.get("type"))
    if kind is None:
        return None, None
    codec = mxnet_gc.codecs.create({"type": kind, **{k: v for k, v in params.items()
                                                     if k in ("threshold", "thresholds", "density")}})
    residuals = [codec.new_residual(a.shape) for a in arrays]
    payloads = [mx.nd.zeros((codec.payload_size(a.size),)) for a in arrays]
    outs = [mx.nd.zeros(a.shape) for a in arrays]
    encode, decode = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for a, r, p in zip(arrays, residuals, payloads):
            codec.encode(a, r, out=p)
        mx.nd.waitall()
        t1 = time.perf_counter()
        for p, o in zip(payloads, outs):
            codec.decode(p, o)
        mx.nd.waitall()
        encode.append(t1 - t0)
        decode.append(time.perf_counter() - t1)
    return statistics.median(encode), statistics.median(decode)


def local_gradients(model):
    """The model's gradients after one forward and backward pass on this machine (no kvstore)."""
    import mxnet as mx
    from mxnet import autograd, gluon

    net, shape, _, batches = model_and_batches(model, 0, 1)
    net.initialize(mx.init.Xavier(magnitude=2))
    net(mx.nd.zeros(shape))
    x, y = batches(0)
    with autograd.record():
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
    loss.backward()
    return [p.grad() for p in net.collect_params().values() if p.grad_req != "null"]


def worker(args):
    """One worker: trains, times, writes args.out/rank<r>.json."""
    import mxnet as mx
    from mxnet import autograd, gluon
    import mxnet_gc

    mx.random.seed(1)
    compression = COMPRESSION[args.mode]
    horovod, base = transport_of(args.mode)
    if base in ("none", "mxnet-2bit"):
        kv = mx.kv.create("dist_sync")
    else:
        kv = mxnet_gc.kvstore.create("horovod" if horovod else "dist_sync")
    net, shape, batch, batches = model_and_batches(args.model, kv.rank, kv.num_workers)
    net.initialize(mx.init.Xavier(magnitude=2))
    # Shapes from a training-mode pass: an inference-mode one leaves convolution weights in MKL-DNN's
    # layout, which MXNet's own dist store cannot init from ("init N first" on its server).
    with autograd.train_mode():
        net(mx.nd.zeros(shape))
    params = net.collect_params()
    optimizer = ("sgd", {"learning_rate": 0.01, "momentum": 0.9})
    if args.mode in ("none", "mxnet-2bit"):
        if compression:  # MXNet 1.9.1's dist store refuses pushpull with compression; gluon.Trainer calls it
            kv.pushpull = lambda key, value, out=None, priority=0: (
                kv.push(key, value, priority=priority), kv.pull(key, value if out is None else out, priority=priority))
        trainer = gluon.Trainer(params, *optimizer, kvstore=kv, compression_params=compression)
    else:
        groups = args.mode == "4bit-groups"
        merge, pipeline = SPARSE_MODES.get(base, (None, True))
        merge = args.bucket_bytes if merge == "fixed" else merge
        trainer = mxnet_gc.gluon.Trainer(params, *optimizer, kvstore=kv, compression_params=compression,
                                         threshold_groups="auto" if groups else None,
                                         calibration_steps=CALIBRATION_STEPS,
                                         update_on_kvstore=False if compression.get("compressed_pull") or horovod
                                         else None,
                                         merge=merge, pipeline=pipeline)
    trained = [p for p in params.values() if p.grad_req != "null"]
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step(i):
        """One training step as a user writes it: no wait between backward and trainer.step, so that
        pushes can start while backward still runs; returns its seconds until the new weights are ready."""
        x, y = batches(i)
        start = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)
        for p in trained:
            p.data().wait_to_read()
        return time.perf_counter() - start

    def compute(i):
        """Forward and backward alone, waited for (no communication, no update)."""
        x, y = batches(i)
        start = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        for p in trained:
            p.grad().wait_to_read()
        return time.perf_counter() - start

    schedule = getattr(trainer, "schedule", None)  # mxnet_gc's trainer: time the schedule's last phase
    warmup = args.warmup + (schedule.start(schedule.phases[-1].name) if schedule else 0)
    for i in range(warmup):
        step(i)
    bytes0, cpu0, wall0, machine0 = interface_bytes(), time.process_time(), time.perf_counter(), machine_ticks()
    totals = [step(warmup + i) for i in range(args.steps)]
    bytes1, cpu1, wall1, machine1 = interface_bytes(), time.process_time(), time.perf_counter(), machine_ticks()
    compute_s = statistics.median(compute(i) for i in range(COMPUTE_STEPS))
    result = {"rank": kv.rank, "parameters": sum(p.data().size for p in trained), "step_s": totals,
              "window_s": wall1 - wall0, "compute_s": compute_s,
              "comm_s": max(0.0, statistics.median(totals) - compute_s),
              "sent_per_step": (bytes1[0] - bytes0[0]) / args.steps,
              "received_per_step": (bytes1[1] - bytes0[1]) / args.steps,
              "cpu_per_step": (cpu1 - cpu0) / args.steps,
              "machine_busy": (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1]),
              "machine_kernel": (machine1[2] - machine0[2]) / max(1, machine1[1] - machine0[1])}
    with open(os.path.join(args.out, "rank%d.json" % kv.rank), "w") as f:
        json.dump(result, f)


# ---------------------------------------------------------------- the driver (outside)

CODEC_SECONDS = {}  # (model, mode) -> (encode, decode) seconds of the model's gradients, measured first


def run(model, mode, rate, workers, args, tag):
    """One job on its own shaped hosts; returns its row."""
    horovod, base = transport_of(mode)
    worker_argv = [sys.executable, os.path.abspath(__file__), "--worker", "--model", model, "--mode", mode,
                   "--steps", str(args.steps), "--warmup", str(args.warmup), "--bucket-bytes", str(args.bucket_bytes)]
    env = {tag.split("=")[0]: tag.split("=")[1]}
    # Each emulated host shares this machine's cores with the others: OpenMP teams sized for the whole
    # machine in every process would mostly spin against each other.
    env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // (workers + (0 if horovod else 2))))
    if base in SPARSE_MODES:  # each gradient its own engine operation; a second engine thread to encode on
        env.update(MXNET_EXEC_BULK_EXEC_TRAIN="0", MXNET_CPU_WORKER_NTHREADS="2",
                   MXNET_CPU_TEMP_COPY=str(PIPELINE_TEMP_COPIES))
    with tempfile.TemporaryDirectory() as out:
        report = os.path.join(out, "launch.json")
        if horovod:
            hosts = ",".join("%s:1" % netns_cluster.address(i) for i in range(workers))
            argv = [os.path.join(os.path.dirname(sys.executable), "horovodrun"), "-np", str(workers), "-H", hosts,
                    "--gloo", "--network-interface", "eth0", "--start-timeout", "120"] + worker_argv + ["--out", out]
            code, traffic = netns_cluster.run_command(workers, rate, argv, on_host=0, env=env,
                                                      timeout=args.job_timeout)
        else:
            launch = ["-n", str(workers), "-s", "1", "--timeout", str(args.job_timeout), "--report", report]
            launch += ["--mxnet-servers"] if mode in ("none", "mxnet-2bit") else []
            for item in env.items():
                launch += ["--env", "%s=%s" % item]
            code, traffic = netns_cluster.run_job(2 + workers, rate, launch + worker_argv + ["--out", out])
        if code != 0:
            raise SystemExit("bench_network.py: job %s %s %s %d workers failed (exit %d)" % (model, mode, rate,
                                                                                         workers, code))
        ranks = []
        for r in range(workers):
            with open(os.path.join(out, "rank%d.json" % r)) as f:
                ranks.append(json.load(f))
        processes = []
        if not horovod:
            with open(report) as f:
                processes = json.load(f)
    r0 = ranks[0]
    if horovod:  # no server: the busiest link is a worker's
        server_in = max(r["received_per_step"] for r in ranks)
        server_out = max(r["sent_per_step"] for r in ranks)
    else:  # the server's link carries every worker's traffic
        server_in = sum(r["sent_per_step"] for r in ranks)
        server_out = sum(r["received_per_step"] for r in ranks)
    bits = RATES_BITS[rate]
    wire = 8 * max(server_in, server_out) / bits if bits else 0.0
    codec = None
    encode, decode = CODEC_SECONDS[model, mode]
    if encode is not None:  # a worker encodes, the server decodes each worker's push (and, for a compressed
        codec = encode + workers * decode  # pull, encodes the sum, which the worker decodes)
        if mode == "4bit-cpull":
            codec += encode + decode
        if mode in SPARSE_MODES:  # sparse pull: the server packs the sum, the worker decodes it once more
            codec += decode
        if horovod:  # every worker encodes its payload and decodes all W
            codec = encode + workers * decode
    cpu = {(p["role"], p["rank"]): p["cpu_seconds"] for p in processes}

    def job_mb(role, i):
        """Bytes sent (i = 0) or received (1) over the whole job by the hosts of a role, mean, in MB."""
        if horovod:
            values = [t[i] for t in traffic.values()] if role == "worker" else []
        else:
            values = [traffic[p["host"]][i] for p in processes if p["role"] == role]
        return statistics.mean(values) / 1e6 if values else None

    return {"model": model, "mode": mode, "rate": rate, "workers": workers, "parameters": r0["parameters"],
            "step_ms": 1e3 * statistics.median(r0["step_s"]), "step_ms_min": 1e3 * min(r0["step_s"]),
            "step_ms_max": 1e3 * max(r0["step_s"]), "timed_steps": len(r0["step_s"]), "runs": 1,
            "steps_ms": [1e3 * s for s in r0["step_s"]],
            "timed_window_ms": 1e3 * r0["window_s"],
            "compute_ms": 1e3 * r0["compute_s"], "comm_ms": 1e3 * r0["comm_s"],
            "server_in_mb_per_step": server_in / 1e6, "server_out_mb_per_step": server_out / 1e6,
            "worker0_sent_mb_per_step": r0["sent_per_step"] / 1e6,
            "worker0_received_mb_per_step": r0["received_per_step"] / 1e6,
            "wire_bound_ms": 1e3 * wire, "codec_ms": None if codec is None else 1e3 * codec,
            "worker_cpu_ms_per_step": 1e3 * statistics.mean(r["cpu_per_step"] for r in ranks),
            "machine_cpu_busy": r0["machine_busy"], "machine_cpu_kernel": r0["machine_kernel"],
            "cpu_s_scheduler": cpu.get(("scheduler", 0)), "cpu_s_server": cpu.get(("server", 0)),
            "cpu_s_worker_mean": statistics.mean(cpu["worker", r] for r in range(workers)) if cpu else None,
            "job_mb_sent_server": job_mb("server", 0), "job_mb_received_server": job_mb("server", 1),
            "job_mb_sent_scheduler": job_mb("scheduler", 0),
            "job_mb_sent_worker_mean": job_mb("worker", 0), "job_mb_received_worker_mean": job_mb("worker", 1)}


def pool(runs):
    """One row for several runs of one job: step statistics over all their timed steps, the median of
    every other measurement."""
    row = {name: statistics.median(r[name] for r in runs) if isinstance(value, float) else value
           for name, value in runs[0].items()}
    steps = [ms for r in runs for ms in r["steps_ms"]]
    row.update(step_ms=statistics.median(steps), step_ms_min=min(steps), step_ms_max=max(steps),
               timed_steps=len(steps), runs=len(runs), steps_ms=steps)
    return row


def fmt(value, digits=0):
    return "–" if value is None else "%.*f" % (digits, value)


def busy(row):
    """The machine's CPU busy fraction, with the kernel's part of it where it was measured."""
    if row.get("machine_cpu_busy") is None:
        return "–"
    kernel = row.get("machine_cpu_kernel")
    return "%.0f%%" % (100 * row["machine_cpu_busy"]) + ("" if kernel is None else " (%.0f%% kernel)" % (100 * kernel))


def table(rows):
    lines = ["| model | W | rate | mode | step ms median | min–max | compute ms | comm ms | busiest link in / out "
             "MB/step | wire bound ms | codec ms (est.) | worker CPU ms/step | server CPU s (job) | machine CPU busy |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s | %d | %s | %s | %s | %s–%s | %s | %s | %.2f / %.2f | %s | %s | %s | %s | %s |" % (
            r["model"], r["workers"], r["rate"], r["mode"], fmt(r["step_ms"]), fmt(r["step_ms_min"]),
            fmt(r["step_ms_max"]), fmt(r["compute_ms"]), fmt(r["comm_ms"]), r["server_in_mb_per_step"],
            r["server_out_mb_per_step"], fmt(r["wire_bound_ms"]) if r["rate"] != "unlimited" else "–",
            fmt(r["codec_ms"], 1), fmt(r["worker_cpu_ms_per_step"]), fmt(r["cpu_s_server"], 1),
            busy(r)))
    return "\n".join(lines)


def targets(rows):
    """The issue's target ratios, each from rows of this run: (text, ratio, target, met)."""
    step = {(r["model"], r["workers"], r["rate"], r["mode"]): r["step_ms"] for r in rows}
    found = []
    for (model, workers, rate, mode), ms in sorted(step.items()):
        base = step.get((model, workers, rate, "none"))
        if mode in ("4bit", "4bit-groups", "4bit-cpull") and base and model == "mlp10m" and rate == "100mbit":
            found.append(("%s, %d workers, 100 Mbit/s: uncompressed / %s step time" % (model, workers, mode),
                          base / ms, ">= 4", base / ms >= 4))
        if mode in ("4bit", "4bit-groups", "4bit-cpull") and base and rate == "unlimited":
            found.append(("%s, %d workers, unlimited: %s / uncompressed step time" % (model, workers, mode),
                          ms / base, "<= 1.3", ms / base <= 1.3))
        prefix = HOROVOD if mode.startswith(HOROVOD) else ""
        dense = step.get((model, workers, rate, HOROVOD + "gc-none")) if prefix else base
        if mode == prefix + "topk-pipelined" and dense and rate == "1gbit" and model != "fmnist-cnn":
            found.append(("%s, %d workers, 1 Gbit/s: uncompressed / merged+pipelined top-k step time%s"
                          % (model, workers, " (Horovod)" if prefix else ""), dense / ms, ">= 1.99", dense / ms >= 1.99))
        for other in (prefix + "topk-layerwise", prefix + "topk-one"):
            if mode == prefix + "topk-pipelined" and (model, workers, rate, other) in step:
                ratio = step[model, workers, rate, other] / ms
                found.append(("%s, %d workers, %s: %s / merged+pipelined step time" % (model, workers, rate, other),
                              ratio, "> 1", ratio > 1))
        ours = step.get((model, workers, rate, "mxnet-2bit"))
        if mode == "gc_2bit" and ours:
            found.append(("%s, %d workers, %s: our 2bit / MXNet's 2bit step time" % (model, workers, rate),
                          ms / ours, "<= 1.2", ms / ours <= 1.2))
    return found


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["model"], r["workers"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (model, workers) in zip(axes[0], panels):
        mine = [r for r in rows if (r["model"], r["workers"]) == (model, workers)]
        rates = [rate for rate in RATES_BITS if any(r["rate"] == rate for r in mine)]
        modes = [m for m in MODES + list(SPARSE_MODES) + HOROVOD_MODES if any(r["mode"] == m for r in mine)]
        width = 0.8 / len(modes)
        for j, mode in enumerate(modes):
            for i, rate in enumerate(rates):
                row = next((r for r in mine if (r["rate"], r["mode"]) == (rate, mode)), None)
                if row is None:
                    continue
                x = i + (j - (len(modes) - 1) / 2) * width
                ax.bar(x, row["step_ms"], width, color="C%d" % j, label=mode if i == 0 else None)
                ax.plot([x - width / 2, x + width / 2], [row["compute_ms"]] * 2, color="white", lw=1)
                if row["wire_bound_ms"]:
                    ax.plot([x - width / 2, x + width / 2], [row["wire_bound_ms"]] * 2, color="black", lw=1.5)
        ax.set_xticks(range(len(rates)), rates)
        ax.set_yscale("log")
        ax.set_ylabel("step time, ms (log)")
        ax.set_title("%s, %d workers" % (model, workers))
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Step time per compression (bars), wire bound (black), compute (white); tools/bench_network.py",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_markdown(path, text, section=""):
    """Replaces the text between the section's markers in ``path``."""
    begin, end = (marker % (":" + section if section else "") for marker in MARKERS)
    with open(path) as f:
        doc = f.read()
    if begin not in doc or end not in doc:
        raise SystemExit("bench_network.py: %s has no %s ... %s markers" % (path, begin, end))
    head, rest = doc.split(begin, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + text + "\n" + end + rest.split(end, 1)[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    parser.add_argument("--modes", nargs="+", default=MODES, choices=MODES + list(SPARSE_MODES) + HOROVOD_MODES)
    parser.add_argument("--rates", nargs="+", default=list(RATES_BITS), choices=list(RATES_BITS))
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--steps", type=int, default=6, help="timed steps per job")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps before them")
    parser.add_argument("--bucket-bytes", type=int, default=1 << 20, help="payload bytes per message of topk-fixed")
    parser.add_argument("--repeats", type=int, default=1, help="run every job this many times, in rounds, and pool")
    parser.add_argument("--job-timeout", type=int, default=1800, help="seconds before a job is ended")
    parser.add_argument("--csv", help="write the rows here")
    parser.add_argument("--plot", help="write the plot here (.png)")
    parser.add_argument("--markdown", help="put the tables between the benchmark's markers in this file")
    parser.add_argument("--section", default="", help="with --markdown: the markers <!-- bench_network:SECTION:begin "
                                                      "--> and :end (default: <!-- bench_network:begin -->)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    def interrupted(signum, _frame):
        raise KeyboardInterrupt("signal %d" % signum)

    signal.signal(signal.SIGTERM, interrupted)
    tag = "MXGC_BENCH_NETWORK=%s" % uuid.uuid4().hex
    command = " ".join(["tools/bench_network.py"] + sys.argv[1:])
    started = time.time()
    for model in args.models:  # before any job, while nothing else runs
        gradients = local_gradients(model)
        for mode in args.modes:
            CODEC_SECONDS[model, mode] = codec_times(mode, gradients)
    jobs = [(model, mode, rate, workers) for model in args.models for workers in args.workers
            for rate in args.rates for mode in args.modes]
    runs = []  # one list of rows per repeat, in the order of jobs
    try:
        for _ in range(args.repeats):  # every job once, then again: the runs of a job are spread in time
            runs.append([])
            for job in jobs:
                runs[-1].append(run(*job, args, tag))
                print(table(runs[-1][-1:]).splitlines()[-1], flush=True)
    finally:
        left = launch.processes_with_env(tag)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        namespaces = netns_cluster.leftovers()
        print("left behind: %d processes, namespaces %s" % (len(left), namespaces or "none"), flush=True)
    rows = [pool(list(same)) for same in zip(*runs)]
    each = [{what: ratio for what, ratio, _, _ in targets(rows_of_run)} for rows_of_run in runs]
    text = ["Command: `.venv/bin/python %s` (%s, %.0f minutes, %s cores)" % (
                command, time.strftime("%Y-%m-%d"), (time.time() - started) / 60, os.cpu_count()), ""]
    if args.repeats > 1:
        text += ["Each job ran %d times, in rounds (every job once, then every job again); a row gives the median, "
                 "minimum and maximum over all %d runs' timed steps, and the median of the runs' other columns.  A "
                 "target's ratio is of those medians; 'each run' gives the ratio within each round." % (
                     args.repeats, args.repeats), ""]
    text += [table(rows), "", "Targets, each a ratio of two rows above:", "",
             "| | ratio |%s target | met |" % (" each run |" if args.repeats > 1 else ""),
             "|---|---:|%s---:|---|" % ("---|" if args.repeats > 1 else "")]
    for what, ratio, goal, ok in targets(rows):
        runs_column = " %s |" % " ".join("%.2f" % e[what] for e in each) if args.repeats > 1 else ""
        text.append("| %s | %.2f |%s %s | %s |" % (what, ratio, runs_column, goal, "yes" if ok else "**no**"))
    print("\n".join(text[2:]))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(dict(r, steps_ms=" ".join("%.1f" % ms for ms in r["steps_ms"])) for r in rows)
    if args.plot:
        plot(rows, args.plot)
        text += ["", "![step times](%s)" % os.path.basename(args.plot)]
    if args.markdown:
        write_markdown(args.markdown, "\n".join(text), args.section)
    return 1 if left or namespaces else 0


if __name__ == "__main__":
    sys.exit(main())
