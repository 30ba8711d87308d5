"""LGC on a ring (Horovod's collectives, no server), the workers' rounds (the phases, accumulators and
checkpoints are lgc_rounds.py's).  Every message has the same size on every worker, so each travels
by one collective, and every worker combines what it gathered itself (lgc/combiner.py), in rank order:
all workers hold bit-identical updates.

    every step   the leader broadcasts INDEX (its scales and indices); with index 'union' every worker's
                 CAND (its share of the set) by allgather instead, from which each draws the same INDEX
    train        every worker's VECTOR (its values at the leader's indices, its innovation) by
                 allgather; the update is their sum; rank 0 trains the autoencoder on them (a step
                 queued on MXNet's engine from its own thread)
    lgc          every worker's code of its own vector (in the leader's scales) summed by one allreduce;
                 every worker's INNOV by allgather (started with the INDEX broadcast, which it does not
                 need); the mean decoder's estimate from the mean code and the mean innovation channel,
                 times the scales, stands for each worker's values at the leader's indices, its
                 innovation coordinates made exact

At the switch to the lgc phase (and after each fine-tuning step, option ``fine_tune_every``) rank 0
broadcasts the autoencoder's weights (counted in ``autoencoder_bytes``).  A worker whose message does
not follow the format fails the step on every worker (each reads every message).
"""
import time

import mxnet as mx

from ... import _mx
from ...lgc.combiner import Combiner
from ...lgc.wire import CorruptMessage
from ...schedule import AE_TRAIN, LGC
from ..lgc_rounds import LGCRounds


class RingRounds(LGCRounds):
    """The worker side of LGC for a HorovodStore (``transport``: its Ring)."""

    def __init__(self, transport, host, params):
        super().__init__(transport, host, params)
        if self.options.codes != "leader":  # (every worker's code is its own here, summed in the leader's scales)
            raise ValueError("lgc: 'codes' %r is the parameter server's; on a ring every worker already sends the "
                             "code of its own vector (in the leader's scales, so that the codes add up): leave "
                             "'codes' at 'leader'" % self.options.codes)
        self._gathered = None  # this step's collectives in flight: per group, (INDEX fields, outputs)

    def push(self, grads):
        step, ring, rank = self.schedule.step, self.transport, self.transport.rank
        self.accumulate(grads)
        leader, train = self.leader(), self.mode() == AE_TRAIN
        self._gathered = []
        for s, g in enumerate(self.groups):
            if self.sends_candidates():  # every worker's candidates; each draws the step's set from them
                what = "cand"
                words = ring.allgather(*self._named(s, what), _mx.array(g.coder.candidate_message(step)))
            else:
                what = "index"
                mine = _mx.array(g.coder.index_message(step)) if rank == leader else mx.nd.zeros(g.fmt.words["INDEX"])
                words = ring.broadcast(*self._named(s, what), mine, root=leader)
            if not train:  # (the innovation does not depend on the leader's indices: gathered meanwhile)
                innovations = ring.allgather(*self._named(s, "innov"), _mx.array(g.coder.innov_message(step)))
            ring.wait([self._named(s, what)[0]])
            index = self._index(g, words.asnumpy(), step, leader)
            if train:
                out = [ring.allgather(*self._named(s, "vector"),
                                      _mx.array(g.coder.vector_message(step, index["indices"])))]
            else:
                code = _mx.array(g.coder.code(index["indices"], index["scales"]))
                out = [ring.allreduce(*self._named(s, "code"), code), innovations]
            self._gathered.append((index, out))

    def _named(self, group, what):
        """(name, description) of group ``group``'s collective ``what``."""
        return "mxgc.lgc.%d.%s" % (group, what), "lgc's coded tensors %s (%s)" % (self.group_keys()[group], what)

    def finish(self, dests):
        step, phase, mode, rank = self.schedule.step, self.installed, self.mode(), self.transport.rank
        leader, W = self.leader(), self.transport.num_workers
        self.transport.wait(["mxgc.lgc.%d.%s" % (s, what) for s in range(len(self.groups))
                                     for what in (("vector",) if mode == AE_TRAIN else ("code", "innov"))])
        for g, (index, out) in zip(self.groups, self._gathered):
            kind = "VECTOR" if mode == AE_TRAIN else "INNOV"
            words = out[-1].asnumpy().reshape(W, g.fmt.words[kind])
            try:
                if mode == AE_TRAIN:
                    result, mean = g.combiner.combine_train(step, leader, index, list(words), learn=rank == 0), None
                else:
                    start = time.perf_counter()
                    result, mean = g.combiner.combine_mean(step, leader, index, out[0].asnumpy(), list(words))
                    g.coder.network_seconds += time.perf_counter() - start
            except CorruptMessage as e:
                raise RuntimeError("mxnet_gc horovod store: lgc step %d of the coded tensors: %s" % (step, e)) from None
            self.apply(g, dests, g.coder.finish(mode, g.fmt.read("RESULT", result, step), mean))
        self._gathered = None
        if phase == LGC and mode == AE_TRAIN:  # fine-tuned: rank 0's new weights
            self._share_autoencoder()
        self.end_step()

    def _index(self, g, words, step, leader):
        """The step's INDEX fields: the leader's broadcast, or with index 'union' drawn from the gathered
        candidates (every worker draws the same)."""
        try:
            if self.sends_candidates():
                words = g.combiner.draw_index(step, leader, list(words.reshape(self.transport.num_workers, -1)))
            return g.fmt.read("INDEX", words, step)
        except CorruptMessage as e:
            whose = "the workers' candidates" if self.sends_candidates() else "the leader's INDEX"
            raise RuntimeError("mxnet_gc horovod store: lgc step %d: %s: %s" % (step, whose, e)) from None

    def sends_candidates(self):
        """With index 'union' every step's indices go first on a ring: every worker sends candidates."""
        return self.options.index == "union"

    # ---- phase switches (collective) ----

    def _install(self, phase, state_path):
        self.host.agree("lgc_phase", {"lgc_phase": phase, "step": self.schedule.step, **self.options.config})
        for s, g in enumerate(self.groups):
            if g.combiner is None:  # new groups (the train phase, or a resume)
                g.combiner = Combiner(g.fmt, self.options, overlap=False)
            if state_path is not None:  # the autoencoder of the checkpoint (every worker reads rank 0's)
                g.combiner.load("%s.lgc%d" % (state_path, s), self.schedule.step)
        if phase == LGC:
            self._share_autoencoder()

    def _share_autoencoder(self):
        """Rank 0's autoencoder weights to every worker (a broadcast), for its coder and combiner."""
        ring = self.transport
        for s, g in enumerate(self.groups):
            name, what = self._named(s, "weights")
            weights = ring.broadcast(name, what, _mx.array(g.combiner.weights()))
            ring.wait([name])
            weights = weights.asnumpy()
            g.coder.set_autoencoder(g.combiner.ae, weights)
            copies = ring.num_workers - 1 if ring.rank == 0 else 1  # the root sends one to each
            self.autoencoder_bytes += 4 * weights.size * copies

    # ---- checkpoints ----

    def save_states(self, path):
        """Rank 0 writes each group's autoencoder state to ``path.lgc<g>``."""
        if self.transport.rank == 0 and self._has_states():
            for s, g in enumerate(self.groups):
                g.combiner.save("%s.lgc%d" % (path, s), self.schedule.step)
