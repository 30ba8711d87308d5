"""A worker of tests/test_weight_pulls.py: MXNet's classic APIs (Module.fit, or a plain gluon.Trainer) with the
optimizer on the servers, on a store that records what it is given and returns.

    classic_worker.py OUT module|gluon|gc COMPRESSION_JSON

(gc: mxnet_gc.gluon.Trainer with the optimizer on the servers, its dense steps the compression's warm-up.)

A small MLP trains on random data for STEPS steps.  The store records, per key and step, the gradient
this worker pushed and the weights the pull returned; with what the job's optimizer was, they go to
OUT/rank<r>.npz for the test's simulation to replay.
"""
import json
import os
import sys

if __name__ == "__main__":  # a job's process (not a test importing this file): MXNet without scipy
    import without_scipy  # noqa: F401  (before mxnet: see its docstring)
import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

import mxnet_gc

if __name__ == "__main__":  # a job's worker: its lines on standard output, where the tests read them
    mxnet_gc.log.show()

STEPS, BATCH, LR, MOMENTUM = 12, 8, 0.5, 0.9


class RecordingStore(mxnet_gc.kvstore.DistSyncStore):
    """The dist store, recording each push's gradient and each pull's weights (numpy copies) per key."""

    def __init__(self):
        super().__init__()
        self.pushed, self.pulled = {}, {}

    def push(self, key, value, priority=0):
        for k, v in _pairs(key, value):
            self.pushed.setdefault(k, []).append(sum(a.asnumpy() for a in (v if isinstance(v, list) else [v])))
        super().push(key, value, priority)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        super().pull(key, out, priority, ignore_sparse)
        for k, o in _pairs(key, out):
            self.pulled.setdefault(k, []).append((o[0] if isinstance(o, list) else o).asnumpy())


def _pairs(key, values):
    return list(zip(key, values)) if isinstance(key, (list, tuple)) else [(key, values)]


def data(rank, step):
    rng = np.random.default_rng([rank, step])
    return rng.standard_normal((BATCH, 20)).astype(np.float32), rng.integers(0, 3, BATCH).astype(np.float32)


def module(kv):
    x = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(x, num_hidden=16, name="fc1")
    net = mx.sym.FullyConnected(mx.sym.Activation(net, act_type="relu"), num_hidden=3, name="fc2")
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(net, name="softmax"), context=mx.cpu())
    batches = [data(kv.rank, s) for s in range(STEPS)]
    train = mx.io.NDArrayIter(np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches]),
                              BATCH, label_name="softmax_label")
    params = {"learning_rate": LR, "momentum": MOMENTUM, "rescale_grad": 1.0 / (BATCH * kv.num_workers)}
    mx.random.seed(3)
    mod.fit(train, num_epoch=1, kvstore=kv, optimizer="sgd", optimizer_params=params,
            initializer=mx.init.Xavier(magnitude=2))
    return params


def trainer(kv, compression=None):
    """A plain gluon.Trainer, or with ``compression`` mxnet_gc's (update_on_kvstore=True)."""
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(16, activation="relu"), gluon.nn.Dense(3))
    mx.random.seed(3)
    net.initialize(mx.init.Xavier(magnitude=2))
    optimizer = ("sgd", {"learning_rate": LR, "momentum": MOMENTUM})
    trainer = gluon.Trainer(net.collect_params(), *optimizer, kvstore=kv) if compression is None else \
        mxnet_gc.gluon.Trainer(net.collect_params(), *optimizer, kvstore=kv, compression_params=compression,
                               update_on_kvstore=True, dense_warmup_steps=compression["warmup_steps"],
                               calibration_steps=compression["warmup_steps"])
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for step in range(STEPS):
        x, y = data(kv.rank, step)
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(x)), mx.nd.array(y))
        loss.backward()
        trainer.step(BATCH * kv.num_workers)
    params = {"learning_rate": LR, "momentum": MOMENTUM, "rescale_grad": 1.0 / (BATCH * kv.num_workers)}
    if compression is not None:  # (its dense steps: until its schedule's last phase)
        params["dense_steps"] = trainer.schedule.start(trainer.schedule.phases[-1].name)
    return params


def main():
    out, api, compression = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    kv = RecordingStore()
    if api == "gc":
        params = trainer(kv, compression)
    else:
        kv.set_gradient_compression(compression)
        params = (module if api == "module" else trainer)(kv)
    keys = sorted((k for k in kv.pulled if not str(k).startswith("__mxgc_")), key=str)  # (not the store's own)
    saved = {"optimizer": np.array(json.dumps(params)), "compression": np.array(json.dumps(kv.compression_config)),
             "keys": np.array(json.dumps(keys))}
    for k in keys:
        saved["pushed/%s" % k] = np.stack(kv.pushed[k])
        saved["pulled/%s" % k] = np.stack(kv.pulled[k])
    np.savez(os.path.join(out, "rank%d.npz" % kv.rank), **saved)


if __name__ == "__main__":
    main()
