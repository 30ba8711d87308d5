#!/usr/bin/env python
"""Data-parallel Gluon training on Fashion-MNIST with compressed gradients (mxnet_gc's dist store).

Run under the launcher, W workers and S servers (each worker reads its own shard of the 60k images):

    python -m mxnet_gc.launch -n 2 -s 1 .venv/bin/python examples/train_fashion_mnist.py \\
        --model cnn --compression 4bit --groups --epochs 3

The same script runs on Horovod (Gloo) with --kvstore horovod, started by horovodrun:

    horovodrun -np 2 -H localhost:2 --gloo .venv/bin/python examples/train_fashion_mnist.py --kvstore horovod \
        --compression layerwise_topk --density 0.01 --merge dp

Per epoch it shows a progress line every 10% of the epoch, then throughput, train loss, test accuracy
(on the 10k test images) and the bytes this worker sent and received, measured on its sockets.
Rank 0 logs with timestamps and writes every epoch to a JSON log (--log), and at the end the training
curve next to it (the same name, .png).  MXNet's and gluoncv's argument names are accepted too:
--num-epochs, --kv-store, --gc-type, --gc-threshold, --lr-step-epochs.
"""
import argparse
import json
import logging
import os
import sys
import time

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

import fashion_mnist
import mxnet_gc
from models import build_model, evaluate, to_batch
from mxnet_gc.traffic import socket_bytes

BEST_2BIT_THRESHOLD = 0.005  # MXNet 2bit's best threshold in `make study`'s sweep on the CNN (lab/accuracy/findings.md)


def compression_params(args):
    if args.compression == "none":
        return {"type": "none"}
    if args.pull_bits and not (args.compressed_pull and args.compression == "4bit"):
        raise SystemExit("--pull-bits needs --compression 4bit --compressed-pull")
    if args.compressed_pull and args.compression not in ("gc_2bit", "4bit"):
        raise SystemExit("--compressed-pull needs --compression gc_2bit or 4bit (layerwise_topk always compresses "
                         "its pulls), not %s" % args.compression)
    # (explicit either way: the stores' default for 4bit compresses pulls; this example's runs keep their meaning)
    pull = {"compressed_pull": args.compressed_pull} if args.compression in ("gc_2bit", "4bit") else {}
    if args.compression in ("2bit", "gc_2bit"):
        return {"type": args.compression, "threshold": args.threshold, **pull}
    if args.compression == "layerwise_topk":  # servers send the summed sparse values back sparse
        return {"type": "layerwise_topk", "density": args.density, "momentum": args.topk_momentum,
                "compressed_pull": True}
    if args.compression == "lgc":
        return {"type": "lgc", "density": args.density, "innovation_density": args.innovation_density,
                "momentum": args.topk_momentum, "dense_steps": args.lgc_dense_steps, "ramp_steps": args.ramp_steps,
                "ae_steps": args.ae_steps, "error_feedback": args.error_feedback, **json.loads(args.lgc_options)}
    if args.compression == "4bit":
        thresholds = args.thresholds if "," not in args.thresholds else [float(t) for t in args.thresholds.split(",")]
        bits = {"pull_bits": args.pull_bits} if args.pull_bits else {}
        return {"type": "4bit", "thresholds": thresholds, **pull, **bits}
    return {"type": args.compression, **json.loads(args.codec_options)}  # (any other codec: its own parameters)


def plot_curves(log, path):
    """The training curve (train loss and test accuracy per epoch) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [e["epoch"] for e in log["epochs"]]
    fig, loss_axis = plt.subplots(figsize=(6, 3.5))
    loss_axis.plot(epochs, [e["train_loss"] for e in log["epochs"]], "o-", color="tab:blue", label="train loss")
    loss_axis.set_xlabel("epoch")
    loss_axis.set_ylabel("train loss", color="tab:blue")
    accuracy_axis = loss_axis.twinx()
    accuracy_axis.plot(epochs, [e["test_accuracy"] for e in log["epochs"]], "s-", color="tab:red")
    accuracy_axis.set_ylabel("test accuracy", color="tab:red")
    loss_axis.set_title("%s, %s, %d workers" % (log["args"]["model"], log["args"]["compression"], log["workers"]))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def not_learning(train_loss, args, classes=10):
    """A warning when an epoch's mean training loss is a uniform guess's, ln(classes): the network gives
    every image the same output, as one whose units died early does (levels too coarse for its
    gradients, or too coarse gradients from the first step), with what to change; a non-finite loss (the
    run diverged) gets its own."""
    if not np.isfinite(train_loss):
        return ("warning: the training loss is %s: training diverged (try a smaller --lr or a longer "
                "--dense-warmup-steps)" % train_loss)
    if abs(train_loss - np.log(classes)) >= 0.01:
        return None
    if args.compression in ("2bit", "gc_2bit"):
        fix = "a smaller --threshold than %g (the best of lab/accuracy/findings.md's sweep on this CNN: %g)" % (
            args.threshold, BEST_2BIT_THRESHOLD)
    elif args.compression == "4bit":
        fix = "a smaller threshold group (--thresholds small, or --groups) or a longer --dense-warmup-steps"
    else:
        fix = "a longer --dense-warmup-steps or a smaller --lr"
    return ("warning: the training loss %.4f is ln(%d), a uniform guess's: the network is not learning (try %s)"
            % (train_loss, classes, fix))


def learning_rate_schedule(args, workers, steps_per_epoch):
    """MXNet's scheduler for --lr-steps and --lr-warmup-epochs (from lr / workers to lr), or None."""
    lr_steps = [int(e) * steps_per_epoch for e in args.lr_steps.split(",") if e]
    warmup = int(args.lr_warmup_epochs * steps_per_epoch)
    if not (lr_steps or warmup):
        return None
    # (the scheduler wants a step: one past the end when the rate only warms up)
    return mx.lr_scheduler.MultiFactorScheduler(lr_steps or [args.epochs * steps_per_epoch + 1], args.lr_factor,
                                                base_lr=args.lr, warmup_steps=warmup, warmup_begin_lr=args.lr / workers)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", choices=["cnn", "cnn-fc", "resnet20"], default="cnn", help="the network")
    p.add_argument("--kvstore", "--kv-store", default="dist_sync",
                   help="mxnet_gc's 'dist_sync' (parameter server, tools/launch.py) or 'horovod' (horovodrun --gloo)")
    p.add_argument("--compression", "--gc-type", choices=mxnet_gc.kvstore.supported_types(), default="4bit",
                   help="'2bit' is MXNet's own, 'gc_2bit' mxnet_gc's; every codec's parameters: docs/codecs.md")
    p.add_argument("--codec-options", default="{}", help="a codec without options of its own here (such as "
                   "8bit): its parameters, as JSON")
    p.add_argument("--density", type=float, default=0.01,
                   help="layerwise_topk, lgc: fraction of each layer sent (lgc: in the leader's index set)")
    p.add_argument("--innovation-density", type=float, default=1e-5, help="lgc: fraction of each layer sent exact")
    p.add_argument("--lgc-dense-steps", type=int, default=200, help="lgc: dense steps first")
    p.add_argument("--ramp-steps", type=int, default=200, help="lgc: steps of the sparse density ramp")
    p.add_argument("--ae-steps", type=int, default=300, help="lgc: steps the servers train the autoencoder")
    p.add_argument("--error-feedback", choices=["clip", "subtract", "zero"], default="zero",
                   help="lgc: what a worker removes from its accumulator after a coded step")
    p.add_argument("--lgc-options", default="{}", help="lgc: other options, as JSON (docs/lgc.md)")
    p.add_argument("--topk-momentum", type=float, default=0.0,
                   help="layerwise_topk and lgc: DGC's momentum correction factor (0: off); it replaces SGD's "
                   "momentum: give --momentum 0 with it")
    p.add_argument("--merge", default=None, help="merge plan: dp, layerwise, one, or a bucket size in bytes")
    p.add_argument("--no-pipeline", action="store_true", help="push only after the whole backward")
    p.add_argument("--threshold", "--gc-threshold", type=float, default=BEST_2BIT_THRESHOLD,
                   help="2bit threshold (MXNet's default, 0.5, stops this CNN from learning: lab/accuracy/findings.md)")
    p.add_argument("--thresholds", default="medium",
                   help="4bit: a group name, comma-separated levels, or 'auto' (the stores' default, fitted per "
                        "key during the warm-up); 'medium' here keeps this example's recorded runs comparable, and "
                        "--groups chooses a group per layer instead")
    p.add_argument("--compressed-pull", action="store_true",
                   help="gc_2bit, 4bit: the summed update comes back compressed too, from the servers (optimizer "
                        "on the workers) or on horovod by the compressed allreduce")
    p.add_argument("--pull-bits", type=int, choices=[4, 5], help="4bit with --compressed-pull: the bits of a pulled "
                   "value (default: the codec's)")
    p.add_argument("--groups", action="store_true", help="4bit: choose a threshold group per layer")
    p.add_argument("--calibration-steps", type=int, default=50,
                   help="with --groups: dense steps measured before the groups are chosen")
    p.add_argument("--dense-warmup-steps", type=int, default=None,
                   help="dense steps before the compression starts (default: the codec's warm-up, 50 steps for "
                        "mxnet_gc's codecs, counting --groups' calibration; 0: compress from the first step)")
    p.add_argument("--epochs", "--num-epochs", type=int, default=3, help="passes over the training images")
    p.add_argument("--batch-size", type=int, default=64, help="per worker")
    p.add_argument("--lr", type=float, default=0.05,
                   help="SGD's learning rate on the workers' summed gradients: with a fixed batch per worker, the "
                        "rate per image stays the same as workers are added (the linear scaling rule)")
    p.add_argument("--lr-warmup-epochs", type=float, default=0,
                   help="raise the rate linearly from --lr / workers (one worker's share) to --lr over this many "
                        "epochs: the large summed steps of many workers are unstable from random weights")
    p.add_argument("--lr-steps", "--lr-step-epochs", default="", help="epochs after which the learning rate is multiplied by "
                                                  "--lr-factor, comma-separated")
    p.add_argument("--lr-factor", type=float, default=0.1, help="the learning rate's factor at each --lr-steps")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD's momentum (on the workers)")
    p.add_argument("--wd", type=float, default=1e-4, help="weight decay")
    p.add_argument("--seed", type=int, default=1, help="seed of the weights and of the data's order")
    p.add_argument("--limit", type=int, default=0, help="use only the first N training images (quick runs)")
    p.add_argument("--test-limit", type=int, default=0, help="test on the first N test images only (quick runs)")
    p.add_argument("--log", "--log-file", help="JSON log of every epoch (written by rank 0)")
    p.add_argument("--checkpoint", help="save a checkpoint with this prefix after every epoch ('{epoch}' in it: "
                                        "one checkpoint per epoch, e.g. run-{epoch})")
    p.add_argument("--keep-checkpoints", type=int, default=1, help="how many of the newest checkpoints to keep")
    p.add_argument("--resume", help="continue from the checkpoint with this prefix")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    mxnet_gc.log.show()  # mxnet_gc's lines (rank 0: the warm-up, the phases, the groups) on standard output
    logging.getLogger("matplotlib").setLevel(logging.ERROR)  # (not its font-cache notice on a fresh machine)
    mx.random.seed(args.seed)
    np.random.seed(args.seed)
    train_x, train_y = fashion_mnist.load("train")
    test_x, test_y = fashion_mnist.load("test")
    if args.limit:
        train_x, train_y = train_x[:args.limit], train_y[:args.limit]
    if args.test_limit:
        test_x, test_y = test_x[:args.test_limit], test_y[:args.test_limit]

    kv = mxnet_gc.kvstore.create(args.kvstore)
    rank, workers = kv.rank, kv.num_workers
    net = build_model(args.model)
    net.initialize(mx.init.Xavier(magnitude=2), ctx=mx.cpu())
    net(mx.nd.zeros((1, 1, 28, 28)))
    steps_per_epoch = (len(train_x) // workers) // args.batch_size
    lr_schedule = learning_rate_schedule(args, workers, steps_per_epoch)
    optimizer_params = {"learning_rate": args.lr, "momentum": args.momentum, "wd": args.wd}
    if lr_schedule:
        optimizer_params["lr_scheduler"] = lr_schedule
    compression = compression_params(args)
    trainer = mxnet_gc.gluon.Trainer(net.collect_params(), "sgd", optimizer_params, kvstore=kv,
                                     compression_params=compression,
                                     threshold_groups="auto" if args.groups else None,
                                     calibration_steps=args.calibration_steps,
                                     dense_warmup_steps=args.dense_warmup_steps,
                                     update_on_kvstore=False if compression.get("compressed_pull")
                                     or compression["type"] == "lgc" else None,
                                     merge=int(args.merge) if (args.merge or "").isdigit() else args.merge,
                                     pipeline=not args.no_pipeline)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x_shard, y_shard = fashion_mnist.shard(train_x, train_y, rank, workers)
    values = sum(p.data().size for p in net.collect_params().values() if p.grad_req != "null")
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING, format="%(asctime)s %(message)s",
                        stream=sys.stdout, force=True)

    def say(text, flush=True):  # rank 0 logs the job, with timestamps
        logging.info(text)
    say("%d workers, model %s (%d parameters), compression %s%s, %d steps per epoch"
        % (workers, args.model, values, json.dumps(compression), " with per-layer groups" if args.groups else "",
           steps_per_epoch), flush=True)
    schedule = trainer.schedule  # (with 'lgc', LGC's phases)
    described = schedule.describe()
    say("schedule: %s" % described, flush=True)
    log = {"args": dict(vars(args), lgc_options=json.loads(args.lgc_options)),  # (the options as an object)
           "workers": workers, "parameters": values, "compression": compression,
           "schedule": described, "epochs": []}
    first_epoch = trainer.load_checkpoint(args.resume)["epoch"] if args.resume else 0
    for epoch in range(first_epoch, args.epochs):
        order = np.random.default_rng([args.seed, epoch, rank]).permutation(len(x_shard))
        sent0, received0 = socket_bytes() or (0, 0)
        first_step = schedule.step
        start, losses, ends = time.time(), mx.metric.Loss(), []
        for step in range(steps_per_epoch):
            idx = order[step * args.batch_size:(step + 1) * args.batch_size]
            x, y = to_batch(x_shard[idx], y_shard[idx])
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(args.batch_size)
            losses.update(None, [loss])
            ends.append(time.time())
            if (step + 1) % max(1, steps_per_epoch // 10) == 0:
                done = (step + 1) / steps_per_epoch
                eta = (time.time() - start) * (1 - done) / done  # (this epoch's rest, at its pace so far)
                say("epoch %d [%-10s] %3.0f%% loss %.4f, epoch ETA %.0f s" % (
                    epoch + 1, "#" * int(round(10 * done)), 100 * done, loss.mean().asscalar(), eta), flush=True)
        train_loss = float(losses.get()[1])
        warning = not_learning(train_loss, args)
        if warning:
            say(warning, flush=True)
        elapsed = time.time() - start
        now = socket_bytes()
        sent, received = (None, None) if now is None else (now[0] - sent0, now[1] - received0)
        phases = schedule.spans(first_step, schedule.step)
        seconds = np.diff([start] + ends)  # each step's, from the end of the one before
        for p in phases:
            p["ms_per_step"] = 1e3 * float(np.mean(seconds[p["steps"][0] - first_step:p["steps"][1] - first_step + 1]))
        accuracy = evaluate(net, test_x, test_y) if rank == 0 else None
        record = {"epoch": epoch + 1, "train_loss": train_loss, "test_accuracy": accuracy, "seconds": elapsed,
                  "warning": warning,
                  "images_per_second": steps_per_epoch * args.batch_size * workers / elapsed,
                  "bytes_sent": sent, "bytes_received": received,
                  "dense_push_bytes": 4 * values * steps_per_epoch,
                  "phases": phases}
        log["epochs"].append(record)
        traffic = "traffic not measured" if sent is None else "sent %.1f MB (dense would be %.1f MB), received %.1f MB" % (
            sent / 1e6, record["dense_push_bytes"] / 1e6, received / 1e6)
        say("epoch %d: %.0f images/s, train loss %.4f, test accuracy %.4f, %s" % (
            epoch + 1, record["images_per_second"], train_loss, accuracy or 0, traffic), flush=True)
        if rank == 0 and args.log:
            with open(args.log, "w") as f:
                json.dump(log, f, indent=1)
        if args.checkpoint:
            trainer.save_checkpoint(args.checkpoint.replace("{epoch}", str(epoch + 1)), extra={"epoch": epoch + 1},
                                    keep=args.keep_checkpoints)
    if kv.lgc is not None:  # the autoencoder's weights, moved at the switch to the lgc phase and after each fine-tuning step
        log["autoencoder_bytes"] = kv.lgc.autoencoder_bytes
    if rank == 0 and trainer.group_table:
        log["groups"] = trainer.group_table
    if rank == 0 and (trainer.group_table or kv.lgc is not None):
        if args.log:
            with open(args.log, "w") as f:
                json.dump(log, f, indent=1)
    if rank == 0 and log["epochs"]:
        print(report(log), flush=True)
        if args.log:
            plot_curves(log, os.path.splitext(args.log)[0] + ".png")
    return log


def report(log):
    """The closing summary: accuracy, the phases each epoch ran in, and measured push traffic against
    uncompressed pushes (or, when the compression never started, that it did not)."""
    epochs = log["epochs"]
    measured = all(e["bytes_sent"] is not None for e in epochs)
    sent = sum(e["bytes_sent"] for e in epochs) if measured else None
    dense = sum(e["dense_push_bytes"] for e in epochs)
    lines = ["== report ==", "final test accuracy: %.4f after %d epochs (%s, %d workers)"
             % (epochs[-1]["test_accuracy"], epochs[-1]["epoch"], log["args"]["compression"], log["workers"])]
    for e in epochs:
        lines.append("epoch %d ran in: %s" % (e["epoch"], ", ".join(
            "%s (steps %d-%d, %.1f ms per step)" % (p["phase"], *p["steps"], p["ms_per_step"]) for p in e["phases"])))
    compressed = any(p["sends"] == "compressed" for e in epochs for p in e["phases"])
    if log["compression"]["type"] != "none" and not compressed:
        lines.append("compression never started: every step pushed dense gradients (schedule: %s)" % log["schedule"])
    if not measured:
        lines.append("traffic not measured (`ss` of iproute2 is not installed)")
    else:
        lines.append("bytes sent by rank 0: %.1f MB; uncompressed pushes alone would be %.1f MB" % (sent / 1e6, dense / 1e6))
    if measured and compressed:
        lines.append("compression ratio of the sent traffic: %.1fx (%.1f%% of the uncompressed push traffic saved)"
                     % (dense / sent, 100 * (1 - sent / dense)))
    lines += ["epoch %d: %s" % (e["epoch"], e["warning"]) for e in epochs if e.get("warning")]
    if "autoencoder_bytes" in log:
        lines.append("autoencoder weights through rank 0's link: %.1f kB" % (log["autoencoder_bytes"] / 1e3))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
