"""The residual monitor (mxnet_gc/kvstore/residual_monitor.py): samples, and one warning for a residual that
keeps growing against the gradient."""
import warnings

import mxnet as mx
import pytest

from mxnet_gc.kvstore.residual_monitor import GROWTH_SAMPLES, SAMPLE_EVERY, ResidualMonitor


def feed(monitor, residual_of_push, pushes, key="w"):
    grad = mx.nd.ones(10)
    for push in range(1, pushes + 1):
        monitor.sample(key, grad, [mx.nd.ones(10) * residual_of_push(push)])


def test_a_growing_residual_is_reported_once_with_what_to_change():
    monitor = ResidualMonitor()
    monitor.names["w"] = "fc1_weight"
    monitor.describe = lambda key: "; its codec: 4bit 'medium'"
    with pytest.warns(RuntimeWarning) as record:
        feed(monitor, lambda push: 0.1 * push, SAMPLE_EVERY * (GROWTH_SAMPLES + 4))
    assert len(record) == 1
    message = str(record[0].message)
    for part in ("fc1_weight", "grown at every sample", "4bit 'medium'", "'thresholds': 'auto'", "momentum"):
        assert part in message
    history = monitor.history["w"]
    assert [push for push, _, _ in history[:2]] == [SAMPLE_EVERY, 2 * SAMPLE_EVERY]
    push, grad_norm, residual_norm = history[0]
    assert grad_norm == pytest.approx(10 ** 0.5) and residual_norm == pytest.approx(0.1 * push * 10 ** 0.5, rel=1e-5)


@pytest.mark.parametrize("residual_of_push", [lambda push: 0.3, lambda push: 0.1 * (push % 30)],
                         ids=["bounded", "rising-then-falling"])
def test_a_bounded_residual_is_not_reported(residual_of_push):
    monitor = ResidualMonitor()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        feed(monitor, residual_of_push, SAMPLE_EVERY * 20)
    assert len(monitor.history["w"]) == 19  # (the last sample is read at the next one)
