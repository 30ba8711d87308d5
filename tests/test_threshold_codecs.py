"""Exact encodings of '2bit', '4bit' and '5bit' against the bit-string reference (tests/reference.py)."""
import numpy as np
import pytest
import mxnet as mx

import mxnet_gc
from conftest import nd, payload_bytes
import reference

GROUP = [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064]
LADDER15 = [0.0005 * 1.4 ** k for k in range(15)]  # (5bit's 15 levels)
CODECS = {  # name: (bits, params, levels, rounding); 2bit floors by default (MXNet's), 4bit rounds to nearest
    "2bit": (2, {"type": "2bit", "threshold": 0.5}, [0.5], "floor"),
    "2bit-nearest": (2, {"type": "2bit", "threshold": 0.5, "rounding": "nearest"}, [0.5], "nearest"),
    "4bit": (4, {"type": "4bit", "thresholds": GROUP}, GROUP, "nearest"),
    "4bit-floor": (4, {"type": "4bit", "thresholds": GROUP, "rounding": "floor"}, GROUP, "floor"),
    "4bit-3levels": (4, {"type": "4bit", "thresholds": [0.25, 0.5, 1.0]}, [0.25, 0.5, 1.0], "nearest"),
    "4bit-uneven": (4, {"type": "4bit", "thresholds": [0.1, 0.3, 0.7, 1.1]}, [0.1, 0.3, 0.7, 1.1], "nearest"),
    "5bit": (5, {"type": "5bit", "thresholds": LADDER15}, LADDER15, "nearest"),
    "5bit-floor": (5, {"type": "5bit", "thresholds": LADDER15, "rounding": "floor"}, LADDER15, "floor"),
    "5bit-5levels": (5, {"type": "5bit", "thresholds": [0.1, 0.3, 0.7, 1.1, 2.0]}, [0.1, 0.3, 0.7, 1.1, 2.0],
                     "nearest"),
}


def check_step(name, grad, residual, want=None):
    """Encodes one step with the codec and with the reference (or takes ``want``, the reference's
    (payload bytes, residual, values) of these arrays); compares payload, residual, decode."""
    bits, params, levels, rounding = CODECS[name]
    codec = mxnet_gc.codecs.create(params)
    want_bytes, want_res, want_values = want or reference.encode(bits, grad, residual, levels, rounding)
    res = nd(residual)
    payload = codec.encode(nd(grad), res)
    assert payload.dtype == np.float32 and payload.shape == (codec.payload_size(len(grad)),)
    np.testing.assert_array_equal(payload_bytes(payload), want_bytes)
    np.testing.assert_array_equal(res.asnumpy(), want_res)
    out = mx.nd.full(len(grad), 7.0)
    codec.decode(payload, out)
    np.testing.assert_array_equal(out.asnumpy(), want_values)
    if want is None:
        np.testing.assert_array_equal(reference.decode(bits, want_bytes, len(grad), levels), want_values)
    return res.asnumpy()


@pytest.mark.parametrize("name", CODECS)
@pytest.mark.parametrize("n", [1, 7, 8, 9, 15, 16, 17, 33, 40, 41])
def test_random_sizes(name, n):
    rng = np.random.default_rng(n)
    scale = CODECS[name][2][-1]
    grad = (rng.standard_normal(n) * scale).astype(np.float32)
    residual = (rng.standard_normal(n) * scale / 4).astype(np.float32)
    check_step(name, grad, residual)


LARGE = {}  # codec name -> (grad, residual, the reference's step): the value-by-value reference, once


@pytest.mark.parametrize("name", CODECS)
def test_large_array_every_block(name, threads):
    """Several kernel blocks, on the multi-threaded path (n above the parallel minimum)."""
    if name not in LARGE:
        n = 70_001
        rng = np.random.default_rng(7)
        scale = CODECS[name][2][-1]
        grad = (rng.standard_normal(n) * scale).astype(np.float32)
        residual = (rng.standard_normal(n) * scale / 3).astype(np.float32)
        bits, _, levels, rounding = CODECS[name]
        want = reference.encode(bits, grad, residual, levels, rounding)
        np.testing.assert_array_equal(reference.decode(bits, want[0], n, levels), want[2])
        LARGE[name] = grad, residual, want
    grad, residual, want = LARGE[name]
    check_step(name, grad, residual, want)


def special_values(levels, rounding):
    """Values at each level and decision bound, just below them, negated, zero, -0, huge, tiny and
    subnormal."""
    vals = [0.0, -0.0, 3.0e38, -3.0e38, 1e-45, -1e-45, 1e-40, np.finfo(np.float32).tiny]
    for t in list(levels) + list(reference.bounds_of(levels, rounding)):
        t = np.float32(t)
        below = np.nextafter(t, np.float32(0))
        vals += [t, -t, below, -below, np.nextafter(t, np.float32(np.inf))]
    return np.array(vals, np.float32)


@pytest.mark.parametrize("name", CODECS)
def test_special_values(name):
    grad = special_values(CODECS[name][2], CODECS[name][3])
    check_step(name, grad, np.zeros_like(grad))


def test_special_values_bits_2bit():
    """The exact bit string for a hand-checked input (MXNet's layout: first value in the top bits)."""
    codec = mxnet_gc.codecs.create({"type": "2bit", "threshold": 0.5})
    res = mx.nd.zeros(5)
    payload = codec.encode(nd([0.5, -0.5, 0.49, -0.6, 2.0]), res)
    # 11 10 00 10 | 11 000000 ... -> 0b11100010, 0b11000000, 0, 0
    assert list(payload_bytes(payload)) == [0b11100010, 0b11000000, 0, 0]
    np.testing.assert_array_equal(res.asnumpy(), np.float32([0, 0, 0.49, np.float32(-0.6) + np.float32(0.5), 1.5]))


def test_special_values_bits_4bit():
    codec = mxnet_gc.codecs.create({"type": "4bit", "thresholds": [1, 2, 4], "rounding": "floor"})
    res = mx.nd.zeros(5)
    payload = codec.encode(nd([1.0, -2.5, 0.9, 100.0, -4.0]), res)
    # codes 0001 1010 | 0000 0011 | 1011 0000 -> 0x1a, 0x03, 0xb0, pad
    assert list(payload_bytes(payload)) == [0x1A, 0x03, 0xB0, 0]
    np.testing.assert_array_equal(res.asnumpy(), np.float32([0, -0.5, 0.9, 96.0, 0]))


def test_special_values_bits_4bit_nearest():
    """The default rounding: bounds 0.5, 1.5, 3 between the levels 1, 2, 4."""
    codec = mxnet_gc.codecs.create({"type": "4bit", "thresholds": [1, 2, 4]})
    res = mx.nd.zeros(6)
    payload = codec.encode(nd([1.0, -2.5, 0.4, 100.0, -2.9, 0.5]), res)
    # codes 0001 1010 | 0000 0011 | 1010 0001 -> 0x1a, 0x03, 0xa1, pad
    assert list(payload_bytes(payload)) == [0x1A, 0x03, 0xA1, 0]
    np.testing.assert_array_equal(res.asnumpy(), np.float32([0, -0.5, 0.4, 96.0, np.float32(-2.9) + 2, -0.5]))


@pytest.mark.parametrize("name", CODECS)
def test_residual_carry_over(name):
    """MXNet's nightly scenario: the same gradient pushed several steps, residual carried each time."""
    levels = CODECS[name][2]
    n = 37
    rng = np.random.default_rng(3)
    magnitude = rng.uniform(0.2, 0.6, n) * levels[0]  # below the first level alone, above it in 6 steps
    grad = (magnitude * rng.choice([-1, 1], n)).astype(np.float32)
    residual = np.zeros(n, np.float32)
    sent = np.zeros(n, np.float64)
    for step in range(6):
        new_residual = check_step(name, grad, residual)
        sent += residual.astype(np.float64) + grad - new_residual
        residual = new_residual
    # After 6 steps every value has crossed the first level at least once; nothing is lost.
    np.testing.assert_allclose(sent + residual, 6 * grad.astype(np.float64), rtol=1e-5, atol=1e-7)
    assert np.all(np.abs(sent) > 0)


@pytest.mark.parametrize("name", CODECS)
def test_nonfinite_values_are_dropped(name):
    """NaN and +-inf gradients are sent as 0 and leave the residual as it was; the rest is encoded."""
    grad = np.array([np.nan, 0.7, np.inf, -np.inf, -0.7, 3.0e38], np.float32)
    residual = np.array([0.1, 0.1, -0.2, 0.3, 0.0, 3.0e38], np.float32)  # last: overflows to inf
    res = check_step(name, grad, residual)
    assert np.all(np.isfinite(res))
    np.testing.assert_array_equal(res[[0, 2, 3, 5]], residual[[0, 2, 3, 5]])


@pytest.mark.parametrize("name", CODECS)
def test_decode_add_accumulates_in_place(name):
    bits, params, levels, rounding = CODECS[name]
    codec = mxnet_gc.codecs.create(params)
    rng = np.random.default_rng(11)
    n = 50
    acc0 = rng.standard_normal(n).astype(np.float32)
    acc = nd(acc0)
    total = acc0.copy()
    for _ in range(3):  # a receiver summing three workers' payloads
        grad = (rng.standard_normal(n) * levels[-1]).astype(np.float32)
        payload = codec.encode(nd(grad), mx.nd.zeros(n))
        result = codec.decode_add(payload, acc)
        assert result is acc
        total = total + reference.encode(bits, grad, np.zeros(n), levels, rounding)[2]
    np.testing.assert_array_equal(acc.asnumpy(), total)


def test_encode_into_preallocated_payload():
    codec = mxnet_gc.codecs.create({"type": "4bit", "thresholds": GROUP})
    grad = nd(np.linspace(-0.1, 0.1, 21))
    out = mx.nd.full(codec.payload_size(21), 123.0)
    payload = codec.encode(grad, mx.nd.zeros(21), out=out)
    assert payload is out
    np.testing.assert_array_equal(payload_bytes(out),
                                  reference.encode(4, grad.asnumpy(), np.zeros(21), GROUP, "nearest")[0])


def test_multidimensional_shapes():
    codec = mxnet_gc.codecs.create({"type": "4bit", "thresholds": GROUP})
    grad = np.random.default_rng(5).standard_normal((3, 5, 7)).astype(np.float32) * 0.05
    res = mx.nd.zeros((3, 5, 7))
    payload = codec.encode(nd(grad), res)
    out = mx.nd.zeros((3, 5, 7))
    codec.decode(payload, out)
    want_bytes, want_res, want_values = reference.encode(4, grad, np.zeros(grad.size), GROUP, "nearest")
    np.testing.assert_array_equal(payload_bytes(payload), want_bytes)
    np.testing.assert_array_equal(out.asnumpy().ravel(), want_values)
    np.testing.assert_array_equal(res.asnumpy().ravel(), want_res)


def test_runs_asynchronously_on_the_engine():
    """Encode and decode chain through the engine's dependencies with no wait in between."""
    codec = mxnet_gc.codecs.create({"type": "2bit", "threshold": 0.5})
    grad = mx.nd.ones(1000) * 0.3
    res = mx.nd.zeros(1000)
    out = mx.nd.zeros(1000)
    for _ in range(4):  # 0.3, 0.6 -> send 0.5, 0.4, 0.7 -> send 0.5
        codec.decode_add(codec.encode(grad, res), out)
    mx.nd.waitall()
    np.testing.assert_allclose(out.asnumpy(), 1.0)
    np.testing.assert_allclose(res.asnumpy(), 0.2, rtol=1e-6)


@pytest.mark.parametrize("params, levels", [({"type": "4bit", "thresholds": [0.25, 0.5, 3.0]}, [0.75, 1.5, 9.0]),
                                            ({"type": "2bit", "threshold": 0.5}, [1.5])])
def test_pull_codec_levels_are_the_push_levels_times_the_workers(params, levels):
    """A compressed pull re-encodes the sum of 3 workers' pushes: a sum of top-level values goes whole."""
    codec = mxnet_gc.codecs.create(params)
    pull = codec.pull_codec(3)
    assert list(pull.group.levels) == levels and pull.payload_size(100) == codec.payload_size(100)
    assert mxnet_gc.codecs.create(pull.config()).group == pull.group
    top = codec.group.levels[-1]
    total = np.full(16, 3 * top, np.float32)
    values = pull.decode_numpy(pull.encode_numpy(total, np.zeros(16, np.float32),
                                                 np.zeros(pull.payload_size(16), np.float32)), np.zeros(16, np.float32))
    np.testing.assert_array_equal(values, total)
