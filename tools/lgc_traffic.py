#!/usr/bin/env python
"""Payload bytes per worker per step of 'lgc' against dense float32 and against DGC ('layerwise_topk' at
the same density), from the wire formats (mxnet_gc/lgc/wire.py, the layerwise_topk codec), for the
Fashion-MNIST example's models (coded tensors: all of >= 2 dims but the first and last).

    python -m tools.lgc_traffic [--model cnn] [--workers 2 4] [--density 1e-3] [--innovation-density 1e-5]
        [--measured lab/lgc_study/lgc_study_w2.jsonl ...]

LGC-PS (parameter server: what a worker pushes), three views: over all parameters (the dense ones sent
as float32), over the coded tensors only, and over the coded tensors without the indices.  LGC-RAR
(a ring, Horovod): what a worker sends per step, the mean over the workers, with each collective's
cost on a ring of W: an allreduce of S bytes 2(W-1)/W S, an allgather of S bytes from each worker
(W-1) S, a broadcast of S bytes (W-1)/W S (each worker but the root receives one copy), against
uncompressed allreduce and DGC (top-k payloads by allgather).  ``--measured``: the socket bytes rank 0
sent per step in the last epoch of each run of a study (tools/study_lgc.py), beside the formulas.
Then the leader's indices in three encodings: raw int32, bit-packed (the wire format: fixed-size
messages, as ps-lite keys and ring collectives need) and delta + varint (variable size; a key would
have to reserve its worst case).
"""
import argparse
import os


import mxnet as mx
import numpy as np

from mxnet_gc import codecs
from mxnet_gc.lgc.options import LGCOptions
from mxnet_gc.lgc.wire import HEADER, WireFormat, index_bits
from examples.models import build_model
from tools import study_runs


def coded_sizes(model, options):
    """(sizes of the model's coded tensors, values of its dense ones) under LGCOptions ``options``."""
    net = build_model(model)
    net.initialize()
    net(mx.nd.zeros((1, 1, 28, 28)))
    params = [q for q in net.collect_params().values() if q.grad_req != "null"]
    coded = set(options.coded_keys(list(range(len(params))), [q.shape for q in params], {}))
    return ([q.data().size for i, q in enumerate(params) if i in coded],
            sum(q.data().size for i, q in enumerate(params) if i not in coded))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["cnn", "cnn-fc"], default="cnn")
    p.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    p.add_argument("--density", type=float, default=1e-3)
    p.add_argument("--innovation-density", type=float, default=1e-5)
    p.add_argument("--measured", nargs="*", default=[], help="study JSON files (tools/study_lgc.py) to read")
    args = p.parse_args()
    options = LGCOptions({"density": args.density, "innovation_density": args.innovation_density})
    sizes, dense = coded_sizes(args.model, options)
    dgc = codecs.create({"type": "layerwise_topk", "density": args.density})
    dgc_bytes = sum(4 * dgc.payload_size(n) for n in sizes)
    print("coded tensors: %s values; dense: %d values; density %g, innovation density %g"
          % (sizes, dense, args.density, args.innovation_density))
    print("| workers | LEAD B | INNOV B | lgc B/worker/step | DGC B | vs DGC | vs dense (coded) | vs dense (all) "
          "| without indices: lgc B, vs DGC |")
    print("|---|---|---|---|---|---|---|---|---|")
    for w in args.workers:
        fmt = WireFormat(sizes, args.density, args.innovation_density, w, options.latent_channels)
        lead, innov = 4 * fmt.words["LEAD"], 4 * fmt.words["INNOV"]
        per_worker = (lead + w * innov) / w  # the leader sends LEAD and INNOV; the others INNOV
        innov_index_bytes = 4 * fmt.innov_index_words
        no_index = (lead - 4 * fmt.index_words + w * (innov - innov_index_bytes)) / w
        dgc_no_index = sum(4 * (1 + dgc.capacity(n)) for n in sizes)
        coded_dense = 4 * sum(sizes)
        print("| %d | %d | %d | %.0f | %d | %.1fx | %.0fx | %.0fx | %.0f, %.1fx |"
              % (w, lead, innov, per_worker, dgc_bytes, dgc_bytes / per_worker, coded_dense / per_worker,
                 4 * (sum(sizes) + dense) / (per_worker + 4 * dense), no_index, dgc_no_index / no_index))
    print("(header: %d words per message)" % HEADER)
    print()
    print("LGC-RAR (ring collectives), bytes a worker sends per step (mean over the workers):")
    print("| workers | INDEX broadcast | code allreduce | INNOV allgather | lgc B/worker/step | train step B | "
          "DGC allgather B | vs DGC | uncompressed allreduce, coded B | vs uncompressed (coded) | vs uncompressed (all) "
          "| without indices: lgc B, vs DGC |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for w in args.workers:
        fmt = WireFormat(sizes, args.density, args.innovation_density, w, options.latent_channels)
        index = (w - 1) / w * 4 * fmt.words["INDEX"]
        code = 2 * (w - 1) / w * 4 * fmt.code_words
        innov = (w - 1) * 4 * fmt.words["INNOV"]
        ring = index + code + innov
        train = index + (w - 1) * 4 * fmt.words["VECTOR"]
        dgc_ring = (w - 1) * dgc_bytes
        dense_coded = 2 * (w - 1) / w * 4 * sum(sizes)
        dense_all = 2 * (w - 1) / w * 4 * dense
        no_index = ring - (w - 1) / w * 4 * fmt.index_words - (w - 1) * 4 * fmt.innov_index_words
        dgc_no_index = (w - 1) * sum(4 * (1 + dgc.capacity(n)) for n in sizes)
        print("| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1fx | %.0f | %.0fx | %.0fx | %.0f, %.1fx |"
              % (w, index, code, innov, ring, train, dgc_ring, dgc_ring / ring, dense_coded, dense_coded / ring,
                 (dense_coded + dense_all) / (ring + dense_all), no_index, dgc_no_index / no_index))
    if args.measured:
        print()
        print("Measured: socket bytes rank 0 sent per step, last epoch (its phases), mean over the runs:")
        print("| study | workers | configuration | phases | B/step |")
        print("|---|---|---|---|---:|")
        for path in args.measured:
            for config, logs in study_runs.by_config(study_runs.read(path)).items():
                per_step = [measured_per_step(log["epochs"][-1]) for log in logs]
                phases = sorted({p["phase"] for log in logs for p in log["epochs"][-1]["phases"]})
                print("| %s | %d | %s | %s | %.0f |" % (os.path.basename(path), logs[0]["workers"], config,
                                                       ", ".join(phases), np.mean(per_step)))
    print()
    print("Leader indices per step, three encodings (k indices into each coded tensor of n values; the delta/varint "
          "size is the mean over 100 uniform random index sets, sorted, as in index order):")
    print("| tensor n | k | raw int32 B | bit-packed B (used) | delta + LEB128 varint B |")
    print("|---|---|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for n in sizes:
        k = fmt.k[sizes.index(n)]
        varint = np.mean([sum(varint_bytes(int(d)) for d in np.diff(np.concatenate([[0], np.sort(
            rng.choice(n, k, replace=False))]))) for _ in range(100)])
        print("| %d | %d | %d | %.0f | %.0f |" % (n, k, 4 * k, k * index_bits(n) / 8, varint))


def measured_per_step(epoch):
    """Socket bytes sent per step in an epoch of the example's log."""
    steps = sum(p["steps"][1] - p["steps"][0] + 1 for p in epoch["phases"])
    return epoch["bytes_sent"] / steps


def varint_bytes(value):
    """Bytes of ``value`` as an LEB128 varint (7 bits a byte)."""
    return max(1, -(-value.bit_length() // 7))


if __name__ == "__main__":
    main()
