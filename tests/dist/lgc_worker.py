"""A worker of tests/test_dist_lgc.py: an MLP trained with mxnet_gc.gluon.Trainer and 'lgc' through
every phase; saves each step's phase, local gradients, the pulled update it applied and the
autoencoder's weights it holds after the step, and at the end its final weights.

    lgc_worker.py OUT PARAMS_JSON STEPS [RUN_JSON]

RUN_JSON: {"store": "horovod"} runs on the horovod store (started by horovodrun; default: the
parameter server, started by tools/launch.py); {"save_at": [S, ...]} saves a checkpoint (prefix
OUT/ckpt-S) after each step S; {"resume": S} starts from that one; {"fault": F} makes one worker misbehave: F = {"rank": r,
"options": {...}} (other 'lgc' options on rank r), {"rank": r, "corrupt": KIND} (the magic of rank r's
messages of KIND, LEAD, INNOV, INDEX, VECTOR, CODED or CAND, is damaged, as in a corrupt payload) or {"rank": r,
"die_at": S} (rank r is killed in step S, after its backward); {"inf": [[r, S, i, j], ...]}: rank r's
gradient of parameter i gets an inf at flat position j in step S.  Each step's data depends on (rank,
step) only.
"""
import json
import os
import signal
import sys

if __name__ == "__main__":  # a job's process (not a test importing this file): MXNet without scipy
    import without_scipy  # noqa: F401  (before mxnet: see its docstring)
import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

import mxnet_gc
from mxnet_gc.lgc import coder

if __name__ == "__main__":  # a job's worker: its lines on standard output, where the tests read them
    mxnet_gc.log.show()


def main():
    out, params, steps = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    run = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    fault = run.get("fault")
    kv = mxnet_gc.kvstore.create(run.get("store", "dist_sync"))
    rank = kv.rank
    if fault and fault["rank"] == rank:
        params = dict(params, **fault.get("options", {}))
        if "corrupt" in fault:
            method = {"LEAD": "lead_message", "INNOV": "innov_message", "INDEX": "index_message",
                      "VECTOR": "vector_message", "CODED": "own_code_message", "CAND": "candidate_message"}[fault["corrupt"]]
            original = getattr(coder.GroupCoder, method)

            def corrupted(self, *args):
                words = original(self, *args).copy()
                words.view(np.uint32)[0] ^= 0x1  # not the magic of any message
                return words
            setattr(coder.GroupCoder, method, corrupted)
    mx.random.seed(1)
    net = gluon.nn.HybridSequential()
    for width in (64, 48, 32):
        net.add(gluon.nn.Dense(width, activation="relu"))
    net.add(gluon.nn.Dense(4))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 20)))
    trainer = mxnet_gc.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv,
                                     compression_params=params, update_on_kvstore=False)
    params_list = [p for p in net.collect_params().values() if p.grad_req != "null"]
    resume = run.get("resume")
    first = trainer.load_checkpoint(os.path.join(out, "ckpt-%d" % resume))["step"] if resume is not None else 0
    saved, phases = {}, []
    for step in range(first, steps):
        rng = np.random.default_rng([kv.rank, step])
        x = mx.nd.array(rng.standard_normal((16, 20)).astype(np.float32))
        y = mx.nd.array(rng.integers(0, 4, 16).astype(np.float32))
        with autograd.record():
            loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
        loss.backward()
        if fault and fault.get("die_at") == step and fault["rank"] == rank:
            os.kill(os.getpid(), signal.SIGKILL)
        for r, s, i, position in run.get("inf", ()):
            if (r, s) == (rank, step):  # an inf in this worker's gradient (written through a numpy copy)
                grad = params_list[i].grad()
                values = grad.asnumpy()
                values.reshape(-1)[position] = np.inf
                grad[:] = values
        for i, p in enumerate(params_list):
            saved["local/%d/%d" % (step, i)] = p.grad().asnumpy()
        trainer.step(16)
        phases.append(kv.schedule.phase_at(step).name)
        for i, p in enumerate(params_list):
            saved["pulled/%d/%d" % (step, i)] = p.grad().asnumpy()
        for g, weights in enumerate(kv.lgc.autoencoder_weights()):
            if weights is not None:
                saved["autoencoder/%d/%d" % (step, g)] = weights
        if step in run.get("save_at", ()):
            trainer.save_checkpoint(os.path.join(out, "ckpt-%d" % step), extra={"step": step + 1})
    for i, p in enumerate(params_list):
        saved["weight/%d" % i] = p.data().asnumpy()
    names = {trainer.key_of(p.name): p.name for p in params_list}
    np.savez(os.path.join(out, "rank%d%s.npz" % (kv.rank, "" if resume is None else ".resumed-%d" % resume)), phases=np.array(phases),
             names=np.array([p.name for p in params_list]), coded=np.array([names[k] for k in kv.lgc.coded]),
             groups=np.array(json.dumps([[names[k] for k in g] for g in kv.lgc.group_keys()])),
             parts=np.array(json.dumps([[[names[k], b, e] for k, b, e in g] for g in kv.lgc.group_parts()])),
             nonfinite=np.array(json.dumps({names[k]: n for k, n in kv.nonfinite_counts.items()})), **saved)


if __name__ == "__main__":
    main()
