"""The '2bit', '4bit' and '5bit' codecs: threshold quantization with error feedback.

Per value: a = residual + grad; m = number of decision bounds d_k with |a| >= d_k; the value is sent
as sign(a) * t_m (0 when m = 0) and residual = a - sign(a) * t_m.  ``rounding`` sets the bounds:
'floor' (d_k = t_k: the largest level not above |a|, MXNet's rule) or 'nearest' (d_k = (t_{k-1} + t_k)
/ 2, t_0 = 0: the level closest to |a|, so the residual is at most half a level's gap, and values from
t_1 / 2 on are sent).  For values spread evenly over a ratio-2 ladder, nearest leaves 0.038 of the
squared value in the residual each step against 0.098 for floor: less of the gradient arrives late,
which is what momentum on the servers does not tolerate.  '2bit' is MXNet 1.9.1's codec, bit for bit
with its default 'floor' (one level, 16 values per float32 word); '4bit' has up to 7 levels (8 values
per word) and rounds to the nearest level by default; '5bit' has up to 15 (32 values in 5 words): a
4bit codec with ``pull_bits`` 5 has the servers' sums pulled on it (``pull_codec``).  The wire format
does not depend on the rounding (the decoder needs the levels only); it is in docs/wire_format.md,
the kernels in src_cpp/.

Non-finite sums (a NaN or +-inf gradient, or a residual + gradient that overflows) are dropped: the
value is sent as 0 and the residual keeps its previous value, so one bad step does not poison later
ones.  (MXNet's own 2bit keeps NaN/inf in the residual from then on.)
"""
import difflib
import math
import numbers

import numpy as np

from .. import level_fit
from .base import Codec, LevelFit
from .registry import register
from .threshold_group import DEFAULT_GROUPS, ThresholdGroup, default_group


ROUNDINGS = ("floor", "nearest")
MAX_LEVELS_5BIT = 15
DEFAULT_PULL_BITS = 4


class ThresholdCodec(Codec):
    """Shared implementation: ``bits`` per value, quantized to the levels of ``group`` by ``rounding``."""

    bits = None
    cuttable = True  # (a code per value, bits to a word: see ``word_values``)

    def __init__(self, group, rounding):
        if rounding not in ROUNDINGS:
            raise ValueError("%s: 'rounding' must be 'floor' or 'nearest', got %r" % (self.type, rounding))
        self.group, self.rounding = group, rounding
        levels = np.array(group.levels, np.float32)
        bounds = decision_bounds(levels, rounding)
        if not bounds[0] > 0:  # (a bound of 0 would send every 0 as the lowest level)
            raise ValueError("%s: the lowest level %g is too small to round to nearest in float32: half of it, its "
                             "rounding bound, is 0; give a larger one, or 'rounding': 'floor'" % (self.type, levels[0]))
        self._kernel_params = [float(t) for t in levels] + [float(d) for d in bounds]

    @property
    def word_values(self):
        """Values whose codes fill whole float32 words (2bit 16, 4bit 8, 5bit 32): a payload can be cut
        after any multiple of them."""
        return 32 // math.gcd(32, self.bits)

    def payload_size(self, n):
        """n codes of ``bits`` bits, one bit stream, padded to whole float32 words."""
        return (n * self.bits + 31) // 32

    def kernel_params(self, n):
        """The levels, then the encoder's decision bounds."""
        return list(self._kernel_params)

    def pull_codec(self, num_workers):
        """The servers' sum of num_workers pushes is re-encoded on the levels times num_workers (the
        workers' mean on the push levels): a sum of top-level values is sent whole, not clipped to the
        top level with the rest left in the servers' residual."""
        return self.scaled(num_workers)

    def scaled(self, factor):
        """This codec with every level multiplied by ``factor``."""
        raise NotImplementedError


@register
class TwoBitCodec(ThresholdCodec):
    """MXNet 1.9.1's 2bit: values at or beyond +-threshold are sent as +-threshold, 16 per word."""

    type = "2bit"
    kernel_name = "2bit"
    bits = 2
    example = {"threshold": 0.5}
    level_fit = LevelFit("threshold", False, 0.5, level_fit.single, "a number")
    default_rounding = "floor"  # (MXNet's rule; with fitted levels a store rounds to nearest unless told)
    values = {"threshold": "a positive number, or 'auto' on a store with type 'gc_2bit' (fitted to each key's "
                           "gradients during the warm-up)",
              "rounding": "'floor' (MXNet's rule) or 'nearest'"}

    def __init__(self, threshold=0.5, rounding="floor"):
        if threshold == "auto":
            raise ValueError("2bit: 'threshold': 'auto' is fitted to each key's gradients by a store with type "
                             "'gc_2bit' (set_gradient_compression) or mxnet_gc.gluon.Trainer; MXNet's own '2bit' and a "
                             "codec alone need a number")
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
            raise ValueError("2bit: 'threshold' must be a positive number, or 'auto' on a store with type 'gc_2bit' "
                             "(fitted to each key's gradients during the warm-up), got %r" % (threshold,))
        t32 = float(np.float32(threshold))
        if not math.isfinite(t32) or t32 <= 0:
            raise ValueError("2bit: 'threshold' must be positive and finite in float32, got %r" % (threshold,))
        super().__init__(ThresholdGroup([t32], field="threshold"), rounding)
        self.threshold = t32

    def config(self):
        return {"type": self.type, "threshold": self.threshold, "rounding": self.rounding}

    def scaled(self, factor):
        return type(self)(self.threshold * factor, self.rounding)


@register
class FourBitCodec(ThresholdCodec):
    """4bit multi-threshold: up to 7 levels per sign, 8 values per word.

    ``thresholds`` is a list of 1 to 7 strictly increasing positive levels, a ThresholdGroup, or the
    name of a default group ('small', 'medium', 'large'; see threshold_group.py).  ``rounding``:
    'nearest' (default) or 'floor' (see the module's docstring).  ``pull_bits``: the code of a
    compressed pull of the servers' sum, 4 (the levels times the number of workers) or 5 (those, the
    midpoints between them, half the first and 1.5 times the last: ``pull_ladder``).
    """

    type = "4bit"
    kernel_name = "4bit"
    bits = 4
    example = {"thresholds": [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0]}
    level_fit = LevelFit("thresholds", True, "medium", level_fit.ladder,
                         "levels or a group name such as 'medium'")
    fitted_by_default = True
    # 4bit's cost in accuracy against float32 pulls stayed within 0.3 points on every path measured
    # (lab/accuracy/findings.md), and only both directions compressed make a step faster
    pulls_compressed_by_default = True
    values = {"thresholds": "'auto' (on a store: fitted to each key's gradients during the warm-up; a store's "
                            "default), a group name ('small', 'medium', 'large'), or 1 to 7 increasing positive "
                            "numbers",
              "rounding": "'nearest' or 'floor'",
              "pull_bits": "4 or 5: the code of a compressed pull of the servers' sum"}
    hints = {"threshold": "4bit takes 'thresholds', 1 to 7 levels or a group name ('small', 'medium', 'large'); "
                          "a 2bit 'threshold' does not carry over to them (docs/migration.md)"}

    def __init__(self, thresholds="medium", rounding="nearest", pull_bits=DEFAULT_PULL_BITS):
        if thresholds == "auto":
            raise ValueError("4bit: 'thresholds': 'auto' is fitted to each key's gradients by a store "
                             "(set_gradient_compression) or mxnet_gc.gluon.Trainer; a codec alone needs levels or a "
                             "group name ('small', 'medium', 'large')")
        if isinstance(thresholds, str) and thresholds not in DEFAULT_GROUPS or isinstance(thresholds, numbers.Real):
            close = difflib.get_close_matches(str(thresholds), list(DEFAULT_GROUPS) + ["auto"], 1)
            one = thresholds if isinstance(thresholds, numbers.Real) and not isinstance(thresholds, bool) else 0.5
            raise ValueError("4bit: 'thresholds' must be 'auto' (on a store: levels fitted to each key's gradients "
                             "during the warm-up), a group name (%s) or a list of 1 to 7 increasing positive numbers "
                             "(one level: [%s]), got %r%s" % (", ".join(map(repr, DEFAULT_GROUPS)), one, thresholds,
                                                              "; did you mean %r?" % close[0] if close else ""))
        if isinstance(thresholds, str):
            group = default_group(thresholds)
        elif isinstance(thresholds, ThresholdGroup):
            group = thresholds
        else:
            group = ThresholdGroup(thresholds, field="4bit: 'thresholds'")
        if pull_bits not in (4, 5) or isinstance(pull_bits, bool):
            raise ValueError("4bit: 'pull_bits' must be 4 or 5, got %r" % (pull_bits,))
        super().__init__(group, rounding)
        self.pull_bits = pull_bits

    def config(self):
        return {"type": self.type, "thresholds": list(self.group.levels), "rounding": self.rounding,
                "pull_bits": self.pull_bits}

    def pull_codec(self, num_workers):
        if self.pull_bits == 4:
            return super().pull_codec(num_workers)
        return FiveBitCodec(pull_ladder([t * num_workers for t in self.group.levels]), self.rounding)

    def scaled(self, factor):
        return type(self)([t * factor for t in self.group.levels], self.rounding, self.pull_bits)


@register
class FiveBitCodec(ThresholdCodec):
    """5bit multi-threshold: up to 15 levels per sign, 32 values in 5 words; what a 4bit codec with
    ``pull_bits`` 5 is pulled on.  ``thresholds``: a list of 1 to 15 strictly increasing positive
    levels (or a ThresholdGroup of them); ``rounding`` as 4bit's."""

    type = "5bit"
    kernel_name = "5bit"
    bits = 5
    example = {"thresholds": [0.0625 * 2 ** (k / 2) for k in range(15)]}
    values = {"thresholds": "1 to 15 increasing positive numbers (no default, no group names)",
              "rounding": "'nearest' or 'floor'"}

    def __init__(self, thresholds=None, rounding="nearest"):
        if thresholds is None or isinstance(thresholds, str):
            raise ValueError("5bit: 'thresholds' must be a list of 1 to %d levels, got %r"
                             % (MAX_LEVELS_5BIT, thresholds))
        if not isinstance(thresholds, ThresholdGroup):
            thresholds = ThresholdGroup(thresholds, field="5bit: 'thresholds'", max_levels=MAX_LEVELS_5BIT)
        super().__init__(thresholds, rounding)

    def config(self):
        return {"type": self.type, "thresholds": list(self.group.levels), "rounding": self.rounding}

    def scaled(self, factor):
        return type(self)([t * factor for t in self.group.levels], self.rounding)


def pull_ladder(levels):
    """The 5bit pull levels of a sum whose 4bit levels are ``levels`` (the push levels times the number
    of workers, s_1 < ... < s_L): s_1 / 2, then each s_k and the midpoint to the next, then 1.5 s_L
    (2L + 1 <= 15 levels).  With ratio-2 push levels and 2 workers, a sum of two neighbouring push levels,
    or of one and zero, is a pull level: sent exact."""
    s = [float(np.float32(t)) for t in levels]
    mids = [(a + b) / 2 for a, b in zip(s, s[1:])]
    return [s[0] / 2] + [x for pair in zip(s, mids + [None]) for x in pair if x is not None] + [1.5 * s[-1]]


def decision_bounds(levels, rounding):
    """The encoder's decision bounds (float32) of ``levels`` under ``rounding``."""
    levels = np.asarray(levels, np.float32)
    if rounding == "floor":
        return levels.copy()
    below = np.concatenate([np.zeros(1, np.float32), levels[:-1]])
    return ((below + levels) * np.float32(0.5)).astype(np.float32)
