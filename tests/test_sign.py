"""The 'sign' codec (each value's sign times the array's mean magnitude, error feedback) against an
independent numpy reference: the operators, the numpy calls, non-finite gradients, corrupt payloads and bad
parameters.  Its real jobs on both transports: tests/test_every_codec.py."""
import mxnet as mx
import numpy as np
import pytest

import mxnet_gc
from conftest import assert_payload_refused, nd

CODEC = {"type": "sign"}
F32 = np.float32


def reference_encode(grad, residual, scale=None):
    """(payload as float32 words, new residual, the values sent) of one step; ``scale``: the kernel's (its
    double sum in order may differ from numpy's by a float32 rounding), else the mean |a| here."""
    a = residual + grad
    a = np.where(np.isfinite(grad) & np.isfinite(a), a, residual)
    if scale is None:
        scale = F32(np.sum(np.abs(a), dtype=np.float64) / len(a))
    negative = a < 0
    sent = np.where(negative, -scale, scale).astype(F32)
    bits = np.zeros(32 * (-(-len(a) // 32)), np.uint8)
    bits[:len(a)] = negative
    words = np.packbits(bits, bitorder="little").view("<u4").view(F32)
    return np.concatenate([np.array([scale], F32), words]), (a - sent).astype(F32), sent


@pytest.mark.parametrize("n", [1, 31, 32, 33, 1000, 300_001])  # 300,001: the kernels' threads split it
def test_steps_match_the_reference(n):
    codec = mxnet_gc.codecs.create(CODEC)
    rng = np.random.default_rng(n)
    residual, want_residual = codec.new_residual((n,)), np.zeros(n, F32)
    for step in range(3):
        grad = (rng.standard_normal(n) * 10.0 ** (step - 1)).astype(F32)
        mean = reference_encode(grad, want_residual)[0][0]
        payload = codec.encode(nd(grad), residual).asnumpy()
        assert payload.shape == (codec.payload_size(n),) == (1 + (n + 31) // 32,)
        assert abs(payload[0] - mean) <= np.spacing(mean)  # the mean |a|, to a float32 rounding
        want_payload, want_residual, sent = reference_encode(grad, want_residual, payload[0])
        np.testing.assert_array_equal(payload.view(np.uint32), want_payload.view(np.uint32))
        np.testing.assert_array_equal(residual.asnumpy(), want_residual)
        np.testing.assert_array_equal(codec.decode(nd(payload), mx.nd.full(n, 7.0)).asnumpy(), sent)
        np.testing.assert_array_equal(codec.decode_add(nd(payload), mx.nd.ones(n)).asnumpy(), F32(1) + sent)
        # the numpy calls (a server's) give the same
        words = np.zeros(codec.payload_size(n), F32)
        codec.encode_numpy(grad, np.zeros(n, F32), words)
        assert words[1:].view(np.uint32).tolist() == reference_encode(grad, np.zeros(n, F32))[0][1:].view(np.uint32).tolist()
        np.testing.assert_array_equal(codec.decode_numpy(payload, np.full(n, 2.0, F32), add=True), F32(2) + sent)


def test_non_finite_gradient_values_are_dropped_and_zeros_send_plus_zero():
    codec = mxnet_gc.codecs.create(CODEC)
    grad = np.array([1.0, np.nan, -np.inf, -2.5, 0.0, 3e38], F32)
    residual = nd(np.array([0.25, 0.25, -0.5, 0.0, 0.0, 3e38], F32))  # (the last sum overflows: dropped too)
    a = np.array([1.25, 0.25, -0.5, -2.5, 0.0, 3e38], F32)
    payload = codec.encode(nd(grad), residual).asnumpy()
    assert payload[0] == F32(np.sum(np.abs(a), dtype=np.float64) / 6)
    want_payload, want_residual, _ = reference_encode(grad, np.array([0.25, 0.25, -0.5, 0.0, 0.0, 3e38], F32), payload[0])
    np.testing.assert_array_equal(payload.view(np.uint32), want_payload.view(np.uint32))
    np.testing.assert_array_equal(residual.asnumpy(), want_residual)
    zeros = mx.nd.zeros(5)
    payload = codec.encode(mx.nd.zeros(5), zeros)
    assert not payload.asnumpy().any() and not zeros.asnumpy().any()  # scale 0: +0 sent, nothing left


@pytest.mark.parametrize("scale, message", [
    (np.nan, "the scale nan is not a finite number >= 0"),
    (-1.0, "the scale -1 is not a finite number >= 0"),
    (np.inf, "is not a finite number"),
])
def test_corrupt_scales_are_refused(scale, message):
    codec = mxnet_gc.codecs.create(CODEC)
    assert_payload_refused(codec, np.array([scale, np.uint32(5).view(F32)], F32), message)


def test_nonzero_padding_is_refused():
    codec = mxnet_gc.codecs.create(CODEC)
    payload = np.array([0.5, np.uint32(0b1000).view(F32)], F32)  # bit 3: past the 3 values
    with pytest.raises(ValueError, match="the padding bits after value 3 are not 0"):
        codec.decode_numpy(payload, np.zeros(3, F32))
    np.testing.assert_array_equal(codec.decode_numpy(payload, np.zeros(4, F32)), [0.5, 0.5, 0.5, -0.5])


def test_bad_parameters_and_arrays():
    with pytest.raises(ValueError, match="sign: unknown parameter.*'scale'.*its scale is each array's mean"):
        mxnet_gc.codecs.create({"type": "sign", "scale": 3})
    codec = mxnet_gc.codecs.create(CODEC)
    with pytest.raises(ValueError, match=r"state for 4 values must have shape \(4,\)"):
        codec.encode(mx.nd.ones(4), mx.nd.zeros(5))
    with pytest.raises(mx.base.MXNetError, match="sign: takes no parameters, got 1"):
        mx.nd.mxgc_sign_encode(mx.nd.ones(4), mx.nd.zeros(4), params="1").wait_to_read()
