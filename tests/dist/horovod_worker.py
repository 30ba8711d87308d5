"""A worker of tests/test_horovod.py, started by horovodrun: runs a job spec (as tests/dist/worker.py
does for the parameter server, also its 'scenarios') on mxnet_gc's horovod store and saves every pulled value."""
import json
import os
import sys

if __name__ == "__main__":  # a job's process (not a test importing this file): MXNet without scipy
    import without_scipy  # noqa: F401  (before mxnet: see its docstring)
import numpy as np
import mxnet as mx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import mxnet_gc  # noqa: E402
from dist.job import each_scenario, from_the_first_step, gradient, initial_value  # noqa: E402

if __name__ == "__main__":  # a job's worker: its lines on standard output, where the tests read them
    mxnet_gc.log.show()


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    kv = mxnet_gc.kvstore.create("horovod")
    saved = each_scenario(spec, lambda wire, named: run(kv, wire, named))  # (one store for all)
    np.savez(os.path.join(spec["out"], "rank%d.npz" % kv.rank), **saved)


def label(key):
    """The name a key's values are saved under: a str key's own, '#3' for int 3 (apart from str '3')."""
    return key if isinstance(key, str) else "#%d" % key


def run(kv, spec, named):
    """Runs one scenario (``spec``, as sent; ``named``: the same with the keys its results are saved under);
    returns {name: array}."""
    compression = from_the_first_step(dict(spec["compression"]))
    if spec.get("differ") and kv.rank == 1:
        compression["density"] = 0.5
    kv.set_gradient_compression(compression)
    keys = [k for k, _ in spec["keys"]]
    names = [label(k) for k, _ in named["keys"]]
    shapes = {k: tuple(s) for k, s in spec["keys"]}
    kv.init(keys, [mx.nd.array(initial_value(spec["seed"], i, shapes[k]) + kv.rank) for i, k in enumerate(keys)],
            groups=spec.get("groups"))
    saved = {}
    outs = [mx.nd.zeros(shapes[k]) for k in keys]
    kv.pull(keys, out=outs)
    for k, o in zip(names, outs):
        saved["%s/init" % k] = o.asnumpy()
    for step in range(spec["steps"]):
        if step == spec.get("regroup_at"):
            kv.regroup([keys])
        grads = [mx.nd.array(gradient(spec["seed"], kv.rank, step, i, shapes[k], spec["scale"]))
                 for i, k in enumerate(keys)]
        kv.push(keys, grads)
        kv.pull(keys, out=outs)
        for k, o in zip(names, outs):
            saved["%s/%d" % (k, step)] = o.asnumpy()
    return saved


if __name__ == "__main__":
    main()
