"""A worker of tests/test_dist_merge.py: an MLP trained with mxnet_gc.gluon.Trainer, 'layerwise_topk',
sparse pulls and a merge plan; saves each step's local gradients and the pulled sums it applied.
Odd steps call ``allreduce_grads`` and ``update`` instead of ``step``.

    merge_worker.py OUT MERGE PIPELINE [STORE [WARMUP]]   (MERGE: dp, layerwise, one, a bucket size in
                                                           bytes or none (the store's default messages);
                                                           STORE: any name of mxnet_gc's stores, default
                                                           dist_sync; WARMUP: dense warm-up steps)

Each rank also saves the phase of the trainer's schedule at every step, and the weights before the first
step and after each one.
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

COMPRESSION = {"type": "layerwise_topk", "density": 0.05, "reset_every": 4, "compressed_pull": True}
STEPS = 5  # (+ the warm-up steps)


def main():
    out, merge, pipeline = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    merge = int(merge) if merge.isdigit() else None if merge == "none" else merge
    mx.random.seed(1)
    net = gluon.nn.HybridSequential()
    for width in (64, 3, 48, 32, 8, 8, 8, 8, 8, 8):  # 11 layers: names that sort as text (dense10 < dense2)
        net.add(gluon.nn.Dense(width, activation="relu"))
    net.add(gluon.nn.Dense(4))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 20)))
    store = sys.argv[4] if len(sys.argv) > 4 else "dist_sync"
    warmup = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    trainer = mxnet_gc.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=store,
                                     profile_steps=2, compression_params=COMPRESSION, update_on_kvstore=False,
                                     merge=merge, pipeline=pipeline, dense_warmup_steps=warmup)
    kv = trainer.store
    params = [p for p in net.collect_params().values() if p.grad_req != "null"]
    rng = np.random.default_rng(kv.rank)
    saved = {"weights/init/%d" % i: p.data().asnumpy() for i, p in enumerate(params)}
    phases = []
    for step in range(warmup + STEPS):
        phases.append(trainer.schedule.current.name)
        x = mx.nd.array(rng.standard_normal((16, 20)).astype(np.float32))
        y = mx.nd.array(rng.integers(0, 4, 16).astype(np.float32))
        with autograd.record():
            loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
        loss.backward()
        for i, p in enumerate(params):  # (waits for backward: these steps are not pipelined)
            saved["local/%d/%d" % (step, i)] = p.grad().asnumpy()
        if step % 2:  # Gluon's two-call form, which must work the same (also while profiling)
            trainer.allreduce_grads()
            trainer.update(16)
        else:
            trainer.step(16)
        for i, p in enumerate(params):
            saved["pulled/%d/%d" % (step, i)] = p.grad().asnumpy()
            saved["weights/%d/%d" % (step, i)] = p.data().asnumpy()
    np.savez(os.path.join(out, "rank%d.npz" % kv.rank), phases=np.array(phases), **saved)
    if kv.rank == 0:
        with open(os.path.join(out, "plan.json"), "w") as f:
            messages = {}  # each message's parameters, as the store sends them
            for p in params:
                messages.setdefault(kv.chunks_of(trainer.key_of(p.name))[0].message, []).append(p.name)
            json.dump({"groups": trainer.merge_plan and trainer.merge_plan.groups, "messages": list(messages.values()),
                       "names": [p.name for p in params],
                       "sizes": [p.data().size for p in params], "pull_each_message": kv.pull_each_message,
                       "type": kv.type}, f)


if __name__ == "__main__":
    main()
