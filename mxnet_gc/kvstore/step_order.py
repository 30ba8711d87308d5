"""A worker's pushes and pulls in step order, checked on the worker that calls them.

The workers' pushes of a key are summed step by step, and neither transport can tell one worker's step
from another's: a parameter server completes a message's round when it holds as many pushes as there
are workers (as MXNet's dist_sync server does), Horovod pairs a message's collectives by name, one per
push.  A worker that pushes a key twice before pulling it would pair its second push with the other
workers' next step (and on the parameter server with its own first), and every later sum would be wrong.
MXNet's dist_sync takes such a push without a word; mxnet_gc's stores refuse it at once, on the worker
that makes it, naming the key and the rule (``RULE``).

A pull without a push since the key's last pull (a worker that skipped a step) would pair that worker's
later pushes with the others' earlier steps too; it is refused where the pull only completes the step's
sums (on Horovod, and on a parameter server without an optimizer), not where it reads weights the
servers updated (MXNet's semantics, which a worker may read at any time).  ``StepOrder`` also refuses
calls that replace the messages between a push and its pull, and numbers the steps (a key pushed again
starts the next one, as the store clock counts), so that the Horovod store can check that its
collectives paired the same step on every worker.
"""
RULE = "every worker must push a key once per step and pull it before the next push"


class StepOrder:
    """The keys this worker pushed and has not pulled yet, and its step count."""

    def __init__(self):
        self.step = 0
        self._pending = {}  # keys pushed and not pulled yet, in push order (a dict as an ordered set)
        self._pushed = set()  # keys pushed at least once
        self._step_keys = set()  # keys pushed in this step

    def push(self, keys):
        """Before a push of ``keys``: raises ValueError for a key pushed and not pulled since; counts the step."""
        for k in keys:
            if k in self._pending:
                raise ValueError("push of key %r twice before its pull: %s" % (k, RULE))
        if self._step_keys.intersection(keys):
            self.step += 1
            self._step_keys = set()
        self._step_keys.update(keys)
        self._pending.update(dict.fromkeys(keys))
        self._pushed.update(keys)

    def pull(self, keys, needs_push):
        """Before a pull of ``keys``: with ``needs_push`` (the pull completes sums), raises ValueError for a
        key pushed before but not since its last pull."""
        if needs_push:
            for k in keys:
                if k in self._pushed and k not in self._pending:
                    raise ValueError("pull of key %r without a push since its last pull: %s (a worker that skips a "
                                     "step would pair its later pushes with the other workers' earlier steps)"
                                     % (k, RULE))

    def pulled(self, keys):
        """After a pull of ``keys`` (one that raised leaves them pushed: it may be repeated)."""
        for k in keys:
            self._pending.pop(k, None)

    def between_steps(self, what):
        """Raises ValueError if a key is pushed and not pulled yet: ``what`` replaces the messages."""
        if self._pending:
            raise ValueError("%s while key %r is pushed and not pulled yet: call it between steps, after the pull"
                             % (what, next(iter(self._pending))))
