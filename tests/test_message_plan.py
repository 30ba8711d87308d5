"""Message plans (mxnet_gc/kvstore/message_plan.py): one C++ call encodes, decodes or copies every
segment of a message, bit for bit as the codecs' own operators do segment by segment."""
import subprocess
import sys
import textwrap

import mxnet as mx
import numpy as np
import pytest

from mxnet_gc import codecs
from mxnet_gc.message_plan import MessagePlan
from dist.job import every_codec

# every codec, and top-k with DGC's momentum (its state then holds velocities too)
CODECS = dict(every_codec(), topk={"type": "layerwise_topk", "density": 0.1, "momentum": 0.9})
SIZES = [1, 17, 300, 4096]


def layout(codec, sizes, key_offsets=None):
    """Segments of ``sizes`` values, end to end in the message's values and payload."""
    segments, value, word = [], 0, 0
    for i, n in enumerate(sizes):
        segments.append((codec, n, value, (key_offsets or [0] * len(sizes))[i], word))
        value += n
        word += n if codec is None else codec.payload_size(n)
    return segments, word


def bits(array):
    return array.asnumpy().view(np.uint32)


@pytest.mark.parametrize("name", sorted(CODECS))
def test_engine_encode_and_decode_equal_the_codec_operators(name):
    codec = codecs.create(CODECS[name])
    segments, words = layout(codec, SIZES)
    plan = MessagePlan(segments)
    rng = np.random.default_rng(1)
    mine = [codec.new_residual((n,)) for n in SIZES]
    theirs = [codec.new_residual((n,)) for n in SIZES]
    payload = mx.nd.zeros(words)
    for _ in range(3):  # the states carry over between steps
        grads = [mx.nd.array(rng.standard_normal(n).astype(np.float32) * 0.1) for n in SIZES]
        plan.push_encode(grads, mine, payload)
        expected = [codec.encode(g, r) for g, r in zip(grads, theirs)]
        np.testing.assert_array_equal(bits(payload), np.concatenate([bits(p) for p in expected]))
        for a, b in zip(mine, theirs):
            np.testing.assert_array_equal(bits(a), bits(b))
    # decode: every segment but the second, from two payloads summed in order
    twice = mx.nd.concat(payload, payload, dim=0)
    outputs = [mx.nd.zeros(n) for n in SIZES]
    token = mx.nd.zeros(1)
    plan.push_decode(twice, [o if i != 1 else None for i, o in enumerate(outputs)], token, count=2, stride=words)
    token.wait_to_read()
    plan.raise_engine_error()
    for i, (p, o) in enumerate(zip(expected, outputs)):
        want = codec.decode(p, mx.nd.zeros(o.shape))
        want = codec.decode_add(p, want) if i != 1 else mx.nd.zeros(o.shape)
        np.testing.assert_array_equal(bits(o), bits(want))


@pytest.mark.parametrize("name", sorted(CODECS) + ["dense", "dense, dropping"])
def test_encode_counts_the_nonfinite_values_in_its_own_pass(name):
    """Each segment's count of NaN and inf gradient values, written by the encode itself, is numpy's count:
    in vector lanes and tails, in arrays that run on several threads, on steps that select differently
    (top-k's first step is exact, its second uses the threshold)."""
    sizes = [1, 13, 4096 + 5, 200003]
    codec = None if name.startswith("dense") else codecs.create(CODECS.get(name, {"type": name}))
    segments, words = layout(codec, sizes)
    plan = MessagePlan(segments, drop_nonfinite=name == "dense, dropping")
    states = [None if codec is None else codec.new_residual((n,)) for n in sizes]
    rng = np.random.default_rng(3)
    counts = mx.nd.zeros(len(sizes), dtype="float64")
    for step in range(2):
        grads = []
        for n in sizes:
            g = rng.standard_normal(n).astype(np.float32) * 0.1
            bad = rng.choice(n, size=(n // 997 + step) % (n + 1), replace=False)
            g[bad] = rng.choice(np.array([np.nan, np.inf, -np.inf], np.float32), bad.size)
            grads.append(g)
        plan.push_encode([mx.nd.array(g) for g in grads], states, mx.nd.zeros(words), counts=counts)
        assert counts.asnumpy().tolist() == [np.count_nonzero(~np.isfinite(g)) for g in grads]


def test_segments_of_split_keys_and_dense_copies():
    """A segment starts at its chunk's offset in its key's array (a key split over servers)."""
    plan = MessagePlan(layout(None, [5, 7], key_offsets=[3, 0])[0])
    keys = [mx.nd.arange(10), mx.nd.arange(7) + 100]
    send, counts = mx.nd.zeros(12), mx.nd.zeros(2, dtype="float64")
    keys[0][2], keys[0][4], keys[1][6] = np.nan, np.inf, -np.inf  # (the first chunk holds [3, 8) only)
    plan.push_encode(keys, [None, None], send, counts=counts)
    np.testing.assert_array_equal(send.asnumpy(), [3, np.inf, 5, 6, 7] + list(range(100, 106)) + [-np.inf])
    np.testing.assert_array_equal(counts.asnumpy(), [1, 1])
    outputs = [mx.nd.zeros(10), mx.nd.zeros(7)]
    plan.push_decode(send, outputs)
    np.testing.assert_array_equal(outputs[0].asnumpy(), [0, 0, 0, 3, np.inf, 5, 6, 7, 0, 0])


def test_server_calls_equal_the_codecs_numpy_calls():
    codec = codecs.create(CODECS["4bit"])
    segments, words = layout(codec, SIZES)
    plan = MessagePlan(segments)
    rng = np.random.default_rng(2)
    payload = rng.integers(0, 2 ** 32, words, dtype=np.uint32).view(np.float32)
    values = np.ones(sum(SIZES), np.float32)
    plan.decode_now(payload, values, add=True)
    expected = np.ones(sum(SIZES), np.float32)
    for _, n, v, _, w in segments:
        codec.decode_numpy(payload[w:w + codec.payload_size(n)], expected[v:v + n], add=True)
    np.testing.assert_array_equal(values, expected)
    residual, residual_ref = np.zeros_like(values), np.zeros_like(values)
    out, out_ref = np.zeros(words, np.float32), np.zeros(words, np.float32)
    plan.encode_sum_now(values, residual, out)
    for _, n, v, _, w in segments:
        codec.encode_numpy(values[v:v + n], residual_ref[v:v + n], out_ref[w:w + codec.payload_size(n)])
    np.testing.assert_array_equal(out.view(np.uint32), out_ref.view(np.uint32))
    np.testing.assert_array_equal(residual, residual_ref)


def test_corrupt_payloads_are_reported():
    codec = codecs.create(CODECS["topk"])
    plan = MessagePlan(layout(codec, [100])[0])
    payload = np.zeros(codec.payload_size(100), np.float32)
    payload[0] = 1e6  # a count beyond the capacity
    with pytest.raises(ValueError, match="corrupt payload: segment 0"):
        plan.decode_now(payload, np.zeros(100, np.float32), add=False)
    out, token = mx.nd.zeros(100), mx.nd.zeros(1)
    plan.push_decode(mx.nd.array(payload), [out], token)
    token.wait_to_read()
    with pytest.raises(ValueError, match="corrupt pulled payload: segment 0"):
        plan.raise_engine_error()
    plan.raise_engine_error()  # reported once


def test_a_bad_plan_is_refused():
    codec = codecs.create({"type": "layerwise_topk", "density": 0.5})
    with pytest.raises(ValueError, match="capacity below its target"):
        MessagePlan([(_Capacity(codec), 100, 0, 0, 0)])


class _Capacity:
    """A top-k codec whose capacity is too small for its density."""

    def __init__(self, codec):
        self.codec = codec

    kernel_name = "topk"

    def kernel_params(self, n):
        return self.codec.kernel_params(n)[:5] + [1]


def test_views_of_one_array_as_outputs_do_not_deadlock():
    """Outputs that are views of one array (one engine variable) are one dependency of the operation."""
    script = textwrap.dedent("""
        import mxnet as mx, numpy as np
        from mxnet_gc.message_plan import MessagePlan
        plan = MessagePlan([(None, 5, 0, 0, 0), (None, 17, 5, 0, 5)])
        big = mx.nd.zeros(30)
        plan.push_decode(mx.nd.arange(22), [big[0:5], big[5:22]], big[29:30])
        assert np.array_equal(big.asnumpy()[:22], np.arange(22))
        print("done")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr


def test_fresh_arrays_get_their_values():
    """Arrays made just before an operation (MXNet allocates them lazily, on its engine) receive what the
    operation writes: a plan finds the arrays' memory when it runs, not when it is pushed (MXNet can then
    still be allocating them on another thread, and the memory found first may not be theirs)."""
    plan = MessagePlan(layout(None, [1280, 7])[0])
    send = mx.nd.array(np.arange(1287, dtype=np.float32))
    for _ in range(10000):
        outputs = [mx.nd.zeros(1280), mx.nd.zeros(7)]
        plan.push_decode(send, outputs)
        np.testing.assert_array_equal(np.concatenate([o.asnumpy() for o in outputs]), send.asnumpy())
