"""The '8bit' codec (linear quantization, one scale per array, error feedback) against an independent numpy
reference, bit for bit: the operators, the numpy calls, corrupt payloads, and a real parameter-server job
(keys split over two servers, each part with its own scale)."""
import mxnet as mx
import numpy as np
import pytest

import mxnet_gc
from conftest import assert_payload_refused, nd
from dist.job import gradient, run_job
from mxnet_gc.kvstore import protocol
from mxnet_gc.message_plan import MessagePlan

CODEC = {"type": "8bit"}
F32 = np.float32


def reference_encode(grad, residual):
    """(payload as float32 words, new residual, the values sent) of one step: the residual of every finite
    value is a - sent, also when the scale is 0 (all codes 0, so residual = a)."""
    a = residual + grad
    finite = np.isfinite(a)
    scale = F32(np.max(np.abs(a[finite]), initial=F32(0)) / F32(127))
    codes = np.zeros(len(a), np.int8)
    if scale > 0:
        codes[finite] = np.clip(np.rint(a[finite] / scale), -127, 127)
    sent = codes.astype(F32) * scale
    new_residual = residual.copy()
    new_residual[finite] = a[finite] - sent[finite]
    body = np.zeros(4 * (-(-len(a) // 4)), np.int8)
    body[:len(a)] = codes
    return np.concatenate([np.array([scale], F32), body.view(F32)]), new_residual, sent


def payload_of(scale, codes):
    body = np.zeros(4 * (-(-len(codes) // 4)), np.int8)
    body[:len(codes)] = codes
    return np.concatenate([np.array([scale], F32), body.view(F32)])


@pytest.mark.parametrize("n", [1, 3, 4, 5, 1000, 300_001])  # 300,001: the kernels' threads split it
def test_steps_match_the_reference(n):
    codec = mxnet_gc.codecs.create(CODEC)
    rng = np.random.default_rng(n)
    residual, want_residual = codec.new_residual((n,)), np.zeros(n, F32)
    for step in range(3):
        grad = (rng.standard_normal(n) * 10.0 ** (step - 1)).astype(F32)
        want_payload, want_residual, sent = reference_encode(grad, want_residual)
        payload = codec.encode(nd(grad), residual)
        assert payload.shape == (codec.payload_size(n),) == (1 + (n + 3) // 4,)
        np.testing.assert_array_equal(payload.asnumpy().view(np.uint32), want_payload.view(np.uint32))
        np.testing.assert_array_equal(residual.asnumpy(), want_residual)
        out = mx.nd.full(n, 7.0)
        np.testing.assert_array_equal(codec.decode(payload, out).asnumpy(), sent)
        acc = mx.nd.ones(n)
        np.testing.assert_array_equal(codec.decode_add(payload, acc).asnumpy(), F32(1) + sent)
        # the numpy calls (a server's) give the same
        server_residual, words = np.zeros(n, F32), np.zeros(codec.payload_size(n), F32)
        codec.encode_numpy(grad, server_residual, words)
        np.testing.assert_array_equal(words.view(np.uint32), reference_encode(grad, np.zeros(n, F32))[0].view(np.uint32))
        values = np.full(n, 2.0, F32)
        np.testing.assert_array_equal(codec.decode_numpy(want_payload, values, add=True), F32(2) + sent)


def test_non_finite_values_are_dropped_and_zeros_send_nothing():
    codec = mxnet_gc.codecs.create(CODEC)
    grad = np.array([1.0, np.nan, -np.inf, -2.54, 0.0], F32)
    residual = nd(np.full(5, 0.25, F32))
    want_payload, want_residual, sent = reference_encode(grad, np.full(5, 0.25, F32))
    payload = codec.encode(nd(grad), residual)
    np.testing.assert_array_equal(payload.asnumpy().view(np.uint32), want_payload.view(np.uint32))
    np.testing.assert_array_equal(residual.asnumpy()[1:3], [0.25, 0.25])  # kept
    assert np.array_equal(residual.asnumpy(), want_residual) and sent[1] == sent[2] == 0
    assert payload.asnumpy()[0] == F32(2.29) / F32(127)  # the largest finite |a| over 127
    zero_residual = mx.nd.zeros(5)
    payload = codec.encode(mx.nd.zeros(5), zero_residual)
    assert not payload.asnumpy().any() and not zero_residual.asnumpy().any()


def test_a_segment_with_scale_0_keeps_a_as_its_residual():
    """Steps where a = residual + grad cancels exactly, or is below ~9e-44 (max |a| / 127 rounds to the
    scale 0), in one segment of a message and not in the other: with error feedback, what cancelled is
    not sent again, and the denormals add up in the residual until they are sent."""
    tiny = F32(2e-44)  # a denormal: 2e-44 / 127 is 0 in float32
    assert F32(tiny) / F32(127) == 0 and F32(tiny) > 0
    grads = [np.array([0.5, -1.25, 3.0, 2.0], F32),  # sets residuals to cancel against next step
             None,  # -a: the 'cancel' segment's a is exactly 0
             np.array([tiny, -tiny, tiny, 0], F32),
             np.array([tiny, 0, 0, tiny], F32),
             np.array([1.0, 0.0, -0.5, 0.25], F32)]
    codec = mxnet_gc.codecs.create(CODEC)
    sizes = (4, 5)  # the second segment: ordinary values, its own scale
    rng = np.random.default_rng(3)
    plan = MessagePlan([(codec, 4, 0, 0, 0), (codec, 5, 4, 0, codec.payload_size(4))])
    residuals = [codec.new_residual((n,)) for n in sizes]
    want = [np.zeros(n, F32) for n in sizes]
    scales_0, history = 0, []
    for step, grad in enumerate(grads):
        if grad is None:
            grad = -want[0]
        other = rng.standard_normal(sizes[1]).astype(F32)
        segments = [reference_encode(g, r) for g, r in zip((grad, other), want)]
        payload = mx.nd.full(codec.payload_size(4) + codec.payload_size(5), 7.0)
        plan.push_encode([nd(grad), nd(other)], residuals, payload)
        np.testing.assert_array_equal(payload.asnumpy().view(np.uint32),
                                      np.concatenate([p for p, _, _ in segments]).view(np.uint32), err_msg=str(step))
        want = [r for _, r, _ in segments]
        for got, expected in zip(residuals, want):
            np.testing.assert_array_equal(got.asnumpy().view(np.uint32), expected.view(np.uint32), err_msg=str(step))
        scales_0 += segments[0][0][0] == 0
        history.append(want[0])
    assert scales_0 == 3  # the cancelling step and both denormal steps
    assert history[0].any() and not history[1].any()  # cancelled: nothing left to send again
    np.testing.assert_array_equal(history[3], [2 * tiny, -tiny, tiny, tiny])  # the denormals add up


@pytest.mark.parametrize("scale, codes, message", [
    (np.nan, [1, 2, 3], "the scale nan is not a finite number >= 0"),
    (-1.0, [1, 2, 3], "the scale -1 is not a finite number >= 0"),
    (np.inf, [1, 2, 3], "is not a finite number"),
    (0.5, [1, -128, 3], "byte 1 is the code -128, never sent"),
])
def test_corrupt_payloads_are_refused(scale, codes, message):
    codec = mxnet_gc.codecs.create(CODEC)
    assert_payload_refused(codec, payload_of(F32(scale), np.array(codes, np.int8)), message)


def test_nonzero_padding_is_refused():
    codec = mxnet_gc.codecs.create(CODEC)
    payload = payload_of(F32(0.5), np.array([1, 2, 3], np.int8))
    payload[1:].view(np.int8)[3] = 9
    with pytest.raises(ValueError, match="byte 3 of the padding is not 0"):
        codec.decode_numpy(payload, np.zeros(3, F32))


def test_bad_parameters_and_arrays():
    with pytest.raises(ValueError, match="8bit: unknown parameter.*'levels'"):
        mxnet_gc.codecs.create({"type": "8bit", "levels": 3})
    codec = mxnet_gc.codecs.create(CODEC)
    with pytest.raises(ValueError, match=r"state for 4 values must have shape \(4,\)"):
        codec.encode(mx.nd.ones(4), mx.nd.zeros(5))
    with pytest.raises(mx.base.MXNetError, match="8bit: takes no parameters, got 1"):
        mx.nd.mxgc_8bit_encode(mx.nd.ones(4), mx.nd.zeros(4), params="1").wait_to_read()


def simulate(keys, steps, seed, workers, servers, bound):
    """{(key, step): the pulled sum}: each worker encodes each part of a key with its own residual."""
    expected = {}
    for i, (key, shape) in enumerate(keys):
        n = int(np.prod(shape))
        sizes = protocol.split_sizes(n, servers * max(1, -(-n // (bound * servers)))) if n >= bound else [n]
        edges = np.cumsum([0] + sizes)
        residuals = [np.zeros(n, F32) for _ in range(workers)]
        for step in range(steps):
            total = np.zeros(n, F32)
            for rank in range(workers):
                g = gradient(seed, rank, step, i, shape, 1.0).ravel()
                for b, e in zip(edges[:-1], edges[1:]):
                    _, residuals[rank][b:e], sent = reference_encode(g[b:e], residuals[rank][b:e])
                    total[b:e] += sent
            expected[key, step] = total.reshape(shape)
    return expected


@pytest.mark.job
def test_parameter_server_job_matches_the_simulation(tmp_path):
    """2 workers, 2 servers: 'big' split in 4 parts (each its own scale), small keys sharing messages."""
    keys = [["big", [3000]], ["w", [20, 10]], ["b", [20]]]
    spec = {"keys": keys, "steps": 4, "scale": 1.0, "seed": 8, "lists": True, "groups": [["big"], ["w", "b"]],
            "compression": CODEC, "zero_init": True}
    _, results = run_job(tmp_path, spec, workers=2, servers=2, env=["MXNET_GC_BIGARRAY_BOUND=1000"])
    expected = simulate(keys, 4, 8, 2, 2, bound=1000)
    assert sorted(results) == [0, 1]
    for rank, saved in results.items():
        for (key, step), want in expected.items():
            np.testing.assert_array_equal(saved["%s/%d" % (key, step)], want, err_msg="rank %d %s %d" % (rank, key, step))
