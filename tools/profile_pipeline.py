#!/usr/bin/env python
"""A timeline of one training step with layer-wise sparsification, pipelined and not (MXNet's profiler).

    .venv/bin/python -m tools.profile_pipeline [--rate 1gbit] [--model mlp10m] [--plot lab/pipeline/pipeline_timeline.png]

Runs two jobs of 2 workers and 1 server on tools/netns_cluster.py's shaped hosts, training a model of
tools/netbench/models.py (default: the 10M-parameter MLP) with 'layerwise_topk' (density 0.01, sparse
pulls) and a DP merge plan: one with ``pipeline=True``, one with ``pipeline=False``.  Rank 0 records one step
after the plan is in place with MXNet's profiler (backward unbulked: MXNET_EXEC_BULK_EXEC_TRAIN=0,
so each layer's gradient is its own engine operation; two engine worker threads, so that a message
can be encoded while backward goes on) and the script draws, per job, when the
engine ran backward, the messages' encoding (mxgc_message_encode), the pushes, the workers' barriers (the
store's wait for every worker's push of a message; rank 0's Python thread), the pulls and the decoding.
It prints how much of the communication started before backward ended.  Needs root.
"""
import argparse
import json
import os
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from tools import jobfiles, netns_cluster
from tools.netbench.models import model_and_batches

LANES = [("backward", lambda n: n.startswith("_backward")), ("encode", lambda n: n == "mxgc_message_encode"),
         ("push", lambda n: n == "KVStoreDistDefaultPush"), ("barrier", lambda n: n == "barrier"),
         ("pull", lambda n: "Pull" in n),
         ("decode", lambda n: n == "mxgc_message_decode")]


def worker(args):
    import mxnet as mx
    from mxnet import autograd, gluon
    import mxnet_gc

    kv = mxnet_gc.kvstore.create("dist_sync")
    barrier, domain = kv.transport.barrier, mx.profiler.Domain("mxnet_gc")

    def traced_barrier():  # a profiler task around each of the store's barriers
        task = mx.profiler.Task(domain, "barrier")
        task.start()
        barrier()
        task.stop()

    kv.transport.barrier = traced_barrier
    net, shape, batch, batches = model_and_batches(args.model, kv.rank, kv.num_workers)
    net.initialize(mx.init.Xavier(magnitude=2))
    net(mx.nd.zeros(shape))
    trainer = mxnet_gc.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01}, kvstore=kv,
                                     compression_params={"type": "layerwise_topk", "density": 0.01,
                                                         "compressed_pull": True},
                                     update_on_kvstore=False, merge="dp", pipeline=args.pipeline == 1,
                                     dense_warmup_steps=0)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step(i):
        x, y = batches(i)
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)
        mx.nd.waitall()

    for i in range(6):
        step(i)
    if kv.rank == 0:
        mx.profiler.set_config(profile_all=True, aggregate_stats=False, filename=args.out)
        mx.profiler.set_state("run")
    step(6)
    if kv.rank == 0:
        mx.profiler.set_state("stop")
        mx.profiler.dump()


def spans(trace_path):
    """{lane: [(start ms, end ms)]} of the profiled step, times from the first backward operation."""
    with open(trace_path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("cat") in ("operator", "mxnet_gc")]
    open_at, found = {}, {lane: [] for lane, _ in LANES}
    for e in sorted(events, key=lambda e: e["ts"]):
        lane = next((name for name, match in LANES if match(e["name"])), None)
        if lane is None:
            continue
        ident = (e["name"], e["tid"])
        if e["ph"] in ("B", "b"):
            open_at[ident] = e["ts"]
        elif ident in open_at:
            found[lane].append((open_at.pop(ident), e["ts"]))
    zero = min(s for s, _ in found["backward"])
    first = min(e["ts"] for e in events if e["cat"] == "operator")  # the profiled step's (tasks come from before)
    return {lane: [((s - zero) / 1e3, (t - zero) / 1e3) for s, t in v if s >= first] for lane, v in found.items()}


def summary(lanes):
    backward_end = max(t for _, t in lanes["backward"])
    first_push = min(s for s, _ in lanes["push"]) if lanes["push"] else float("nan")
    encode_before = sum(min(t, backward_end) - s for s, t in lanes["encode"] if s < backward_end)
    return backward_end, first_push, encode_before


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(10, 1.6 + 1.3 * len(results)), sharex=True, squeeze=False)
    for ax, (title, lanes) in zip(axes[:, 0], results):
        for row, (lane, _) in enumerate(LANES):
            ax.broken_barh([(s, max(t - s, 0.05)) for s, t in lanes[lane]], (row - 0.4, 0.8), color="C%d" % row)
        ax.axvline(max(t for _, t in lanes["backward"]), color="black", lw=0.8, ls="--")
        ax.set_yticks(range(len(LANES)), [lane for lane, _ in LANES])
        ax.invert_yaxis()
        ax.set_title(title, fontsize=9)
    axes[-1, 0].set_xlabel("ms after the first backward operation (dashed: backward ends); tools/profile_pipeline.py")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", default="1gbit")
    parser.add_argument("--model", default="mlp10m", help="a model of tools/netbench/models.py")
    parser.add_argument("--engine-threads", type=int, default=2,
                        help="MXNET_CPU_WORKER_NTHREADS of the workers (MXNet's default is 1: then the encoding "
                             "waits behind backward on the one engine thread)")
    parser.add_argument("--plot", default=os.path.join(ROOT, "lab", "pipeline", "pipeline_timeline.png"))
    parser.add_argument("--pipeline", type=int, help=argparse.SUPPRESS)
    jobfiles.add_worker_arguments(parser)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for pipeline in (1, 0):
            trace = os.path.join(tmp, "trace%d.json" % pipeline)
            code = netns_cluster.run_job(4, args.rate, [
                "-n", "2", "-s", "1", "--timeout", "600", "--env", "MXNET_EXEC_BULK_EXEC_TRAIN=0",
                "--env", "MXNET_CPU_WORKER_NTHREADS=%d" % args.engine_threads,
                *jobfiles.worker_command("tools.profile_pipeline", pipeline=pipeline, out=trace, model=args.model)])
            if code != 0:
                raise SystemExit("profile_pipeline.py: the job failed (exit %d)" % code)
            lanes = spans(trace)
            backward_end, first_push, encoded = summary(lanes)
            title = ("%s, pipeline=%s, %s, %d engine thread(s): backward ends at %.1f ms, first push at %.1f ms"
                     % (args.model, bool(pipeline), args.rate, args.engine_threads, backward_end, first_push))
            print("%s; %.1f ms of sparsification done before backward ended" % (title, encoded))
            results.append((title, lanes))
    plot(results, args.plot)
    print("wrote", args.plot)


if __name__ == "__main__":
    main()
