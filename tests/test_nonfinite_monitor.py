"""The store's non-finite monitor (mxnet_gc/kvstore/nonfinite.py): a push's counts come as (keys, counts)
pairs, one per message (a key split over servers has a count per chunk; an NDArray its encode wrote)
and LGC's coded keys (numbers its accumulation counted); they are read, summed per key and reported at
the next push."""
import warnings

import mxnet as mx
import pytest

from mxnet_gc.kvstore.nonfinite import NonFiniteGradientError, NonFiniteMonitor


def push(monitor, counted, treatments):
    """One push as a store makes it: the last push's counts checked first, then this one's recorded."""
    monitor.check()
    monitor.record(counted, treatments)


def test_chunks_add_up_per_key_and_are_reported_one_push_later():
    monitor = NonFiniteMonitor()
    monitor.names["w"] = "dense0_weight"
    counted = [(["w", "b"], mx.nd.array([2, 0], dtype="float64")),  # a message: the first chunk of w, then b
               (["w"], mx.nd.array([3], dtype="float64"))]  # w's second chunk, on another server
    treatments = {"w": "dropped", "b": "dropped", "c": "dropped"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        push(monitor, counted, treatments)
        monitor.add([(["c"], [2])])  # an LGC coded key, counted by its accumulation after the encodes
        assert caught == [] and monitor.counts == {}  # (read at the next push)
        push(monitor, [(["w", "b"], mx.nd.zeros(2, dtype="float64"))], treatments)
    assert monitor.counts == {"w": 5, "c": 2}
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("mxnet_gc: push 1 had non-finite gradient values (NaN or inf): ")
    assert "dense0_weight: 5 (dropped" in message and "key 'c': 2 (dropped" in message and "'b'" not in message


def test_raise_and_ignore_policies():
    monitor = NonFiniteMonitor("raise")
    counted = [(["w"], mx.nd.array([1], dtype="float64"))]
    push(monitor, counted, {"w": "spread"})
    with pytest.raises(NonFiniteGradientError, match="key 'w': 1 \\(sent uncompressed"):
        monitor.check()
    monitor.set_policy("ignore")
    assert not monitor.counting
    push(monitor, counted, {"w": "spread"})
    monitor.check()
    assert monitor.counts == {"w": 1}  # (the raised push's count; nothing after it)
