"""4bit's 'thresholds': 'auto' ladders (mxnet_gc/level_fit.py)."""
import math

import mxnet as mx
import numpy as np
import pytest

from mxnet_gc.level_fit import HEADROOM, LevelFitter, ladder


@pytest.mark.parametrize("largest", [3.0, 1e-6, 250.0, 2.0 ** -3])
def test_the_top_level_is_the_power_of_two_at_or_above_headroom_times_the_largest(largest):
    levels = ladder(largest)
    assert len(levels) == 7 and all(b == 2 * a for a, b in zip(levels, levels[1:]))
    assert levels[-1] >= HEADROOM * largest > levels[-1] / 2
    assert math.log2(levels[-1]) == int(math.log2(levels[-1]))


def test_largest_values_skip_nonfinite_steps_and_survive_a_checkpoint():
    fitter = LevelFitter(2)
    fitter.observe([mx.nd.array([1.0, -3.0]), mx.nd.array([np.nan, 0.5])])
    fitter.observe({0: mx.nd.array([2.0]), 1: mx.nd.array([0.25])})
    np.testing.assert_array_equal(fitter.local_largest([0, 1, "never"]), [3.0, 0.25, 0.0])
    restored = LevelFitter(2)
    restored.load_state_dict(fitter.state_dict())
    np.testing.assert_array_equal(restored.local_largest([0, 1]), [3.0, 0.25])
    assert ladder(0.0) == ladder(float("nan")) == ladder(1.0)  # (a key never observed: the levels of 1.0)


def test_a_fresh_auto_compression_takes_a_saved_fit_and_nothing_else():
    """What load_residuals relies on: an 'auto' store adopts the config a fitted one saved (JSON), and
    refuses a fit of other settings or one made over user levels that differ."""
    import json

    from mxnet_gc.kvstore.compression import Compression

    auto = {"type": "4bit", "warmup_steps": 5}
    saved = json.loads(json.dumps(Compression(auto).fitted({"w": ladder(0.3), 3: ladder(2.0)}).config))
    adopted = Compression(auto).as_fitted(saved)
    assert adopted is not None and json.loads(json.dumps(adopted.config)) == saved
    assert adopted.codec_for("w").config()["thresholds"] == ladder(0.3)
    assert Compression(dict(auto, warmup_steps=6)).as_fitted(saved) is None  # other settings
    assert Compression(dict(auto, rounding="floor")).as_fitted(saved) is None
    assert Compression({"type": "4bit", "thresholds": "medium"}).as_fitted(saved) is None  # not 'auto'
    assert Compression(auto).fitted({"w": ladder(8.0)}).as_fitted(saved) is None  # fitted already
    user = dict(auto, per_key={"w": ladder(0.01)})
    assert Compression(user).as_fitted(saved) is None  # the user's levels for 'w' win over the saved fit


def test_gc_2bit_auto_fits_one_level_and_rounds_to_nearest():
    """gc_2bit's 'threshold': 'auto': one level per key, the power of two at or above its largest value,
    rounded to nearest unless asked; a saved fit loads into a fresh 'auto' store; the refusals say what to do."""
    import json

    from mxnet_gc.kvstore.compression import Compression
    from mxnet_gc.level_fit import single

    assert single(0.3) == [0.5] and single(0.5) == [0.5] and single(3.0) == [4.0] and single(float("nan")) == [1.0]
    auto = {"type": "gc_2bit", "threshold": "auto", "warmup_steps": 5}
    compression = Compression(auto)
    assert compression.fits_levels and compression.fit_steps == 5 and compression.levels_of is single
    assert compression.config["default"] == {"type": "2bit", "threshold": "auto", "rounding": "nearest"}  # (codec type)
    fitted = compression.fitted({"w": single(0.3), 3: single(2.5)})
    assert fitted.codec_for("w").config() == {"type": "2bit", "threshold": 0.5, "rounding": "nearest"}
    assert fitted.codec_for(3).config()["threshold"] == 4.0
    saved = json.loads(json.dumps(fitted.config))
    assert json.loads(json.dumps(Compression(auto).as_fitted(saved).config)) == saved
    assert Compression(dict(auto, rounding="floor")).as_fitted(saved) is None
    assert Compression(dict(auto, rounding="floor")).fitted({"w": [0.5]}).codec_for("w").rounding == "floor"
    with pytest.raises(ValueError, match="'threshold': 'auto' fits each key's levels .* 'warmup_steps' must be at least 1"):
        Compression(dict(auto, warmup_steps=0))
    with pytest.raises(ValueError, match="is fitted to each key's gradients by a store with type 'gc_2bit'"):
        Compression({"type": "2bit", "threshold": "auto"})
