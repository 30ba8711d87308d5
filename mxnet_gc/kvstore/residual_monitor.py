"""Watches error feedback: every SAMPLE_EVERY pushes of a coded key, the norms of its residual and of its
gradient; warns once per key when the residual keeps growing against the gradient.

The residual is what the codec has not sent yet.  When the codec fits the key, it stays bounded: about
a level's width per value.  When the gradient's values are beyond the codec's top level (4bit and 2bit
send at most the top level per value and step), the residual grows every step the gradient keeps its
sign, and the update it will deliver later is the part of the gradient that is already out of date;
with momentum on the servers, that delayed part is integrated again.  That is how levels too small for
the gradient kill a network.

The norms are engine operations on the arrays (no wait); they are read at the key's next sample.
"""
import mxnet as mx
import numpy as np

from .. import log

SAMPLE_EVERY = 10  # pushes of a key between two samples
GROWTH_SAMPLES = 5  # the residual/gradient ratio must have grown over this many samples in a row ...
GROWTH_RATIO = 4.0  # ... and be at least this high, to be reported


class ResidualMonitor:
    """Per store: ``sample`` after each push's encode; ``history`` holds (push, gradient norm, residual norm)
    per key."""

    def __init__(self):
        self.names = {}  # key -> a name for messages (shared with the non-finite monitor)
        self.history = {}  # key -> [(push number of the key, gradient norm, residual norm)]
        self.describe = lambda key: ""  # key -> what its codec is, for the warning
        self.fitted = lambda key: False  # key -> whether its levels were fitted during the warm-up ('auto')
        self._pushes = {}
        self._pending = {}  # key -> (push number, squared gradient norm, squared residual norm) NDArrays
        self._warned = set()

    def sample(self, key, grad, residuals):
        """Called after ``key``'s push was encoded: ``residuals`` are its chunks' residual arrays, each the
        state of a codec that keeps only a residual (other states are skipped)."""
        push = self._pushes.get(key, 0) + 1
        self._pushes[key] = push
        if push % SAMPLE_EVERY:
            return
        self._read(key)
        r2 = [mx.nd.sum(mx.nd.square(r)) for r in residuals]
        if not r2:
            return
        self._pending[key] = (push, mx.nd.sum(mx.nd.square(grad)), mx.nd.add_n(*r2) if len(r2) > 1 else r2[0])

    def _read(self, key):
        if key not in self._pending:
            return
        push, g2, r2 = self._pending.pop(key)
        g, r = float(np.sqrt(g2.asscalar())), float(np.sqrt(r2.asscalar()))
        rows = self.history.setdefault(key, [])
        rows.append((push, g, r))
        self._check(key, rows)

    def _check(self, key, rows):
        if key in self._warned or len(rows) <= GROWTH_SAMPLES:
            return
        recent = rows[-GROWTH_SAMPLES - 1:]
        ratios = [r / max(g, 1e-30) for _, g, r in recent]
        grew = all(b[2] > a[2] for a, b in zip(recent, recent[1:]))  # (the residual itself, not a shrinking gradient)
        if ratios[-1] < GROWTH_RATIO or not grew or any(b <= a for a, b in zip(ratios, ratios[1:])):
            return
        self._warned.add(key)
        name = self.names.get(key, "key %r" % (key,))
        if self.fitted(key):
            fix = ("Its levels were fitted to its gradients during the warm-up, which have since outgrown them: fit "
                   "them later (a longer 'warmup_steps'), give larger levels, or keep the optimizer's momentum off "
                   "the servers")
        else:
            fix = ("Use 'auto' levels, fitted to each key during the warm-up (4bit's 'thresholds': 'auto', gc_2bit's "
                   "'threshold': 'auto'), larger levels, or keep the optimizer's momentum off the servers")
        log.warn(
            "mxnet_gc: %s: the residual (the part of the gradient error feedback holds back) has grown at every "
            "sample, from %.3g to %.3g times the gradient's norm (pushes %d-%d)%s: the codec's top level is too "
            "small for this gradient's values, and what it holds back arrives late (momentum on the servers "
            "integrates it again).  %s" % (name, ratios[0], ratios[-1], recent[0][0], recent[-1][0],
                                            self.describe(key), fix), RuntimeWarning)
