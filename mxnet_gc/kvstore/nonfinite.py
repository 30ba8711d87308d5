"""Counts the NaN and inf values of pushed gradients, and warns (or raises) the first time a key has any.

A non-finite gradient is silently lost by the threshold codecs (they drop it, and MXNet's 2bit keeps
it in its residual from then on) and turns a whole layer into NaN when pushed uncompressed, so the
stores count them on every push.  The count is one engine operation per push over every pushed array
(``mx.nd.mxgc_count_nonfinite``, about a read of the arrays); its result is read at the next push, when
it has long been computed, so a bad step is reported one push later and nothing waits for it.
"""
import warnings

import mxnet as mx

POLICIES = ("warn", "raise", "ignore")


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
        self._pending = None  # (push number, keys, counts array) of the last push

    def set_policy(self, policy):
        if policy not in POLICIES:
            raise ValueError("nonfinite must be one of %s, got %r" % (", ".join(POLICIES), policy))
        self.policy = policy

    def record(self, keys, arrays):
        """Reports the previous push's counts, then starts counting these arrays (asynchronously)."""
        self.check()
        self._pushes += 1
        if self.policy == "ignore" or not arrays:
            return
        counts = mx.nd.mxgc_count_nonfinite(*arrays, num_arrays=len(arrays))
        self._pending = (self._pushes, list(keys), counts)

    def check(self):
        """Reads the counts of the last recorded push; warns or raises for keys with non-finite values."""
        if self._pending is None:
            return
        push, keys, counts = self._pending
        self._pending = None
        bad = [(k, int(c)) for k, c in zip(keys, counts.asnumpy()) if c]
        if not bad:
            return
        new = [(k, c) for k, c in bad if k not in self.counts]
        for k, c in bad:
            self.counts[k] = self.counts.get(k, 0) + c
        described = ", ".join("%s: %d" % (self.names.get(k, "key %r" % (k,)), c) for k, c in bad)
        message = ("mxnet_gc: push %d sent non-finite gradient values (NaN or inf; %s); compressed pushes drop "
                   "them, uncompressed ones spread them to the whole sum" % (push, described))
        if self.policy == "raise":
            raise NonFiniteGradientError(message)
        if new:  # once per key
            warnings.warn(message, RuntimeWarning, stacklevel=3)
