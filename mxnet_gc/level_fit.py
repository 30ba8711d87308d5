"""4bit's ``'thresholds': 'auto'`` (and gc_2bit's ``'threshold': 'auto'``): each key's levels from the
largest gradient values it had during a calibration (the last steps of the dense warm-up).

For each key: M = the mean over the workers of the largest finite |gradient value| each saw in the
calibration's steps; the top level is the power of two at or above HEADROOM * M, and the ladder is the
7 levels top * 2^-6 ... top (ratio 2, a 64x range).

Why the top and not the bulk: a value above the top level is clipped to it, and its residual grows every
step it lasts; what error feedback holds back then arrives late, and momentum on the servers integrates
it a second time.  That kills networks (Module.fit and a plain gluon.Trainer with momentum 0.9 on the
servers).  HEADROOM = 4 leaves two octaves for gradients that grow after the warm-up.  Values below the
lowest level's rounding bound wait in the residual until they add up to it.  Powers of two keep the
levels exact in float32, and a gradient scaled by 2^k (batch size, loss scale) gets its ladder scaled by
2^k.  The measurements behind it are in lab/accuracy/findings.md ("The original 2bit context").

A key whose levels the codec cannot use (gradients from about 1e37 on, whose top level overflows float32,
also as a compressed pull's levels times the workers; or up to about 1e-44, whose lowest level underflows)
fails the fit with a message naming it (``fit_failure``).
"""
import math

import numpy as np

HEADROOM = 4.0
LEVELS = 7
# gc_2bit's one level: the power of two at or above the largest value (of 1/4, 1 and 4 times it, 1 trained
# best in the short setting of tools/study_module.py, rounding to nearest; a comparison not kept as data)
SINGLE_HEADROOM = 1.0


def _power_of_two_above(factor, largest):
    """The power of two at or above factor * largest (largest 1.0 when it is not a finite positive number:
    a key that never had a finite nonzero value)."""
    if not largest or not math.isfinite(largest) or largest <= 0:
        largest = 1.0
    return 2.0 ** math.ceil(math.log2(factor * largest))


def ladder(largest):
    """The 7 levels for a key whose largest gradient value is ``largest``."""
    top = _power_of_two_above(HEADROOM, largest)
    return [top * 2.0 ** (k - LEVELS + 1) for k in range(LEVELS)]


def single(largest):
    """gc_2bit's one level for a key whose largest gradient value is ``largest``."""
    return [_power_of_two_above(SINGLE_HEADROOM, largest)]


def fit_failure(name, largest, levels, reason):
    """The message for a key whose 'auto' levels (None: none could be fitted) cannot be used: the key, why, and
    what to do."""
    large = not math.isfinite(largest) or largest > 1
    gives = ""
    if levels is not None:
        low, top = ("2^%d" % math.log2(t) for t in (levels[0], levels[-1]))  # (fitted levels are powers of two)
        gives = ", gives levels %s" % (top if len(levels) == 1 else "%s .. %s" % (low, top))
    return ("key %r: the 'auto' fit of its levels failed: its gradients are too %s to fit levels in float32 (largest "
            "|value| %g, the workers' mean over the fit's steps%s: %s); scale the loss %s, or give the key fixed levels "
            "in 'per_key'" % (name, "large" if large else "small", largest, gives, reason, "down" if large else "up"))



def title(codec_type, steps):
    """The fitted levels' table's title, on either transport and from the store or the trainer."""
    return "%s levels fitted to each key's largest gradient values over the last %d warm-up steps" % (codec_type, steps)

class LevelFitter:
    """Collects, per key, the largest |gradient value| of each observed step (engine operations, no wait);
    then fits the ladders, agreed over the workers.  The store uses it in its warm-up, the Gluon trainer
    in its calibration phase (the same calls as groups.GroupSelector)."""

    def __init__(self, calibration_steps=20, levels_of=ladder, check=None):
        self.calibration_steps = calibration_steps
        self.levels_of = levels_of  # largest value -> levels (ladder: 4bit's; single: gc_2bit's)
        # (levels, num_workers) -> raises ValueError when the codec cannot use them (Compression.check_fit)
        self.check = check
        self._maxima = {}  # key -> [one-value NDArrays, a step each, or floats restored from a checkpoint]
        self.table = None  # once fitted: a row per key (name, largest value, levels)

    def observe(self, grads):
        """One step's gradients: {key: NDArray}, or a list (keys 0, 1, ...)."""
        import mxnet as mx

        for key, g in (grads.items() if isinstance(grads, dict) else enumerate(grads)):
            self._maxima.setdefault(key, []).append(mx.nd.max(mx.nd.abs(g)))

    def local_largest(self, keys):
        """Per key, the largest finite value over the observed steps (0 for a key never observed; a step
        whose gradient held NaN or inf is left out)."""
        out = []
        for k in keys:
            values = np.array([m.asscalar() if hasattr(m, "asscalar") else m for m in self._maxima.get(k, [])],
                              np.float64)
            values = values[np.isfinite(values)]
            out.append(values.max() if values.size else 0.0)
        return np.array(out, np.float64)

    def fit_over_workers(self, kv, keys, names, name="fit_levels"):
        """{key: levels} from the workers' mean largest values (a collective call on ``kv``, once per
        ``name``); the table is ``self.table``."""
        largest = kv.average(name, self.local_largest(keys))
        table = [{"name": n, "largest": float(m), "levels": self.levels_of(m)} for n, m in zip(names, largest)]
        for row in table:
            self._check(row, kv.num_workers)
        self.table, self._maxima = table, {}
        return {k: row["levels"] for k, row in zip(keys, self.table)}

    def _check(self, row, num_workers):
        """Raises ValueError (fit_failure) unless the codec can use a key's fitted levels."""
        if not math.isfinite(row["largest"]):  # (each worker's is finite: their sum overflowed)
            raise ValueError(fit_failure(row["name"], row["largest"], None,
                                         "the sum of the workers' largest values is beyond float32"))
        if self.check is not None:
            try:
                self.check(row["levels"], num_workers)
            except ValueError as e:
                raise ValueError(fit_failure(row["name"], row["largest"], row["levels"], e)) from None

    def choose_over_workers(self, kv, names, sizes):
        """The Gluon trainer's call (keys 0 .. n-1 in its order); returns the table."""
        self.fit_over_workers(kv, list(range(len(names))), names)
        return self.table

    def title(self, codec_type):
        """The title of the table ``format`` gives (the store's and the trainer's alike)."""
        return title(codec_type, self.calibration_steps)

    def format(self):
        return format_table(self.table)

    def state_dict(self):
        keys = sorted(self._maxima)
        return {"table": self.table, "largest": [[k, float(v)] for k, v in zip(keys, self.local_largest(keys))]}

    def load_state_dict(self, state):
        self.table = state["table"]
        self._maxima = {k: [v] for k, v in state["largest"]}


def format_table(table):
    """The fitted levels as text, one line per key."""
    lines = ["%-40s %12s %12s %12s" % ("key", "largest |g|", "lowest level", "top level")]
    for row in table:
        lines.append("%-40s %12.4g %12.4g %12.4g" % (row["name"], row["largest"], row["levels"][0], row["levels"][-1]))
    return "\n".join(lines)
