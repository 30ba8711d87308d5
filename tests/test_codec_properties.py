"""Property tests (hypothesis) of the threshold codecs on arbitrary float32 inputs and groups."""
import numpy as np
import mxnet as mx
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import mxnet_gc
from conftest import nd

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
magnitudes = st.floats(min_value=float(np.float32(1e-30)), max_value=float(np.float32(1e30)), width=32)


@st.composite
def codecs(draw):
    """A '2bit' codec, a '4bit' codec with 1 to 7 distinct levels or a '5bit' one with 1 to 15, rounding by
    floor or to nearest."""
    kind = draw(st.sampled_from(["2bit", "4bit", "5bit"]))
    levels = sorted(set(draw(st.lists(magnitudes, min_size=1, max_size=15 if kind == "5bit" else 7))))
    rounding = draw(st.sampled_from(["floor", "nearest"]))
    if kind == "2bit":
        return mxnet_gc.codecs.create({"type": "2bit", "threshold": levels[0], "rounding": rounding})
    return mxnet_gc.codecs.create({"type": kind, "thresholds": levels, "rounding": rounding})


@st.composite
def steps(draw):
    n = draw(st.integers(1, 300))
    grad = draw(hnp.arrays(np.float32, n, elements=finite32))
    residual = draw(hnp.arrays(np.float32, n, elements=finite32))
    return grad, residual


@settings(max_examples=200, deadline=None)
@given(codecs(), steps())
def test_error_feedback_identity(codec, step):
    """sent + new residual == old residual + gradient, up to one float32 rounding of each sum."""
    grad, residual = step
    with np.errstate(over="ignore"):
        a = residual + grad  # float32, as the kernel computes it
    res = nd(residual)
    sent = mx.nd.zeros(len(grad))
    codec.decode(codec.encode(nd(grad), res), sent)
    sent, new_res = sent.asnumpy().astype(np.float64), res.asnumpy().astype(np.float64)
    finite = np.isfinite(a)
    np.testing.assert_array_equal(new_res[~finite], residual[~finite])  # dropped, residual kept
    np.testing.assert_array_equal(sent[~finite], 0)
    a = a[finite].astype(np.float64)
    err = np.abs(sent[finite] + new_res[finite] - a)
    assert np.all(err <= np.spacing(np.abs(a).astype(np.float32)).astype(np.float64))
    # and what is sent is one of the levels (or 0): with floor never more than the value itself, to
    # nearest the level closest to it (up to the float32 rounding of the midpoints)
    levels = np.array((0.0,) + codec.group.levels)
    assert np.all(np.isin(np.abs(sent[finite]), levels))
    if codec.rounding == "floor":
        assert np.all(np.abs(sent[finite]) <= np.abs(a))
    else:
        closest = np.abs(np.abs(a)[:, None] - levels[None, :]).min(axis=1)
        slack = np.spacing(np.float32(levels[-1])).astype(np.float64)
        assert np.all(np.abs(np.abs(a) - np.abs(sent[finite])) <= closest + slack)


@settings(max_examples=100, deadline=None)
@given(codecs(), steps(), st.integers(0, 2**31 - 1))
def test_decode_add_equals_decode_plus_add(codec, step, seed):
    grad, residual = step
    acc0 = np.random.default_rng(seed).standard_normal(len(grad)).astype(np.float32)
    payload = codec.encode(nd(grad), nd(residual))
    decoded = mx.nd.zeros(len(grad))
    codec.decode(payload, decoded)
    acc = nd(acc0)
    codec.decode_add(payload, acc)
    np.testing.assert_array_equal(acc.asnumpy(), acc0 + decoded.asnumpy())
