"""Horovod's collectives as a transport: what the Horovod store's messages and LGC's ring rounds send through.

A collective is started by name (Horovod pairs the workers' calls by name) and waited for within
MXNET_GC_COLLECTIVE_TIMEOUT (timed_collectives.py); ``what`` says what it carries, for the errors.
Nothing else of the store calls Horovod.
"""
import mxnet as mx
import numpy as np

from ... import _mx, config
from .. import agreement
from ..failure import PeerFailure
from ..transport import Transport
from . import round_schedule
from .collective_wait import CollectiveError
from .timed_collectives import TimedCollectives


class Ring(Transport):
    """A worker of a Horovod job (``hvd``: horovod.mxnet, initialized); ``describe(name)``: what a
    collective carries (the store's keys), for the errors."""

    def __init__(self, hvd, describe):
        self._hvd = hvd
        self._collectives = TimedCollectives(hvd, config.settings().collective_timeout, describe)

    @property
    def rank(self):
        return self._hvd.rank()

    @property
    def num_workers(self):
        return self._hvd.size()

    # ---- collectives ----

    def start(self, name, what, start, blocking=False):
        """Starts a collective: ``start()`` (a Horovod call) returns its output; ``blocking``: the call returns
        once complete (Horovod's allgather and alltoall)."""
        return self._collectives.start(name, what, start, blocking)

    def wait(self, names):
        """Returns once the collectives ``names`` this worker started have completed, or raises on every
        worker it can reach (after MXNET_GC_COLLECTIVE_TIMEOUT, or when another worker failed)."""
        self._collectives.wait(names)

    def allgather(self, name, what, array, priority=0):
        """Every worker's ``array``, end to end in rank order (returns once complete)."""
        return self.start(name, what, lambda: self._hvd.allgather(array, name=name, priority=priority), blocking=True)

    def allreduce(self, name, what, array, priority=0):
        """The sum over the workers of ``array`` (started; ``wait`` for it)."""
        return self.start(name, what, lambda: self._hvd.allreduce(array, op=self._hvd.Sum, name=name,
                                                                  priority=priority))

    def broadcast(self, name, what, array, root=0):
        """Rank ``root``'s ``array`` on every worker (started; ``wait`` for it)."""
        return self.start(name, what, lambda: self._hvd.broadcast(array, root_rank=root, name=name))

    def broadcast_into(self, name, what, array):
        """Rank 0's values written into ``array`` on every worker (started; ``wait`` for it)."""
        return self.start(name, what, lambda: self._hvd.broadcast_(array, root_rank=0, name=name))

    def alltoall(self, name, what, array, splits, priority=0):
        """``array``'s parts (``splits`` words each, in rank order) to each worker; returns the parts every
        worker sent this one, in rank order, once complete."""
        out = self.start(name, what, lambda: self._hvd.alltoall(array, splits=splits, name=name,
                                                                priority=priority)[0], blocking=True)
        self.wait([name])
        return out

    def alltoall_in_rounds(self, name, what, array, splits, priority=0):
        """``alltoall`` in rounds of K peers (MXNET_GC_ALLTOALL_PEERS): K rounds of round_schedule.py at a
        time, in each of which this worker sends its part for one peer and receives one part (one alltoall
        whose other splits are 0), so each link carries K flows each way, and with K = 1 no two workers send
        to each other at once.  Gloo's alltoall sends to every peer at once: W - 1 flows into each link,
        which overflow a switch's queue and lose packets (at 25 Mbit/s with 8 workers, 3 to 9% of them, and
        twice the wire time); each round costs a negotiation of Horovod's.  Returns every worker's part for
        this worker (numpy), in rank order; every worker's part for it has the same size."""
        rank, workers = self.rank, self.num_workers
        starts = np.cumsum([0] + list(splits))
        words = splits[rank]
        received = np.empty(workers * words, np.float32)
        array.wait_to_read()
        received[rank * words:(rank + 1) * words] = _mx.host_view(array)[starts[rank]:starts[rank + 1]]
        peers = min(config.settings().alltoall_peers, workers - 1)
        schedule = round_schedule.rounds(workers)
        for first in range(0, workers - 1, peers):
            group = range(first, min(first + peers, workers - 1))
            to = sorted(schedule[j][rank] for j in group)  # (an alltoall's parts go in rank order)
            sources = sorted(round_schedule.receives_from(workers, rank, j) for j in group)
            pieces = [array[int(starts[r]):int(starts[r + 1])] for r in to]
            piece = pieces[0] if len(pieces) == 1 else mx.nd.concat(*pieces, dim=0)
            out = self.alltoall("%s.%d" % (name, first + 1), what, piece,
                                [splits[r] if r in to else 0 for r in range(workers)], priority)
            host = _mx.host_view(out)
            for k, source in enumerate(sources):
                received[source * words:(source + 1) * words] = host[k * words:(k + 1) * words]
        return received

    # ---- the Transport interface ----

    def barrier(self):
        self.start("mxgc.barrier", "a barrier", lambda: self._hvd.allreduce(mx.nd.zeros(1), name="mxgc.barrier"))
        self.wait(["mxgc.barrier"])

    def agree(self, what, config):
        """Every worker gathers every worker's ``config`` (a collective within the timeout) and compares."""
        try:
            configs = self._collectives.gather_json("mxgc.agree.%s" % what, config)
        except TimeoutError:
            raise RuntimeError("mxnet_gc horovod store: the other workers did not set their %s within %g s "
                               "(MXNET_GC_COLLECTIVE_TIMEOUT)" % (agreement.SUBJECTS[what][0],
                                                                   self._collectives.timeout)) from None
        except CollectiveError as e:
            raise PeerFailure("mxnet_gc horovod store: agreeing on the %s failed: %s; another worker failed or "
                              "ended (its output says why)" % (agreement.SUBJECTS[what][0], e)) from None
        message = agreement.disagreement(what, configs)
        if message is not None:
            raise ValueError("mxnet_gc: %s (this worker is rank %d)" % (message, self.rank))
