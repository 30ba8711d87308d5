"""A compressed allreduce of one coded message on the Horovod ring: each worker owns a part of the message.

For the threshold codecs (2bit, 4bit) with ``'compressed_pull': True``, the scheme of the parameter
server's compressed pull with every worker a server of one part:

1. every worker encodes its gradient with its own residual, as for any push (one engine operation);
2. the payload is cut into W parts along the message; an ``alltoall`` gives worker r part r of every
   worker's payload (or, with ``rounds``, large parts in rounds of a few peers each: ``pairwise``);
3. worker r decodes the W parts and sums them in rank order, then re-encodes the sum on the pull levels
   (the push levels times W) with a residual of its own, the owner's (``owner_residual``): two engine
   operations, which run while the store makes the alltoalls of its next messages;
4. one ``allgather`` of the W re-encoded parts, each followed by one word: the step its owner pushed (the
   store checks that every owner's is the same, see step_order.py); every worker decodes the whole sum,
   so all workers hold bit-identical values.

A worker sends about (W-1)/W of its payload in the alltoall and receives as much in the allgather:
2 (W-1)/W n/2 bytes per step for 4bit, constant in W (an allgather of whole payloads: (W-1) n/2).

The parts are cut where a payload word starts, in the pushed payload and in the pulled one (a 4bit word
holds 8 values, a 2bit word 16, 5 words of 5bit pulls 32), so a part of the payload is the payload of
its values: the encode stays the message's own.  Nothing here calls
Horovod; the store runs the collectives (through its Ring, ring.py).
"""
import math

import numpy as np

from ... import _mx
from ...log import logger
from ...message_plan import MessagePlan
from .. import residual_file

# With MXNET_GC_ALLTOALL=rounds, parts of at least this many payload words (64 KiB) go by rounds of
# MXNET_GC_ALLTOALL_PEERS peers (ring.py's alltoall_in_rounds) when W > 2; smaller ones by one alltoall, whose
# few bytes do not overflow a queue and whose one call costs less than the rounds' negotiations.
PAIRWISE_WORDS = 16384


def scatters(message):
    """Whether ``message`` can travel by the compressed allreduce: every chunk's codec cuttable."""
    return message.coded and all(c.codec.cuttable for c in message.chunks)


def pieces_pull(pieces):
    """``pieces`` (per part, as ``RingScatter._pieces``) with the words of the pulled payload: each part's
    pieces end to end, each its pull codec's payload of its values."""
    out = []
    for part in pieces:
        row, word = [], 0
        for c, n, at, key_at, _, _ in part:
            words = c.pull_codec.payload_size(n)
            row.append((c, n, at, key_at, word, words))
            word += words
        out.append(row)
    return out


class RingScatter:
    """The parts of one message among ``num_workers`` workers, and this worker's (``rank``) owner state."""

    def __init__(self, message, num_workers, rank, rounds=False):
        self.num_workers, self.rank = num_workers, rank
        cuts = self._cuts(message, num_workers)
        self.bounds = cuts  # W + 1 value offsets in the message: part r is [bounds[r], bounds[r+1])
        pieces = [self._pieces(message, cuts[r], cuts[r + 1]) for r in range(num_workers)]
        self.splits = [sum(words for *_, words in part) for part in pieces]  # payload words per part
        self.pairwise = rounds and num_workers > 2 and min(self.splits) >= PAIRWISE_WORDS
        pulled = pieces_pull(pieces)
        self.pull_splits = [sum(words for *_, words in part) for part in pulled]  # pulled payload words per part
        mine, mine_pull = pieces[rank], pulled[rank]
        # the owner: the W workers' part, summed; its re-encode on the pull levels
        self.owner_plan = MessagePlan([(c.codec, n, at, 0, word) for c, n, at, _, word, _ in mine]) if mine else None
        self.owner_pull_plan = MessagePlan([(c.pull_codec, n, at, 0, word) for c, n, at, _, word, _ in mine_pull]) \
            if mine else None
        # engine arrays: the owner's residual, the sum, and the re-encoded part followed by the step word;
        # the plans' segments read and write views of them (each segment's values from the view's start)
        size = cuts[rank + 1] - cuts[rank]
        self.owner_residual, self._sum = _mx.array(np.zeros(size)), _mx.array(np.zeros(size))  # (size may be 0)
        self._part = _mx.array(np.zeros(self.pull_splits[rank] + 1))
        self._sums = [self._sum[at:at + n] for _, n, at, *_ in mine]
        self._residuals = [self.owner_residual[at:at + n] for _, n, at, *_ in mine]
        # every worker: the allgathered parts (each with its owner's step word) decoded into the keys
        segments, first, self.step_words = [], 0, []
        for part, words in zip(pulled, self.pull_splits):
            segments += [(c.pull_codec, n, 0, key_at, first + word) for c, n, _, key_at, word, _ in part]
            first += words + 1
            self.step_words.append(first - 1)  # (where each owner's step is in the allgather's output)
        self.pull_plan = MessagePlan(segments)
        self.pull_keys = [c.key for part in pieces for c, *_ in part]  # the key each of its segments writes

    @staticmethod
    def _cuts(message, num_workers):
        """W + 1 offsets, each near r / W of the message and where a payload word of its chunk starts, in
        the pushed payload and in the pulled one."""
        cuts = [0]
        for r in range(1, num_workers):
            target = max(cuts[-1], message.size * r // num_workers)
            chunk = next((c for c in message.chunks if c.offset <= target < c.offset + c.size), None)
            if chunk is None:  # (the end)
                cuts.append(message.size)
                continue
            unit = math.lcm(chunk.codec.word_values, chunk.pull_codec.word_values)
            cuts.append(chunk.offset + (target - chunk.offset) // unit * unit)
        return cuts + [message.size]

    @staticmethod
    def _pieces(message, begin, end):
        """The chunks' pieces in values [begin, end) of the message: (chunk, values, first value in the part,
        first value in the key, first payload word in the part, payload words)."""
        pieces, first_word = [], None
        for c in message.chunks:
            lo, hi = max(begin, c.offset), min(end, c.offset + c.size)
            if lo >= hi:
                continue
            word = c.payload_offset + c.codec.payload_size(lo - c.offset)  # (lo - c.offset: whole words)
            first_word = word if first_word is None else first_word
            pieces.append((c, hi - lo, lo - begin, c.begin + lo - c.offset, word - first_word,
                           c.codec.payload_size(hi - lo)))
        return pieces

    def push_reduce(self, received, step, priority=0):
        """The owner's work, on MXNet's engine: ``received`` (an NDArray) holds every worker's part of this
        worker's range, in rank order; decodes and sums them in rank order, re-encodes the sum on the pull
        levels with the owner's residual and writes ``step``, the number of the store's step
        (float32-exact), after it.  Returns the NDArray (``pull_splits[rank]`` + 1 words) at once, written
        when the engine has run it; ``check_reduced`` then says whether a part was corrupt.  Raises
        ValueError for a ``received`` of the wrong size."""
        words = self.splits[self.rank]
        if received.size != words * self.num_workers:
            raise ValueError("the alltoall brought %d words, not %d workers' parts of %d"
                             % (received.size, self.num_workers, words))
        if self.owner_plan is not None:  # (none: a message of fewer values than W payload words)
            self.owner_plan.push_decode(received, self._sums, priority=priority, count=self.num_workers,
                                        stride=words)
            self.owner_pull_plan.push_encode(self._sums, self._residuals, self._part, priority=priority)
        self._part[self._part.size - 1:] = step
        return self._part

    def check_reduced(self):
        """Raises ValueError for a corrupt part met by the last ``push_reduce`` (once it has run)."""
        if self.owner_plan is not None:
            self.owner_plan.raise_engine_error("part of the alltoall (payload r is rank r's)")


def gather_owner_residuals(ring, scatters_by_message):
    """Every key's residual of the compressed allreduce, whole (the owners' parts of each message's
    RingScatter, one allgather per message through ``ring``: a collective call), named by key
    (residual_file.pull_name): it loads into other messages and other numbers of workers."""
    out = {}
    for m in sorted(scatters_by_message, key=lambda m: m.id):
        part = scatters_by_message[m].owner_residual
        whole = ring.allgather("mxgc.owners.%d" % m.id, "the owners' residuals of key(s) %s"
                               % [c.key for c in m.chunks], part).asnumpy()
        out.update((residual_file.pull_name(c.key), whole[c.offset:c.offset + c.size]) for c in m.chunks)
    return out


def restore_owner_residuals(scatters_by_message, saved, source, rank):
    """Worker ``rank``'s part, as owner, of the keys' saved residuals of the compressed allreduce.  Without
    them (a parameter server's checkpoint: its servers' residuals are not saved) the owners start from
    zero, as a resumed parameter server does."""
    for m, scatter in scatters_by_message.items():
        names = [residual_file.pull_name(c.key) for c in m.chunks]
        if not all(n in saved for n in names):
            logger.warning("%s holds no residual of the compressed pull of key(s) %s: their owners start from "
                           "zero", source, [c.key for c in m.chunks])
            continue
        for n, c in zip(names, m.chunks):
            if saved[n].size != c.size:
                raise ValueError("%s: the residual of the compressed pull of key %r has %d values, the key %d"
                                 % (source, c.key, saved[n].size, c.size))
        whole = np.concatenate([saved[n].reshape(-1) for n in names])
        scatter.owner_residual[:] = whole[scatter.bounds[rank]:scatter.bounds[rank + 1]]
