"""A worker of tests/test_dist_lgc.py: an MLP trained with mxnet_gc.gluon.Trainer and 'lgc' through
every phase; saves each step's phase, local gradients, the pulled update it applied, and at the end
the autoencoder's weights it received and its final weights.

    lgc_worker.py OUT PARAMS_JSON STEPS [RESUME_AT]
"""
import json
import os
import sys

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

import mxnet_gc


def main():
    out, params, steps = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    mx.random.seed(1)
    net = gluon.nn.HybridSequential()
    for width in (64, 48, 32):
        net.add(gluon.nn.Dense(width, activation="relu"))
    net.add(gluon.nn.Dense(4))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 20)))
    trainer = mxnet_gc.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore="dist_sync",
                                     compression_params=params, update_on_kvstore=False)
    kv = trainer.store
    params_list = [p for p in net.collect_params().values() if p.grad_req != "null"]
    rng = np.random.default_rng(kv.rank)
    saved, phases = {}, []
    for step in range(steps):
        x = mx.nd.array(rng.standard_normal((16, 20)).astype(np.float32))
        y = mx.nd.array(rng.integers(0, 4, 16).astype(np.float32))
        with autograd.record():
            loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
        loss.backward()
        for i, p in enumerate(params_list):
            saved["local/%d/%d" % (step, i)] = p.grad().asnumpy()
        trainer.step(16)
        phases.append(kv.lgc.schedule.phase_at(step).name)
        for i, p in enumerate(params_list):
            saved["pulled/%d/%d" % (step, i)] = p.grad().asnumpy()
    for i, p in enumerate(params_list):
        saved["weight/%d" % i] = p.data().asnumpy()
    for g, weights in enumerate(kv.lgc.autoencoder_weights()):
        saved["autoencoder/%d" % g] = weights
    names = {trainer._param2idx[p.name]: p.name for p in params_list}
    np.savez(os.path.join(out, "rank%d.npz" % kv.rank), phases=np.array(phases),
             names=np.array([p.name for p in params_list]), coded=np.array([names[k] for k in kv.lgc.coded]),
             groups=np.array(json.dumps([[names[k] for k in g] for g in kv.lgc.group_keys()])),
             **saved)


if __name__ == "__main__":
    main()
