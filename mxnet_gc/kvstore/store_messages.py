"""The codecs, error-feedback states and message plans of a store's messages (layout.py's keys, chunks and
messages): which codec each key's pushes take now, the plans that encode and decode a message in one engine
operation, the states kept or owed when the compression changes, and keys moved into new messages."""
import collections

import mxnet as mx
import numpy as np

from .. import schedule
from ..message_plan import MessagePlan

# A message's MessagePlans (message_plan.py): of its pushes, of pulled values (dense float32: the sum or the
# weights), and of compressed pulls (None without).
Plans = collections.namedtuple("Plans", "push values pull")


class StoreMessages:
    """StoreBase's message calls (a part of the class: it reads the store's layout, compression, method,
    clock, plans and owed residuals, set by StoreBase.__init__)."""

    def codec_for(self, key):
        """The codec that encodes ``key``'s pushes, or None when they are dense float32."""
        if key in self._reduce_only or self._clock.schedule.current.sends == schedule.DENSE:
            return None
        return self._method.codec_for(key, self._compression)

    def payload_per_value(self, key):
        """The payload bytes a value of ``key``'s pushes takes once its codec runs (4: dense float32), for the
        layout's cut of large keys into the pull's stages; 0 (no cut) with LGC, whose rounds send their own
        messages, and with a codec whose state is not one value per value (not ``cuttable``: a checkpoint's
        residuals of another cut could not be cut again, residual_file.restore)."""
        if not self._state_per_value():
            return 0
        if key in self._reduce_only or self._compression.codec_type is None:
            return 4.0
        try:
            codec = self._compression.codec_for(key)
        except ValueError:  # 'auto' levels, fitted during the warm-up: its class's bits a value
            return self._compression.codec_class.bits / 8
        return 4.0 * codec.payload_size(1 << 16) / (1 << 16)

    def _state_per_value(self):
        """Whether a chunk's error-feedback state is one value per value (dense, or a ``cuttable`` codec; not
        LGC's), so that it can be cut anew."""
        return self._method.state_per_value(self._compression)

    def chunks_of(self, key):
        """The chunks (layout.py) ``key`` travels in, each with its codec and error-feedback state."""
        return self._layout.chunks[key]

    def start_codecs(self, keys):
        """Gives the messages of ``keys`` their codecs (and states) as ``codec_for`` says now (a
        collective call): for LGC's rounds, whose phases change the codecs."""
        self._assign_codecs(self._layout.messages_of(keys))

    def _encode(self, message, grads, payload, priority):
        """One engine operation: ``message``'s encode of ``grads`` into ``payload``, which also counts
        their non-finite values."""
        counts = None
        if self._nonfinite.counting:
            counts = self._counts.get(message)
            if counts is None:
                counts = self._counts[message] = mx.nd.zeros(len(message.chunks), dtype="float64")
        self._plans[message].push.push_encode([grads[c.key] for c in message.chunks],
                                              [c.residual for c in message.chunks], payload, priority, counts)

    def _give_codecs(self, messages):
        """Gives each chunk of ``messages`` its key's codec and, when coded, an error-feedback state of the
        codec's shape (a chunk keeps a state it has of that shape), and each message its plans; returns
        the messages whose payload size changed."""
        changed = [m for m in messages if m.set_codecs(self.codec_for, self.num_workers, self._weight_pull_codec())]
        for m in messages:
            push = MessagePlan([(c.codec, c.size, c.offset, c.begin, c.payload_offset) for c in m.chunks],
                               drop_nonfinite=self._drops_nonfinite(m))
            self._plans[m] = Plans(
                push, MessagePlan([(None, c.size, c.offset, c.begin, c.offset) for c in m.chunks]) if m.coded else push,
                MessagePlan([(c.pull_codec, c.size, c.offset, c.begin, c.pull_offset) for c in m.chunks])
                if m.coded and self._compression.compressed_pull else None)
            for c in m.chunks:
                shape = None if c.codec is None else c.codec.state_shape(c.shape if c.whole_key else (c.size,))
                if c.residual is not None and c.residual.shape != shape:  # another codec, or none
                    self._owe(c)
                if c.codec is not None and c.residual is None:
                    c.residual = mx.nd.zeros(shape)
        return changed

    def _weight_pull_codec(self):
        """None, or the function (key, codec) -> the codec of a compressed pull of the key's weights'
        differences (the dist store with the optimizer on its servers)."""
        return None

    def _owe(self, chunk):
        """Drops a chunk's error-feedback state that no longer fits its codec (the compression changed) or
        its range (a regroup cut its key elsewhere): the residual (its first values, for every codec), the
        part of the gradient not yet sent, is added to the key's next push instead of being lost."""
        owed = self._owed.setdefault(chunk.key, np.zeros(int(np.prod(self._shapes[chunk.key])), np.float32))
        owed[chunk.begin:chunk.end] += chunk.residual.asnumpy().reshape(-1)[:chunk.size]
        chunk.residual = None

    def _relayout(self, groups):
        """Moves initialized keys into one message per group.  A chunk of the same range as before keeps
        its state; the layout may cut a key at other places than before (a key spread over the least loaded
        servers, or cut for the pull's stages, depends on what was placed before it), and a state whose
        range is gone is owed to the key's next push (``_owe``).  Returns (messages gone, new messages)."""
        keys = [k for g in groups for k in g]
        for k in keys:
            self._check_initialized(k)
        before = {k: self._layout.chunks[k] for k in keys}
        gone = self._layout.remove(keys)
        for m in gone:
            self._plans.pop(m, None)
            self._counts.pop(m, None)
        messages = self._layout.add(keys, [self._shapes[k] for k in keys], groups, self.payload_per_value)
        for k in keys:
            kept = {(c.begin, c.end): c for c in before[k] if c.residual is not None}
            for c in self._layout.chunks[k]:
                old = kept.pop((c.begin, c.end), None)
                c.residual = None if old is None else old.residual
            for old in kept.values():
                self._owe(old)
        return gone, messages
