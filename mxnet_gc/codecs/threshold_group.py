"""Threshold groups: the ordered levels t1 < ... < tk (1 <= k <= 7) of the 4bit codec (5bit: k <= 15).

Three named default groups, one per class of layer by gradient scale.  Each is a geometric ladder
t_k = base * 2**(k-1), k = 1..7, covering a 64x range of magnitudes above its base:

    small   base 2^-5 = 0.03125   (0.03125 ... 2)
    medium  base 2^-4 = 0.0625    (0.0625 ... 4)
    large   base 2^-2 = 0.25      (0.25 ... 16)

They were set by tools/study_threshold_groups.py on the gradients of the Fashion-MNIST example models
(lab/threshold_groups/findings.md): Gluon gradients summed over a batch of 64.  Gradients of another scale
(another batch size, loss normalization or model) want groups scaled with them.
"""
import numbers
import math

import numpy as np

MAX_LEVELS = 7


class ThresholdGroup:
    """An immutable ladder of 1 to ``max_levels`` (7: 4bit's) float32 levels, finite, positive and
    strictly increasing."""

    def __init__(self, levels, name=None, field="thresholds", max_levels=MAX_LEVELS):
        self.name = name
        self.levels = _validate_levels(levels, field, max_levels)

    @classmethod
    def geometric(cls, base, ratio=2.0, count=MAX_LEVELS, name=None):
        """base * ratio**k for k = 0 .. count-1."""
        return cls([base * ratio ** k for k in range(count)], name=name)

    def __len__(self):
        return len(self.levels)

    def __iter__(self):
        return iter(self.levels)

    def __eq__(self, other):
        return isinstance(other, ThresholdGroup) and self.levels == other.levels

    def __hash__(self):
        return hash(self.levels)

    def __repr__(self):
        named = ", name=%r" % self.name if self.name else ""
        return "ThresholdGroup([%s]%s)" % (", ".join("%.6g" % t for t in self.levels), named)


def _validate_levels(levels, field, max_levels):
    if isinstance(levels, (str, bytes)) or not hasattr(levels, "__iter__"):
        raise ValueError("%s must be a list of 1 to %d numbers, got %r" % (field, max_levels, levels))
    levels = list(levels)
    if not 1 <= len(levels) <= max_levels:
        raise ValueError("%s must have 1 to %d levels, got %d" % (field, max_levels, len(levels)))
    out = []
    for k, t in enumerate(levels):
        if isinstance(t, bool) or not isinstance(t, numbers.Real):
            raise ValueError("%s[%d] must be a number, got %r" % (field, k, t))
        t32 = float(np.float32(t))
        if not math.isfinite(t32) or t32 <= 0:
            raise ValueError("%s[%d] must be positive and finite in float32, got %r" % (field, k, t))
        if out and t32 <= out[-1]:
            raise ValueError("%s must be strictly increasing (in float32), got [%s]: level %d (%g) is not above "
                             "level %d (%g)" % (field, ", ".join("%g" % x for x in levels), k, t, k - 1, levels[k - 1]))
        out.append(t32)
    return tuple(out)


DEFAULT_GROUPS = {
    "small": ThresholdGroup.geometric(2.0 ** -5, name="small"),
    "medium": ThresholdGroup.geometric(2.0 ** -4, name="medium"),
    "large": ThresholdGroup.geometric(2.0 ** -2, name="large"),
}


def default_group(name):
    """One of the named default groups: 'small', 'medium' or 'large'."""
    if name not in DEFAULT_GROUPS:
        raise ValueError("unknown threshold group %r; named groups: %s" % (name, ", ".join(DEFAULT_GROUPS)))
    return DEFAULT_GROUPS[name]
