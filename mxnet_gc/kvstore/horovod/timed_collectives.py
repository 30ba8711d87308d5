"""Horovod's collectives started by name and waited for within MXNET_GC_COLLECTIVE_TIMEOUT.

A collective that some worker never joins never completes; every wait here has a deadline (collective_wait.py's
helper thread).  When one fails or times out, the error says which collectives the workers started how often
(an exchange among the workers still in the store), so that a worker that skipped a key is named.
"""
import collections
import json
import time

import mxnet as mx
import numpy as np

from .collective_wait import CollectiveError, Waiter
from ..failure import PeerFailure


class TimedCollectives:
    """The collectives a worker started, by name, until waited for.  ``describe(name)``: what a collective
    carries, for the errors (the store's keys)."""

    def __init__(self, hvd, timeout, describe):
        self.hvd, self.timeout, self.describe = hvd, timeout, describe
        self.waiter = Waiter()
        self.started = collections.Counter()  # collective name -> how often this worker started it
        self.inflight = {}  # collective name -> (its output, what it carries) until waited for

    def start(self, name, what, start, blocking=False):
        """Starts a collective: ``start()`` (a Horovod call) returns its output, written when it completes;
        ``what``: what it carries, for messages.  ``wait`` waits for it.  ``blocking``: the call returns
        only once complete (Horovod's allgather), so it runs within the collective timeout."""
        self.started[name] += 1
        output = self.timed(start, lambda: (name, what)) if blocking else start()
        self.inflight[name] = (output, what)
        return output

    def wait(self, names):
        """Returns once the collectives ``names`` this worker started have completed.  After the timeout, or
        when Horovod aborted one (another worker failed or ended), raises RuntimeError on every worker it
        can reach, saying which keys which ranks did not push."""
        waiting = [(n,) + self.inflight.pop(n) for n in names if n in self.inflight]
        done = []

        def wait_all():  # (one call on the helper thread for them all)
            for _, output, _ in waiting:
                output.wait_to_read()
                done.append(output)
        if waiting:
            self.timed(wait_all, lambda: (waiting[len(done)][0], waiting[len(done)][2]))

    def timed(self, call, failing):
        """``call()`` within the collective timeout; ``failing()``: (name, what) of the collective it waits
        for when it fails or times out."""
        try:
            return self.waiter.run(call, time.monotonic() + self.timeout)
        except CollectiveError as e:
            name, what = failing()
            raise PeerFailure("mxnet_gc horovod store: the collective of %s (%s) failed: %s; another worker failed "
                              "or ended before it (its output says why)" % (what, name, e)) from None
        except TimeoutError:
            name, what = failing()
            raise RuntimeError("mxnet_gc horovod store: the collective of %s (%s) did not complete within %g s "
                               "(MXNET_GC_COLLECTIVE_TIMEOUT): %s" % (what, name, self.timeout, self.stall_report())) \
                from None

    def stall_report(self):
        """After a timeout: which collectives the workers started how often (an exchange among the workers
        that also wait in the store; the others cannot answer)."""
        try:
            counts = self.gather_json("mxgc.stall", dict(self.started), Waiter())
        except (TimeoutError, CollectiveError):
            return ("the other workers did not answer within %g s either (they ended, or wait outside "
                    "mxnet_gc's store)" % self.timeout)
        names = sorted({n for c in counts.values() for n in c}, key=str)
        lines = []
        for n in names:
            per_rank = {r: c.get(n, 0) for r, c in counts.items()}
            if len(set(per_rank.values())) > 1:
                most = max(per_rank.values())
                lines.append("%s: not pushed by rank(s) %s (times started: %s)"
                             % (self.describe(n), [r for r, c in sorted(per_rank.items()) if c < most],
                                ", ".join("rank %d: %d" % (r, c) for r, c in sorted(per_rank.items()))))
        return "; ".join(lines) + "; every worker must push the same keys at every step" if lines else \
            "every worker started the same collectives (a worker waits outside mxnet_gc's store?)"

    def gather_json(self, name, value, waiter=None):
        """{rank: value} of every worker's JSON-serializable ``value`` (two allgathers, through ``waiter``,
        by default this one's, within the collective timeout: TimeoutError or CollectiveError otherwise)."""
        waiter = waiter or self.waiter
        text = np.frombuffer(json.dumps(value, sort_keys=True).encode(), np.uint8).astype(np.float32)
        deadline = time.monotonic() + self.timeout
        lengths = waiter.run(lambda: self.hvd.allgather(mx.nd.array([text.size]), name=name + ".length"), deadline)
        gathered = waiter.run(lambda: self.hvd.allgather(mx.nd.array(text), name=name), deadline)
        lengths, gathered = lengths.asnumpy().astype(int), gathered.asnumpy()
        ends = np.cumsum(lengths)
        return {r: json.loads(bytes(gathered[end - n:end].astype(np.uint8)).decode())
                for r, (n, end) in enumerate(zip(lengths, ends))}
