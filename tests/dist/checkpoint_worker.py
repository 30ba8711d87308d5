"""A worker of tests/test_checkpoint.py: a small network trained with mxnet_gc.gluon.Trainer (4bit,
optimizer on the workers).

    checkpoint_worker.py OUT save     6 steps, a checkpoint after steps 2, 4 and 6 keeping the newest 2
    checkpoint_worker.py OUT load S   a new job resumes from step S's checkpoint (and tries step 2's)

Each writes OUT/<mode>.rank<r>.npz: the weights after each save, or those loaded and the errors seen.
"""
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


def network():
    """The network, its parameters named ckptnet_dense0_weight ... in any process."""
    net = gluon.nn.HybridSequential(prefix="ckptnet_")
    with net.name_scope():
        net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(3))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 5)))
    return net


def main():
    out, mode = sys.argv[1], sys.argv[2]
    kv = mxnet_gc.kvstore.create("dist_sync")
    mx.random.seed(1)
    net = network()
    params = net.collect_params()
    trainer = mxnet_gc.gluon.Trainer(params, "sgd", {"learning_rate": 0.1}, kvstore=kv, update_on_kvstore=False,
                                     compression_params={"type": "4bit", "thresholds": "small", "warmup_steps": 1})
    prefix, saved = os.path.join(out, "ckpt"), {}
    if mode == "load":
        try:
            trainer.load_checkpoint(prefix, step=2)
        except ValueError as e:
            saved["error/2"] = np.array(str(e))
        saved["after"] = trainer.load_checkpoint(prefix, step=int(sys.argv[3]))["after"]
        saved.update(("loaded/%s" % name, p.data().asnumpy()) for name, p in params.items())
    else:
        for step in range(6):
            rng = np.random.default_rng([kv.rank, step])
            with autograd.record():
                loss = gluon.loss.L2Loss()(net(mx.nd.array(rng.standard_normal((4, 5)))),
                                           mx.nd.array(rng.standard_normal((4, 3))))
            loss.backward()
            trainer.step(4)
            if step % 2 == 1:
                trainer.save_checkpoint(prefix, extra={"after": step + 1}, keep=2)
                saved.update(("%d/%s" % (step + 1, name), p.data().asnumpy()) for name, p in params.items())
    np.savez(os.path.join(out, "%s.rank%d.npz" % (mode, kv.rank)), **saved)


if __name__ == "__main__":
    main()
