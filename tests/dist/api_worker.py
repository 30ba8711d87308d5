"""A worker of tests/test_store_api.py: MXNet's kvstore API at its edges, on either of mxnet_gc's stores.

    api_worker.py STORE OUT [NONFINITE]

STORE is 'dist_sync' (started by tools/launch.py) or 'horovod' (started by horovodrun).  It records the
error each bad call raises, pushes values per device and duplicate keys, a NaN gradient (the store's
NONFINITE policy, default 'warn'), and trains a small Dense layer with the stock gluon.Trainer on two
contexts; everything goes to OUT/rank<r>.npz for the test to compare with its numpy reference.
"""
import os
import sys
import warnings

if __name__ == "__main__":  # a job's process (not a test importing this file): MXNet without scipy
    import without_scipy  # noqa: F401  (before mxnet: see its docstring)
import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import mxnet_gc  # noqa: E402

if __name__ == "__main__":  # a job's worker: its lines on standard output, where the tests read them
    mxnet_gc.log.show()

POW2 = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
CONTEXTS = [mx.cpu(0), mx.cpu(1)]


def data(rank, ctx_index, step):
    """Inputs (4 x 4) and targets (4 x 3) of one context of one worker at one step."""
    rng = np.random.default_rng([rank, ctx_index, step])
    return rng.standard_normal((4, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)


def initial_dense():
    rng = np.random.default_rng(99)
    return rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(3).astype(np.float32)


def error_of(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001  (recorded for the test)
        return "%s: %s" % (type(e).__name__, e)
    return "no error"


def main():
    name, out = sys.argv[1], sys.argv[2]
    policy = sys.argv[3] if len(sys.argv) > 3 else "warn"
    kv = mxnet_gc.kvstore.create(name)
    rank = kv.rank
    saved = {}

    kv.init(["a", 7], [mx.nd.zeros((3, 4)), mx.nd.zeros(5)])
    g = mx.nd.ones((3, 4))
    bad_calls = {
        "keys_and_values": lambda: kv.push(["a", 7], [g]),
        "pull_without_out": lambda: kv.pull("a"),
        "bool_key": lambda: kv.push(True, mx.nd.ones(1)),
        "float_key": lambda: kv.pull(7.0, out=mx.nd.zeros(5)),
        "empty_init": lambda: kv.init("z", mx.nd.empty((0,))),
        "float16_push": lambda: kv.push("a", g.astype("float16")),
        "wrong_shape_pull": lambda: kv.pull("a", out=mx.nd.zeros(12)),
        "uninitialized": lambda: kv.push("nope", g),
        "duplicate_init": lambda: kv.init(["y", "y"], [mx.nd.zeros(2), mx.nd.zeros(2)]),
    }
    for label, call in bad_calls.items():
        saved["error/" + label] = np.array(error_of(call))
    kv.init("z", mx.nd.ones(2))  # the refused init registered nothing
    z = mx.nd.zeros(2)
    kv.pull("z", out=z)
    saved["z"] = z.asnumpy()

    # one array per device: summed on push, written to every output on pull
    devices = [mx.nd.full((3, 4), (1 + rank) * 10 ** i, ctx=c) for i, c in enumerate(CONTEXTS)]
    kv.push("a", devices)
    outs = [mx.nd.zeros((3, 4), ctx=c) for c in CONTEXTS]
    kv.pull("a", out=outs)
    for i, o in enumerate(outs):
        saved["devices/%d" % i] = o.asnumpy()

    # a key twice in one call: pushes summed, both outputs written
    kv.push(["a", 7, "a"], [mx.nd.full((3, 4), 1.0), mx.nd.full(5, float(rank)), mx.nd.full((3, 4), 2.0)])
    p, q, r = mx.nd.zeros((3, 4)), mx.nd.zeros((3, 4)), mx.nd.zeros(5)
    kv.pull(["a", 7, "a"], out=[p, r, q])
    saved["duplicates/first"], saved["duplicates/second"], saved["duplicates/other"] = \
        p.asnumpy(), q.asnumpy(), r.asnumpy()

    # a NaN gradient under 4bit: warned (or raised) with the key's name, at the next push
    kv.set_gradient_compression({"type": "4bit", "thresholds": POW2, "warmup_steps": 0, "compressed_pull": False})
    kv.set_nonfinite(policy)
    kv.set_key_names({"a": "dense0_weight"})
    nan = np.ones((3, 4), np.float32)
    if rank == 0 or policy == "raise":  # (with 'raise', every worker stops at the same push)
        nan[1, 2], nan[0, 0] = np.nan, np.inf
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step, grad in enumerate([nan, np.ones((3, 4), np.float32), nan]):
            try:
                kv.pushpull("a", mx.nd.array(grad), out=p)
            except mxnet_gc.kvstore.NonFiniteGradientError as e:
                saved["nonfinite/error"] = np.array("step %d: %s" % (step, e))
                break
    saved["nonfinite/warnings"] = np.array([str(w.message) for w in caught if "non-finite" in str(w.message)])
    saved["nonfinite/count"] = np.array(kv.nonfinite_counts.get("a", 0))
    if "nonfinite/error" in saved:  # this worker stops here, as a training script would
        np.savez(os.path.join(out, "rank%d.npz" % rank), **saved)
        return
    residuals = os.path.join(out, "rank%d.residuals" % rank)
    kv.save_residuals(residuals)
    kv.set_gradient_compression({"type": "none"})
    saved["error/residuals_of_4bit"] = np.array(error_of(lambda: kv.load_residuals(residuals)))

    # the stock gluon.Trainer with two contexts per worker
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize(ctx=CONTEXTS)
    weight, bias = initial_dense()
    net.weight.set_data(mx.nd.array(weight))
    net.bias.set_data(mx.nd.array(bias))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv,
                            update_on_kvstore=name == "dist_sync")
    loss = gluon.loss.L2Loss()
    for step in range(3):
        with autograd.record():
            losses = [loss(net(mx.nd.array(x, ctx=c)), mx.nd.array(y, ctx=c))
                      for c, (x, y) in zip(CONTEXTS, [data(rank, i, step) for i in range(len(CONTEXTS))])]
        autograd.backward(losses)
        trainer.step(8)
    for i, c in enumerate(CONTEXTS):
        saved["gluon/weight/%d" % i] = net.weight.data(c).asnumpy()
        saved["gluon/bias/%d" % i] = net.bias.data(c).asnumpy()
    np.savez(os.path.join(out, "rank%d.npz" % rank), **saved)


if __name__ == "__main__":
    main()
