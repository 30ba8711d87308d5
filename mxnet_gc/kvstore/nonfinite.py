"""Counts the NaN and inf values of pushed gradients, and warns (or raises) the first time a key has any.

What happens to such a value depends on how its key travels at that push, and the warning says which:

- ``dropped``: under mxnet_gc's compressions, in every phase (a codec's, LGC's accumulators, and their
  dense warm-ups, which send it as 0): nothing is sent for it and a residual keeps its previous value
  there, so the step is as if that value had been zero;
- ``spread``: uncompressed (``{'type': 'none'}``, and statistics) as MXNet's dist_sync: the pulled sum
  is NaN or inf at that position;
- ``mxnet_2bit``: MXNet's own 2bit keeps it in its residual: that position sends +-threshold at every
  later step.

The count is one engine operation per push over every pushed array (``mx.nd.mxgc_count_nonfinite``,
about a read of the arrays); its result is read at the next push, when it has long been computed, so a
bad step is reported one push later and nothing waits for it.
"""
import warnings

import mxnet as mx

POLICIES = ("warn", "raise", "ignore")
TREATMENTS = {
    "dropped": "dropped: not sent, any residual unchanged there",
    "spread": "sent uncompressed: the pulled sum is NaN or inf there",
    "mxnet_2bit": "kept in MXNet 2bit's residual: +-threshold is sent there at every later step",
}


class NonFiniteGradientError(FloatingPointError):
    """A pushed gradient held NaN or inf values (policy 'raise')."""


class NonFiniteMonitor:
    """Per store: ``record`` each push; ``counts`` holds the non-finite values seen per key so far."""

    def __init__(self, policy="warn"):
        self.policy = None
        self.set_policy(policy)
        self.names = {}  # key -> a name for messages (the Gluon trainer gives parameter names)
        self.counts = {}  # key -> non-finite values pushed so far
        self._pushes = 0
        self._pending = None  # (push number, keys, treatments, counts array) of the last push

    def set_policy(self, policy):
        if policy not in POLICIES:
            raise ValueError("nonfinite must be one of %s, got %r" % (", ".join(POLICIES), policy))
        self.policy = policy

    def record(self, keys, arrays, treatments):
        """Reports the previous push's counts, then starts counting these arrays (asynchronously);
        ``treatments``: per key, what this push does with a non-finite value (a TREATMENTS name)."""
        self.check()
        self._pushes += 1
        if self.policy == "ignore" or not arrays:
            return
        counts = mx.nd.mxgc_count_nonfinite(*arrays, num_arrays=len(arrays))
        self._pending = (self._pushes, list(keys), list(treatments), counts)

    def check(self):
        """Reads the counts of the last recorded push; warns or raises for keys with non-finite values."""
        if self._pending is None:
            return
        push, keys, treatments, counts = self._pending
        self._pending = None
        bad = [(k, t, int(c)) for k, t, c in zip(keys, treatments, counts.asnumpy()) if c]
        if not bad:
            return
        new = [k for k, _, _ in bad if k not in self.counts]
        for k, _, c in bad:
            self.counts[k] = self.counts.get(k, 0) + c
        described = "; ".join("%s: %d (%s)" % (self.names.get(k, "key %r" % (k,)), c, TREATMENTS[t]) for k, t, c in bad)
        message = "mxnet_gc: push %d had non-finite gradient values (NaN or inf): %s" % (push, described)
        if self.policy == "raise":
            raise NonFiniteGradientError(message)
        if new:  # once per key
            warnings.warn(message, RuntimeWarning, stacklevel=6)  # (the caller of the store's push)
