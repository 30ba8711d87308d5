#!/usr/bin/env python
"""MXNet 1.x's classic training APIs on Fashion-MNIST with compressed gradients: ``Module.fit`` (default) or
a plain ``gluon.Trainer``, with the optimizer (SGD with momentum) on the servers and the workers pushing
gradients summed over their batch, as MXNet's image-classification example trains.

    python -m mxnet_gc.launch -n 2 -s 1 .venv/bin/python examples/classic_fashion_mnist.py \
        --gc-type 4bit --num-epochs 5 [--api gluon]

The only lines that differ from an MXNet 1.x script are the store's creation
(``mxnet_gc.kvstore.create`` in place of ``mx.kvstore.create``) and the compression's type.  The network
is an MLP (784-128-64-10) on images scaled to [0, 1].  Rank 0 prints the test accuracy after every epoch
and, with --log, writes a JSON log: per epoch the accuracy, and every --norms-every pushes of each key
the gradient's and the residual's norms (``kv.residual_history``) and the update's norm.
"""
import argparse
import json
import logging

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

import fashion_mnist
import mxnet_gc


def mlp(loss_scale):
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(mx.sym.Flatten(data), num_hidden=128, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=64, name="fc2")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    return mx.sym.SoftmaxOutput(net, name="softmax", grad_scale=loss_scale)


def compression_params(args):
    if args.gc_type == "none":
        return {"type": "none"}
    options = {} if args.gc_rounding is None else {"rounding": args.gc_rounding}
    if args.gc_type != "2bit":  # (the servers send the weights' differences: mxnet_gc/kvstore/ps/weight_pulls.py)
        options["compressed_pull"] = args.gc_compressed_pull
    if args.gc_type in ("2bit", "gc_2bit"):  # (MXNet's own 2bit takes no rounding: it says so)
        return {"type": args.gc_type, "threshold": args.gc_threshold, **options}
    params = {"type": "4bit", **options}
    if args.gc_thresholds is not None:
        params["thresholds"] = args.gc_thresholds if "," not in args.gc_thresholds else \
            [float(t) for t in args.gc_thresholds.split(",")]
    return params


def iterators(args, rank, num_workers):
    images, labels = fashion_mnist.load("train")
    if args.num_examples:
        images, labels = images[:args.num_examples], labels[:args.num_examples]
    images, labels = fashion_mnist.shard(images, labels, rank, num_workers)
    test_images, test_labels = fashion_mnist.load("test")
    if args.test_limit:
        test_images, test_labels = test_images[:args.test_limit], test_labels[:args.test_limit]

    def normalized(x):  # to [0, 1], as MXNet's image-classification example does
        return (x.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)

    train = mx.io.NDArrayIter(normalized(images), labels.astype(np.float32), args.batch_size, shuffle=True,
                              last_batch_handle="discard", label_name="softmax_label")
    test = mx.io.NDArrayIter(normalized(test_images), test_labels.astype(np.float32), 1000,
                             label_name="softmax_label")
    return train, test


class UpdateNorms:
    """Every ``every`` batches, the norm of each parameter's change since the last sample."""

    def __init__(self, weights, every):
        self.weights, self.every, self.rows, self._last = weights, every, [], None  # weights(): {name: NDArray}

    def __call__(self, epoch, batch):
        if batch % self.every:
            return
        weights = {k: v.asnumpy() for k, v in self.weights().items()}
        if self._last is not None:
            self.rows.append({"epoch": epoch + 1, "batch": batch,
                              "update_norm": {k: float(np.linalg.norm(weights[k] - self._last[k])) for k in weights}})
        self._last = weights


def train_module(args, kv, train, test, norms_every):
    """Module.fit, the optimizer on the servers (update_on_kvstore); returns (epochs, update norms)."""
    mod = mx.mod.Module(mlp(args.loss_scale), context=mx.cpu())
    norms = UpdateNorms(lambda: mod.get_params()[0], norms_every)
    epochs = []

    def end_of_epoch(epoch, symbol, arg_params, aux_params):
        epochs.append({"epoch": epoch + 1, "test_accuracy": mod.score(test, "acc")[0][1]})  # (1-based, as every log)

    mod.fit(train, num_epoch=args.num_epochs, kvstore=kv, optimizer="sgd",
            optimizer_params={"learning_rate": args.lr, "momentum": args.mom, "wd": args.wd,
                              "rescale_grad": 1.0 / (args.loss_scale * args.batch_size * kv.num_workers)},
            initializer=mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2),
            batch_end_callback=lambda p: norms(p.epoch, p.nbatch),
            epoch_end_callback=lambda *a: (end_of_epoch(*a), report(kv, epochs[-1])))
    return epochs, norms.rows


def train_gluon(args, kv, train, test, norms_every):
    """A plain gluon.Trainer on mxnet_gc's store: the optimizer on the servers (Gluon's default for a dist
    store); ``step`` is given the batch summed over the workers, as Module's rescale_grad."""
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(128, activation="relu"), gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(10))
    net.initialize(mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": args.lr, "momentum": args.mom,
                                                         "wd": args.wd}, kvstore=kv)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    norms = UpdateNorms(lambda: {p.name: p.data() for p in net.collect_params().values()}, norms_every)
    epochs = []
    for epoch in range(args.num_epochs):
        train.reset()
        for nbatch, batch in enumerate(train):
            with autograd.record():
                loss = loss_fn(net(batch.data[0]), batch.label[0]) * args.loss_scale
            loss.backward()
            trainer.step(args.batch_size * kv.num_workers * args.loss_scale)
            norms(epoch, nbatch)
        metric = mx.metric.Accuracy()
        test.reset()
        for batch in test:
            metric.update([batch.label[0]], [net(batch.data[0])])
        epochs.append({"epoch": epoch + 1, "test_accuracy": metric.get()[1]})
        report(kv, epochs[-1])
    return epochs, norms.rows


def report(kv, row):
    if kv.rank == 0:
        print("epoch %d: test accuracy %.4f" % (row["epoch"], row["test_accuracy"]), flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--api", choices=["module", "gluon"], default="module",
                   help="Module.fit or a plain gluon.Trainer, the optimizer on the servers either way")
    p.add_argument("--kv-store", default="dist_sync", help="dist_sync, dist_async or horovod")
    p.add_argument("--gc-type", choices=["none", "2bit", "gc_2bit", "4bit"], default="4bit", help="the compression")
    p.add_argument("--gc-threshold", type=lambda v: v if v == "auto" else float(v), default=0.01,
                   help="2bit's threshold (gc_2bit: or 'auto', fitted to each key's gradients in the warm-up)")
    p.add_argument("--gc-thresholds", default=None,
                   help="4bit's levels: a group name, 'auto' or comma-separated levels (default: the store's, 'auto')")
    p.add_argument("--gc-rounding", choices=["floor", "nearest"], default=None,
                   help="4bit's and gc_2bit's rounding (default: the codec's, 'nearest' for 4bit, 'floor' for gc_2bit)")
    p.add_argument("--gc-compressed-pull", action="store_true",
                   help="pull the weights compressed too (gc_2bit, 4bit): the servers send their difference")
    p.add_argument("--num-epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=100, help="per worker")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--mom", type=float, default=0.9, help="SGD's momentum (on the servers)")
    p.add_argument("--wd", type=float, default=1e-4)
    p.add_argument("--loss-scale", type=float, default=1.0,
                   help="multiplies the gradients (and divides rescale_grad by it: the same training), a scale test")
    p.add_argument("--num-examples", type=int, default=0, help="use the first N training images only (0: all)")
    p.add_argument("--test-limit", type=int, default=0, help="test on the first N test images only (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log", "--log-file", help="JSON log (rank 0)")
    p.add_argument("--norms-every", type=int, default=10, help="pushes between two norm samples in the log")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    mxnet_gc.log.show()  # mxnet_gc's lines with their prefix (rank 0: the warm-up, the fitted levels)
    mx.random.seed(args.seed)
    np.random.seed(args.seed)
    if args.gc_compressed_pull and args.gc_type in ("none", "2bit"):
        raise SystemExit("--gc-compressed-pull needs mxnet_gc's gc_2bit or 4bit")
    kv = mxnet_gc.kvstore.create(args.kv_store)
    kv.set_gradient_compression(compression_params(args))
    train, test = iterators(args, kv.rank, kv.num_workers)
    epochs, updates = (train_module if args.api == "module" else train_gluon)(args, kv, train, test, args.norms_every)
    if kv.rank == 0 and args.log:
        with open(args.log, "w") as f:
            json.dump({"args": vars(args), "epochs": epochs, "updates": updates,
                       "residuals": {str(k): v for k, v in kv.residual_history.items()}}, f)

if __name__ == "__main__":
    main()
