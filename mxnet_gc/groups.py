"""Per-layer threshold groups: each parameter gets one of three 4bit threshold groups from its gradients.

Layers differ in gradient scale by orders of magnitude, so one ladder of levels fits few of them.  The
trainer measures each parameter's gradient RMS (root mean square per value) over the first
``calibration_steps`` steps, averages it over all workers (so every worker and server decides the
same), and gives the parameter the group whose base level t1 is nearest, on a log scale, to
``BASE_PER_RMS`` x RMS.  Names matching an override pattern get the group (or levels) given.

The three default ladders and BASE_PER_RMS come from an experiment on the gradients of the example
models (tools/study_threshold_groups.py; docs/threshold_groups.md).
"""
import fnmatch
import math

import numpy as np

from .codecs.threshold_group import DEFAULT_GROUPS, ThresholdGroup

# The base level t1 that gives the smallest quantization error, relative to the gradient RMS.
BASE_PER_RMS = 1.0


class GroupSelector:
    """Chooses a threshold group per parameter from gradient statistics of the first steps."""

    def __init__(self, groups=None, calibration_steps=50, overrides=None, base_per_rms=BASE_PER_RMS):
        self.groups = dict(groups or DEFAULT_GROUPS)
        for name, group in self.groups.items():
            if not isinstance(group, ThresholdGroup):
                self.groups[name] = ThresholdGroup(group, name=name)
        if not isinstance(calibration_steps, int) or calibration_steps < 1:
            raise ValueError("calibration_steps must be an int >= 1, got %r" % (calibration_steps,))
        self.calibration_steps = calibration_steps
        self.overrides = dict(overrides or {})
        for pattern, group in self.overrides.items():
            self._group_of(group, pattern)  # validates
        self.base_per_rms = base_per_rms
        self.steps = 0
        self._sums = None

    def _group_of(self, spec, pattern):
        if isinstance(spec, str):
            if spec not in self.groups:
                raise ValueError("override %r names group %r; groups: %s" % (pattern, spec, ", ".join(self.groups)))
            return self.groups[spec]
        return spec if isinstance(spec, ThresholdGroup) else ThresholdGroup(spec, field="override %r" % pattern)

    @property
    def calibrating(self):
        return self.steps < self.calibration_steps

    def observe(self, grads):
        """Adds one step's local gradients (one NDArray per parameter) to the statistics; no wait."""
        import mxnet as mx

        rms = [mx.nd.norm(g) / math.sqrt(g.size) for g in grads]
        step = mx.nd.concat(*[r.reshape((1,)) for r in rms], dim=0)
        self._sums = step if self._sums is None else self._sums + step
        self.steps += 1

    def local_statistics(self):
        """Mean gradient RMS per parameter over the observed steps (numpy)."""
        return self._sums.asnumpy() / self.steps

    def choose(self, names, sizes, rms):
        """(per-parameter groups, the table to log) from the workers' mean RMS per parameter."""
        bases = {name: g.levels[0] for name, g in self.groups.items()}
        chosen, table = [], []
        for name, size, r in zip(names, sizes, rms):
            pattern = next((p for p in self.overrides if fnmatch.fnmatch(name, p)), None)
            if pattern is not None:
                group, label = self._group_of(self.overrides[pattern], pattern), "override %s" % pattern
            elif not np.isfinite(r) or r <= 0:
                label = min(bases, key=lambda g: bases[g])  # no gradient seen: the finest group
                group = self.groups[label]
            else:
                target = math.log(self.base_per_rms * r)
                label = min(bases, key=lambda g: abs(math.log(bases[g]) - target))
                group = self.groups[label]
            chosen.append(group)
            table.append({"name": name, "size": int(size), "grad_rms": float(r),
                          "group": group.name or label, "rule": label, "levels": list(group.levels)})
        return chosen, table


def format_table(table):
    """The group table as text, one line per parameter."""
    lines = ["%-40s %10s %12s  %s" % ("parameter", "size", "grad RMS", "group")]
    for row in table:
        lines.append("%-40s %10d %12.3e  %s" % (row["name"], row["size"], row["grad_rms"], row["rule"]))
    return "\n".join(lines)
