"""The 'layerwise_topk' codec against the numpy reference (tests/topk_reference.py): payloads bit for
bit and states over many steps, edge cases, threshold adaptation, decoding, and every error."""
import numpy as np
import mxnet as mx
import pytest

import mxnet_gc
from mxnet_gc import codecs
import topk_reference as ref


def state_of(codec, state, n):
    """The kernel's flat state as the reference's dict."""
    s = state.asnumpy()
    m = codec.momentum > 0
    return {"residual": s[:n], "velocity": s[n:2 * n] if m else np.zeros(n, np.float32),
            "threshold": s[-2], "steps": int(s[-1:].view(np.int32)[0])}


def run_both(codec, grads, threads=None):
    """Encodes the gradient stream with the kernels and the reference; asserts equality at every step."""
    n = grads[0].size
    params = {k: v for k, v in codec.config().items() if k not in ("type", "sum_of")}
    state = codec.new_residual((n,))
    expected = ref.new_state(n)
    if threads:
        mxnet_gc.set_num_threads(threads)
    try:
        counts = []
        for g in grads:
            got = codec.encode(mx.nd.array(g), state).asnumpy()
            indices, values, passed = ref.step(g, expected, **params)
            counts.append(passed)
            want = ref.payload(indices, values, codec.capacity(n))
            np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
            mine = state_of(codec, state, n)
            np.testing.assert_array_equal(mine["residual"], expected["residual"])
            np.testing.assert_array_equal(mine["velocity"], expected["velocity"])
            assert mine["threshold"] == expected["threshold"] and mine["steps"] == expected["steps"]
        return counts
    finally:
        mxnet_gc.set_num_threads(0)


@pytest.mark.parametrize("n", [1, 7, 100, 4097, 70001])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_matches_reference_over_steps(n, momentum):
    rng = np.random.default_rng(n)
    grads = [rng.standard_normal(n).astype(np.float32) * (1 + i % 3) for i in range(12)]
    codec = codecs.create({"type": "layerwise_topk", "density": 0.05, "reset_every": 5, "momentum": momentum})
    run_both(codec, grads)


@pytest.mark.parametrize("threads", [1, 2])
def test_parallel_path_matches_reference(threads):
    rng = np.random.default_rng(7)
    grads = [rng.standard_normal(300001).astype(np.float32) for _ in range(4)]
    run_both(codecs.create({"type": "layerwise_topk", "density": 0.001}), grads, threads=threads)


def test_zero_equal_and_nonfinite_gradients():
    codec = codecs.create({"type": "layerwise_topk", "density": 0.1, "tolerance": 0.0})
    n = 50
    grads = [np.zeros(n, np.float32),                      # nothing to send; threshold 0, recomputed next step
             np.full(n, 0.25, np.float32),                 # all equal: 5 of 50 pass the cap, lowest indices
             np.where(np.arange(n) % 7 == 0, np.nan, 1.0).astype(np.float32),  # NaN dropped, residual kept
             np.full(n, np.inf, np.float32),
             -np.ones(n, np.float32)]
    run_both(codec, grads)
    state = codec.new_residual((n,))
    codec.encode(mx.nd.zeros(n), state)
    p = codec.encode(mx.nd.array(np.full(n, 0.25, np.float32)), state).asnumpy()
    assert p[:1].view(np.int32)[0] == 5 and list(p[1:6].view(np.int32)) == [0, 1, 2, 3, 4]


def test_sent_plus_residual_equals_the_sum_of_gradients():
    """Error feedback without momentum: nothing is lost, only delayed."""
    rng = np.random.default_rng(3)
    codec = codecs.create({"type": "layerwise_topk", "density": 0.02})
    n = 5000
    state, sent, total = codec.new_residual((n,)), mx.nd.zeros(n), np.zeros(n, np.float64)
    for _ in range(20):
        g = rng.standard_normal(n).astype(np.float32)
        total += g
        codec.decode_add(codec.encode(mx.nd.array(g), state), sent)
    np.testing.assert_allclose(sent.asnumpy() + state.asnumpy()[:n], total, atol=2e-4)


def test_threshold_adapts_to_the_target_density():
    """A stream whose scale drifts 10x: after an exact start, the adaptive threshold keeps the selected
    count within the tolerance band of k = 1000 on average (within 25% on every step after 30)."""
    rng = np.random.default_rng(11)
    n, density, tolerance = 100000, 0.01, 0.2
    codec = codecs.create({"type": "layerwise_topk", "density": density, "tolerance": tolerance,
                           "adapt_rate": 0.05, "reset_every": 10 ** 6})
    grads = [rng.standard_normal(n).astype(np.float32) * np.float32(10 ** (i / 100)) for i in range(200)]
    run_both(codec, grads[:3])  # the same stream through the reference first
    state = codec.new_residual((n,))
    counts = []
    for g in grads:
        p = codec.encode(mx.nd.array(g), state).asnumpy()
        counts.append(int(p[:1].view(np.int32)[0]))
    k = codec.target(n)
    late = np.array(counts[30:])
    assert abs(late.mean() - k) <= tolerance * k, late.mean()
    assert np.all(np.abs(late - k) <= 0.25 * k + 1), (late.min(), late.max())
    assert max(counts) <= codec.capacity(n)


def test_decode_and_decode_add_scatter():
    codec = codecs.create({"type": "layerwise_topk", "density": 0.25})
    n = 16
    idx, vals = np.array([1, 4, 9, 15]), np.array([1.5, -2.0, 0.25, 8.0], np.float32)
    payload = mx.nd.array(ref.payload(idx, vals, codec.capacity(n)))
    out = mx.nd.ones((4, 4)) * 7
    codec.decode(payload, out)
    want = np.zeros(n, np.float32)
    want[idx] = vals
    np.testing.assert_array_equal(out.asnumpy().ravel(), want)
    acc = mx.nd.ones(n)
    codec.decode_add(payload, acc)
    np.testing.assert_array_equal(acc.asnumpy(), want + 1)
    acc_np = np.ones(n, np.float32)
    codec.decode_numpy(payload.asnumpy(), acc_np, add=True)
    np.testing.assert_array_equal(acc_np, want + 1)


@pytest.mark.parametrize("corrupt, message", [
    (lambda w: w.__setitem__(0, 99), "count 99 is outside"),
    (lambda w: w.__setitem__(0, -1), "count -1 is outside"),
    (lambda w: w.__setitem__(2, 16), "index 16 at position 1"),
    (lambda w: w.__setitem__(2, 1), "not ascending"),
])
def test_corrupt_payload_is_refused(corrupt, message):
    codec = codecs.create({"type": "layerwise_topk", "density": 0.25})
    words = ref.payload(np.array([1, 4, 9]), np.ones(3, np.float32), codec.capacity(16)).view(np.int32).copy()
    corrupt(words)
    out = np.full(16, 5, np.float32)
    with pytest.raises(ValueError, match=message):
        codec.decode_numpy(words.view(np.float32), out, add=True)
    assert np.all(out == 5)
    with pytest.raises(mx.base.MXNetError, match=message):
        codec.decode(mx.nd.array(words.view(np.float32)), mx.nd.zeros(16)).wait_to_read()


@pytest.mark.parametrize("params, message", [
    ({"density": 0}, "'density' must be in \\(0, 1\\]"),
    ({"density": 1.5}, "'density' must be in"),
    ({"density": float("nan")}, "'density' must be a finite number"),
    ({"adapt_rate": 0}, "'adapt_rate' must be in \\(0, 1\\)"),
    ({"adapt_rate": -0.1}, "'adapt_rate'"),
    ({"tolerance": 1}, "'tolerance' must be in \\[0, 1\\)"),
    ({"momentum": 1.0}, "'momentum'"),
    ({"reset_every": 0}, "'reset_every' must be an int >= 1"),
    ({"density": "0.1"}, "'density' must be a finite number"),
    ({"sparsity": 0.1}, "unknown parameter.*'sparsity'"),
])
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        codecs.create(dict({"type": "layerwise_topk"}, **params))


def test_bad_arrays():
    codec = codecs.create({"type": "layerwise_topk"})
    g = mx.nd.ones(10)
    with pytest.raises(ValueError, match="state for 10 values must have shape \\(12,\\)"):
        codec.encode(g, mx.nd.zeros(10))
    with pytest.raises(TypeError, match="float32"):
        codec.encode(g.astype("float16"), codec.new_residual((10,)))
    with pytest.raises(ValueError, match="payload for 10 values must have shape \\(5,\\)"):
        codec.decode(mx.nd.zeros(4), mx.nd.zeros(10))


def test_operator_refuses_a_capacity_below_its_target():
    """Called directly, the encode operator checks what the codec guarantees: room for k values."""
    g, state = mx.nd.ones(100), mx.nd.zeros(102)
    with pytest.raises(mx.base.MXNetError, match="capacity 3 is below the 50 values density 0.5 aims to send"):
        mx.nd.mxgc_topk_encode(g, state, params="0.5,0,0.1,0.2,3,3").wait_to_read()


def test_pull_codec_packs_a_sum_without_loss():
    codec = codecs.create({"type": "layerwise_topk", "density": 0.1})
    pull = codec.pull_codec(3)
    n = 100
    assert pull.sum_of == 3 and pull.capacity(n) == 3 * codec.capacity(n)
    total = np.zeros(n, np.float32)
    total[[3, 50, 99]] = [1.5, -2.0, 4.0]
    payload = np.zeros(pull.payload_size(n), np.float32)
    pull.encode_numpy(total, np.zeros(n, np.float32), payload)
    np.testing.assert_array_equal(payload, ref.payload(np.array([3, 50, 99]), total[[3, 50, 99]], pull.capacity(n)))
    out = mx.nd.zeros(n)
    pull.decode(mx.nd.array(payload), out)
    np.testing.assert_array_equal(out.asnumpy(), total)
    with pytest.raises(ValueError, match="100 nonzero values do not fit a payload of capacity 36"):
        pull.encode_numpy(np.ones(n, np.float32), np.zeros(n, np.float32), payload)
