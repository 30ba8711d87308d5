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


def test_a_shrinking_gradient_under_a_steady_residual_is_not_reported():
    """The ratio grows when the gradient shrinks; only a residual that itself grows is warned about."""
    monitor = ResidualMonitor()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for push in range(1, SAMPLE_EVERY * 20 + 1):
            monitor.sample("w", mx.nd.ones(10) / push, [mx.nd.ones(10)])
    ratios = [r / g for _, g, r in monitor.history["w"]]
    assert ratios[-1] > 10 * ratios[0] >= 10 * 4  # (what the old check warned about: it grew at every sample)


def test_fitted_levels_are_told_what_fits_them():
    """A key already on 'auto' levels is not told to use them: its levels were outgrown since the warm-up."""
    monitor = ResidualMonitor()
    monitor.fitted = lambda key: True
    with pytest.warns(RuntimeWarning) as record:
        feed(monitor, lambda push: 0.1 * push, SAMPLE_EVERY * (GROWTH_SAMPLES + 4))
    message = str(record[0].message)
    assert "Use 'auto' levels" not in message
    assert "Its levels were fitted to its gradients during the warm-up, which have since outgrown them: fit them " \
           "later (a longer 'warmup_steps'), give larger levels" in message
