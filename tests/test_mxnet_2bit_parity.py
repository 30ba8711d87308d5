"""Our '2bit' gives the same values as MXNet 1.9.1's built-in 2bit on the same inputs.

MXNet's 2bit kernels are reachable only through a kvstore with gradient compression; the 'device'
store compresses each device's push with that device's residual, decodes and sums.  We push from two
CPU contexts and compare every pull with our codec run on the same gradients.
"""
import numpy as np
import pytest
import mxnet as mx

import mxnet_gc


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 70_001])
@pytest.mark.parametrize("threshold", [0.5, 0.05])
def test_same_values_as_mxnet_2bit(n, threshold):
    devices = [mx.cpu(0), mx.cpu(1)]
    kv = mx.kv.create("device")
    assert kv.type == "device"
    kv.set_gradient_compression({"type": "2bit", "threshold": threshold})
    kv.init(0, mx.nd.zeros(n))
    codec = mxnet_gc.codecs.create({"type": "2bit", "threshold": threshold})
    residuals = [mx.nd.zeros(n) for _ in devices]
    rng = np.random.default_rng(n)
    nonzero = 0
    for step in range(5):
        grads = [(rng.standard_normal(n) * threshold * 0.7).astype(np.float32) for _ in devices]
        if step == 2:  # exact values at and around the threshold
            grads[0][: min(n, 4)] = np.float32([threshold, -threshold, 0.0, threshold * 2])[: min(n, 4)]
        kv.push(0, [mx.nd.array(g, ctx=d) for g, d in zip(grads, devices)])
        pulled = mx.nd.zeros(n)
        kv.pull(0, out=pulled)
        ours = mx.nd.zeros(n)
        for g, r in zip(grads, residuals):
            codec.decode_add(codec.encode(mx.nd.array(g), r), ours)
        np.testing.assert_array_equal(ours.asnumpy(), pulled.asnumpy(), err_msg="step %d" % step)
        nonzero += np.count_nonzero(pulled.asnumpy())
    assert nonzero > 0
