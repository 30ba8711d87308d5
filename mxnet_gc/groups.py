"""Per-layer threshold groups: each parameter gets one of three 4bit threshold groups from its gradients.

Layers differ in gradient scale, so one ladder of levels fits few of them.  During the first
``calibration_steps`` steps the trainer runs, beside the real compression, each candidate group's 4bit
codec with its own error feedback on every parameter's local gradient, and measures the share of the
accumulated gradient that group would leave unsent (``||residual||^2 / ||residual + gradient||^2``,
averaged over the steps).  Those errors are averaged over all workers (so every worker and server
decides the same), and each parameter gets the group with the smallest error.  Names matching an
override pattern get the group (or levels) given.  The table also lists each gradient's RMS.

The three default ladders come from an experiment on the gradients of the example models
(tools/study_threshold_groups.py; lab/threshold_groups/findings.md).
"""
import fnmatch

import numpy as np

from .codecs.registry import create as create_codec
from .codecs.threshold_group import DEFAULT_GROUPS, ThresholdGroup


class GroupSelector:
    """Chooses a threshold group per parameter from the quantization error each group would cause."""

    def __init__(self, groups=None, calibration_steps=50, overrides=None, rounding="nearest"):
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
        self._codecs = [create_codec({"type": "4bit", "thresholds": g, "rounding": rounding})
                        for g in self.groups.values()]
        self.steps = 0
        self._residuals = None  # per parameter, per group
        self._payloads = None
        self._sums = None  # per parameter: errors of each group, then the gradient RMS
        self.table = None  # once chosen: a row per parameter (name, statistics, group, levels)

    def _group_of(self, spec, pattern):
        if isinstance(spec, str):
            if spec not in self.groups:
                raise ValueError("override %r names group %r; groups: %s" % (pattern, spec, ", ".join(self.groups)))
            return self.groups[spec]
        return spec if isinstance(spec, ThresholdGroup) else ThresholdGroup(spec, field="override %r" % pattern)

    def observe(self, grads):
        """Runs every group on one step's local gradients (one NDArray per parameter); no wait."""
        import mxnet as mx

        if self._residuals is None:
            self._residuals = [[mx.nd.zeros_like(g) for _ in self._codecs] for g in grads]
            self._payloads = [[mx.nd.zeros(c.payload_size(g.size)) for c in self._codecs] for g in grads]
        columns = []
        for g, residuals, payloads in zip(grads, self._residuals, self._payloads):
            row = []
            for codec, r, payload in zip(self._codecs, residuals, payloads):
                accumulated = mx.nd.sum(mx.nd.square(r + g))
                codec.encode(g, r, out=payload)
                row.append(mx.nd.sum(mx.nd.square(r)) / mx.nd.maximum(accumulated, 1e-30))
            row.append(mx.nd.sqrt(mx.nd.mean(mx.nd.square(g))))
            columns.append(mx.nd.concat(*[v.reshape((1,)) for v in row], dim=0))
        step = mx.nd.stack(*columns)
        self._sums = step if self._sums is None else self._sums + step
        self.steps += 1

    def local_statistics(self):
        """[parameters, groups + 1]: mean error of each group, then the mean gradient RMS (numpy)."""
        return self._sums.asnumpy() / self.steps

    def choose_over_workers(self, kv, names, sizes):
        """Averages the statistics over the workers (a collective call on ``kv``) and chooses; returns
        the table (also ``self.table``)."""
        statistics = kv.average("grad_rms", self.local_statistics())
        self.table = self.choose(names, sizes, statistics)[1]
        return self.table

    def title(self, codec_type):
        """The title of the table ``format`` gives (the same calls as level_fit.LevelFitter)."""
        return "threshold groups after %d calibration steps" % self.calibration_steps

    def format(self):
        """The chosen table as text (format_table)."""
        return format_table(self.table)

    def levels(self):
        """The chosen levels, one list per parameter in the table's order."""
        return [row["levels"] for row in self.table]

    def state_dict(self):
        """The chosen table; before the choice, the statistics so far (the codecs' residuals are not
        kept: a job resumed in the middle of the calibration measures its remaining steps afresh)."""
        sums = None if self._sums is None else self._sums.asnumpy().tolist()
        return {"table": self.table, "steps": self.steps, "sums": sums}

    def load_state_dict(self, state):
        import mxnet as mx

        self.table, self.steps = state["table"], state["steps"]
        self._sums = None if state["sums"] is None else mx.nd.array(state["sums"])

    def choose(self, names, sizes, statistics):
        """(per-parameter groups, the table to log) from the workers' mean statistics."""
        labels = list(self.groups)
        chosen, table = [], []
        for name, size, row in zip(names, sizes, statistics):
            errors, rms = row[:-1], row[-1]
            pattern = next((p for p in self.overrides if fnmatch.fnmatch(name, p)), None)
            if pattern is not None:
                group, rule = self._group_of(self.overrides[pattern], pattern), "override %s" % pattern
            else:
                rule = labels[int(np.argmin(errors))]
                group = self.groups[rule]
            chosen.append(group)
            table.append({"name": name, "size": int(size), "grad_rms": float(rms), "group": group.name or rule,
                          "rule": rule, "errors": {label: float(e) for label, e in zip(labels, errors)},
                          "levels": list(group.levels)})
        return chosen, table


def format_table(table):
    """The group table as text, one line per parameter."""
    labels = list(table[0]["errors"]) if table else []
    lines = ["%-40s %9s %10s  %s  %s" % ("parameter", "size", "grad RMS", "  ".join("err %-6s" % l for l in labels),
                                           "group")]
    for row in table:
        lines.append("%-40s %9d %10.3e  %s  %s" % (row["name"], row["size"], row["grad_rms"],
                                                  "  ".join("%10.4f" % row["errors"][l] for l in labels), row["rule"]))
    return "\n".join(lines)
