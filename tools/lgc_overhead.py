#!/usr/bin/env python
"""The autoencoder's compute per step against the model's own step, on this CPU, for the Fashion-MNIST
example's models.

Timed: the leader's encode, a decode (each worker decodes its own estimate in the lgc
phase; a server decodes one per worker), the mean decoder's decode (LGC-RAR) and a training step
(replay buffer full; a server's, or on a ring rank 0's), timed in one
process on vectors of the real length (the coded tensors' leader indices at --density), beside one
forward + backward + SGD step of the model at batch 64 (what each worker computes per step).

    python -m tools.lgc_overhead [--models cnn cnn-fc] [--workers 2 4] [--density 1e-3]
        [--channels 8 16 16 8] [--repeats 20] [--csv F] [--markdown lab/lgc_overhead/findings.md]

--csv writes the rows (lab/lgc_overhead/lgc_overhead.csv); --markdown puts the table between the
page's ``<!-- lgc_overhead:begin -->`` and ``:end`` markers.

LGC-PS: per step a worker spends encode / W (the leader rotates) + decode; a server decode x W (lgc
phase) or one training step (train phase, on a thread beside the workers' next step).  LGC-RAR: every
worker encodes its own vector and decodes the mean each lgc step; rank 0 trains in the train phase (its
own thread queues the step).  A training step is queued on MXNet's engine: its time to completion,
and the part spent queuing it (on the caller's thread).  Medians of --repeats.
"""
import argparse
import csv
import statistics
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from examples.models import build_model
from tools import provenance
from tools.jobfiles import write_section
from tools.lgc_traffic import coded_sizes
from mxnet_gc.lgc.autoencoder import Autoencoder, AutoencoderTrainer
from mxnet_gc.lgc.options import LGCOptions
from mxnet_gc.lgc.wire import WireFormat


def median_ms(fn, repeats):
    """The median time until ``fn`` returns, MXNet's engine idle before each call."""
    fn()  # warm-up (memory, MKL-DNN's formats)
    times = []
    for _ in range(repeats):
        mx.nd.waitall()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def model_step_ms(model, repeats):
    net = build_model(model)
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9}, kvstore=None)
    rng = np.random.default_rng(0)
    x = mx.nd.array(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = mx.nd.array(rng.integers(0, 10, 64).astype(np.float32))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(64)
        mx.nd.waitall()
    return median_ms(step, repeats)


def autoencoder_ms(sizes, workers, options, repeats):
    fmt = WireFormat(sizes, options.density, options.innovation_density, workers, options.latent_channels)
    P = fmt.padded
    ae = Autoencoder(workers, options.encoder_channels, options.latent_channels, options.seed)
    rng = np.random.default_rng(0)
    vector = rng.uniform(-1, 1, P).astype(np.float32)
    code = ae.encode(vector)
    channel = np.zeros(P, np.float32)
    trainer = AutoencoderTrainer(ae, options.ae_lr, options.ae_replay, options.code_weight, options.ae_window,
                                 options.seed)
    for step in range(options.ae_replay):
        trainer.add(rng.uniform(-1, 1, (workers, P)), np.zeros((workers, P)), step % workers)
    return (P, median_ms(lambda: ae.encode(vector), repeats),
            median_ms(lambda: ae.decode(1 % workers, 0, code, channel, P), repeats),
            median_ms(lambda: ae.decode_mean(code, channel, P), repeats),
            median_ms(lambda: trainer.train_step().wait_to_read(), max(3, repeats // 4)),
            median_ms(trainer.train_step, max(3, repeats // 4)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", choices=["cnn", "cnn-fc"], default=["cnn", "cnn-fc"])
    p.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    p.add_argument("--density", type=float, default=1e-3)
    p.add_argument("--channels", type=int, nargs=4, default=[8, 16, 16, 8], help="encoder_channels")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--csv", help="write the rows here")
    p.add_argument("--markdown", help="put the table between the page's lgc_overhead markers")
    args = p.parse_args()
    options = LGCOptions({"density": args.density, "encoder_channels": args.channels})
    rows, made = [], provenance.record()
    for model in args.models:
        step = model_step_ms(model, args.repeats)
        sizes, _ = coded_sizes(model, options)
        for w in args.workers:
            P, enc, dec, mean, train, queue = autoencoder_ms(sizes, w, options, args.repeats)
            rows.append({"model": model, "workers": w, "P": P, "model_step_ms": step, "encode_ms": enc,
                         "decode_ms": dec, "mean_decode_ms": mean, "train_step_ms": train, "train_queue_ms": queue,
                         **made})
            print(rows[-1], flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            out = csv.DictWriter(f, list(rows[0]))
            out.writeheader()
            out.writerows(rows)
    text = table(rows, args)
    print(text)
    if args.markdown:
        write_section(args.markdown, "lgc_overhead", text)


def table(rows, args):
    """The markdown table of ``rows``, with each cost as a share of the model's step."""
    def share(ms, step):
        return "%.2f ms, %.1f%%" % (ms, 100 * ms / step)
    made = rows[0]
    lines = ["`python -m tools.lgc_overhead --repeats %d` (commit %s%s, %s, %s; encoder_channels %s, density %g; "
             "medians):" % (args.repeats, made["commit"], "" if made["clean"] else " with uncommitted changes",
                            made["date"], made["machine"], args.channels, args.density), "",
             "| model | workers | P | model step ms | encode ms | decode ms | mean decode ms | training step ms | "
             "LGC-PS worker per lgc step (encode / W + decode) | LGC-PS server per lgc step (W decodes) | LGC-RAR "
             "worker per lgc step (encode + mean decode) | training per train step (a server; LGC-RAR rank 0) | "
             "of which on the caller's thread (the rest on MXNet's engine) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        step, w = r["model_step_ms"], r["workers"]
        lines.append("| %s | %d | %d | %.1f | %.2f | %.2f | %.2f | %.1f | %s | %s | %s | %s | %s |" % (
            r["model"], w, r["P"], step, r["encode_ms"], r["decode_ms"], r["mean_decode_ms"], r["train_step_ms"],
            share(r["encode_ms"] / w + r["decode_ms"], step), share(w * r["decode_ms"], step),
            share(r["encode_ms"] + r["mean_decode_ms"], step), share(r["train_step_ms"], step),
            share(r["train_queue_ms"], step)))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
