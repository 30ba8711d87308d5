"""Per-layer threshold group selection (mxnet_gc/groups.py), on gradients of known scales."""
import numpy as np
import pytest
import mxnet as mx

from mxnet_gc.groups import GroupSelector, format_table

GROUPS = {"fine": [0.001 * 2 ** k for k in range(7)], "mid": [0.01 * 2 ** k for k in range(7)],
          "coarse": [0.1 * 2 ** k for k in range(7)]}


def calibrate(selector, scales, steps=20, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        selector.observe([mx.nd.array(rng.standard_normal(500).astype(np.float32) * s) for s in scales])
    return selector.local_statistics()


def test_each_scale_gets_the_group_that_fits_it():
    selector = GroupSelector(GROUPS, calibration_steps=20)
    stats = calibrate(selector, [0.01, 0.1, 1.0])
    assert selector.steps == selector.calibration_steps == 20 and stats.shape == (3, 4)
    chosen, table = selector.choose(["a", "b", "c"], [500] * 3, stats)
    assert [row["rule"] for row in table] == ["fine", "mid", "coarse"]
    assert chosen[1].levels[0] == pytest.approx(0.01)
    np.testing.assert_allclose([row["grad_rms"] for row in table], [0.01, 0.1, 1.0], rtol=0.1)
    for row in table:  # the chosen group has the smallest measured error
        assert row["errors"][row["rule"]] == min(row["errors"].values())
    assert "grad RMS" in format_table(table) and "coarse" in format_table(table)


def test_overrides_by_name_pattern():
    selector = GroupSelector(GROUPS, calibration_steps=2, overrides={"*bias": "coarse", "fc*": [0.5, 1.0]})
    stats = calibrate(selector, [0.01, 0.01, 0.01], steps=2)
    chosen, table = selector.choose(["conv_bias", "fc_weight", "conv_weight"], [500] * 3, stats)
    assert [row["rule"] for row in table] == ["override *bias", "override fc*", "fine"]
    assert chosen[1].levels == (0.5, 1.0)


@pytest.mark.parametrize("kwargs,message", [
    ({"calibration_steps": 0}, "calibration_steps must be an int >= 1"),
    ({"overrides": {"*": "huge"}}, "names group 'huge'"),
    ({"overrides": {"*": [2, 1]}}, "strictly increasing"),
    ({"groups": {"a": [0]}}, "must be positive"),
])
def test_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GroupSelector(**kwargs)
