"""Counts the NaN and inf values of pushed gradients, and warns (or raises) the first time a key has any.

What happens to such a value depends on how its key travels at that push, and the warning says which:

- ``dropped``: under mxnet_gc's compressions, in every phase (a codec's, LGC's accumulators, and their
  dense warm-ups, which send it as 0): nothing is sent for it and a residual keeps its previous value
  there, so the step is as if that value had been zero;
- ``spread``: uncompressed (``{'type': 'none'}``, and statistics) as MXNet's dist_sync: the pulled sum
  is NaN or inf at that position;
- ``mxnet_2bit``: MXNet's own 2bit keeps it in its residual: that position sends +-threshold at every
  later step.

A message's encode counts its gradients' non-finite values in the same pass over them (one value per
segment, message_plan.py), as LGC's accumulation does for its coded tensors (lgc_select.cc): no pass
over the gradients is spent on counting alone.  The counts are read at the next push, when they have long
been computed, so a bad step is reported one push later and nothing waits for them.
"""
import mxnet as mx

from .. import log

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
        self._pending = None  # (push number, [(keys, counts NDArray)], {key: treatment}) of the last push

    def set_policy(self, policy):
        if policy not in POLICIES:
            raise ValueError("nonfinite must be one of %s, got %r" % (", ".join(POLICIES), policy))
        self.policy = policy

    @property
    def counting(self):
        """Whether pushes are counted (any policy but 'ignore')."""
        return self.policy != "ignore"

    def record(self, counted, treatments):
        """Takes a push's counts, to be read at the next ``check``: ``counted`` is (keys, counts) pairs
        (counts: an NDArray an encode writes, or numbers), counts[i] the non-finite values of keys[i] (a
        key split into chunks appears once per chunk: its counts add up); ``treatments``: key -> what this
        push does with a non-finite value (a TREATMENTS name)."""
        self._pushes += 1
        if self.counting:
            self._pending = (self._pushes, list(counted), treatments)

    def add(self, counted):
        """More (keys, counts) pairs of the push last recorded (counts: an NDArray or numbers)."""
        if self._pending is not None:
            self._pending[1].extend(counted)

    def check(self):
        """Reads the counts of the last recorded push; warns or raises for keys with non-finite values.
        Called at the start of the next push (before its encodes write the same count arrays)."""
        if self._pending is None:
            return
        push, counted, treatments = self._pending
        self._pending = None
        found = {}
        for keys, counts in counted:
            for k, c in zip(keys, counts.asnumpy() if isinstance(counts, mx.nd.NDArray) else counts):
                found[k] = found.get(k, 0) + int(c)
        bad = [(k, treatments[k], c) for k, c in found.items() if c]
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
            log.warn(message, RuntimeWarning)
