"""What mxnet_gc's two stores (the parameter server and Horovod) share above their transports."""
import collections

import mxnet as mx
import numpy as np
from mxnet.kvstore import KVStoreBase

from .. import schedule
from ..message_plan import MessagePlan
from ..warmup_notice import WarmupNotice
from . import arguments, method
from .compression import Compression
from .store_arguments import CheckedArguments
from .store_checkpoints import ResidualCheckpoints
from .store_clock import ClockCalls, StoreClock
from .store_monitors import StoreMonitors


# A message's MessagePlans (message_plan.py): of its pushes, of pulled values (dense float32: the sum or the
# weights), and of compressed pulls (None without).
Plans = collections.namedtuple("Plans", "push values pull")

class StoreBase(CheckedArguments, ClockCalls, StoreMonitors, ResidualCheckpoints, KVStoreBase):
    """MXNet's KVStoreBase plus the calls both of mxnet_gc's stores implement the same way: the compression
    method's hooks and the messages' codecs; the arguments' checks (store_arguments.py), the step clock's
    calls (store_clock.py), the monitors (store_monitors.py) and the checkpoints (store_checkpoints.py) are
    parts of it."""

    def __init__(self):
        self._compression = Compression({"type": "none"})
        self._shapes = {}  # user key -> shape
        self._reduce_only = set()  # keys initialized with reduce_only=True
        self._layout = None  # the transport's Layout (layout.py): where each key's chunks travel
        self._plans = {}  # Message -> its Plans
        self._start_monitors()
        self._start_checks()
        self._pull_each_message = False
        self._method = method.CodecMethod()  # the compression's hooks (method.py)
        self._clock = StoreClock(self._compression)  # the step clock (store_clock.py)
        self._warmup_notice = WarmupNotice()  # what rank 0 says of the dense warm-up (warmup_notice.py)
        self._owed = {}  # key -> residual of a codec no longer in use, added to the key's next push (_owe)
        self._weight_changes = None  # the dist store's with the optimizer on its servers (weight_pulls.py)

    @property
    def compression_config(self):
        """The compression in use, as canonical JSON-serializable params."""
        return self._compression.config

    @property
    def lgc(self):
        """Learned gradient compression's rounds (kvstore/lgc_rounds.py: ``schedule``, ``coded`` keys,
        ``autoencoder_weights()``), or None under another compression."""
        return self._method.rounds

    @property
    def transport(self):
        """This worker's connection to the job (transport.py), which a method's own rounds send through."""
        raise NotImplementedError

    lgc_rounds = None  # the transport's LGCRounds class

    # ---- what each transport's store implements, and this class calls ----

    def agree(self, what, config):
        """Raises on every worker unless all pass the same ``config`` (a collective; transport.py)."""
        raise NotImplementedError

    def regroup(self, groups):
        """Sends initialized keys as one message per group from now on (a collective call)."""
        raise NotImplementedError

    def _assign_codecs(self, messages):
        """Gives ``messages`` their codecs (``_give_codecs``) and the transport what they then need."""
        raise NotImplementedError

    # ---- the compression method (method.py): its hooks around the store's messages ----

    def _set_method(self, compression):
        """Installs ``compression``'s method; keys already initialized are regrouped as it needs."""
        self._method = method.create(compression, self.lgc_rounds, self.transport, self)
        keys = [k for k in self._shapes if k not in self._reduce_only]
        groups = self._method.install(keys, [self._shapes[k] for k in keys], self._nonfinite.names,
                                      self._layout.messages) if keys else None
        if groups:
            self.regroup(groups)

    def _method_groups(self, keys, shapes, groups, reduce_only):
        """The merge groups of keys being initialized, as the method needs them."""
        return groups if reduce_only else self._method.init(keys, shapes, groups, self._nonfinite.names)

    def _method_send(self, grads):
        """After a push's messages: the method's own rounds; their non-finite values join the push's counts."""
        counted = self._method.after_push(grads)
        if counted and self._nonfinite.counting:
            self._nonfinite.add(counted)

    def _end_method_step(self, dests):
        """After a pull that ends the method's step: its results into ``dests``; the clock's step ends."""
        self._method.finish(dests)
        self._clock.end_step()

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

    def set_pull_each_message(self, on):
        """Whether a pull returns each message as soon as its round is complete (a pipelined merge plan,
        on the parameter server; Horovod's pulls are per message anyway)."""
        self._pull_each_message = bool(on)

    @property
    def pull_each_message(self):
        return self._pull_each_message

    def average(self, name, values):
        """The mean over the workers of a vector of numbers (a collective call; each ``name`` once)."""
        key = "__mxgc_%s__" % name
        local = mx.nd.array(values)
        self.init(key, mx.nd.zeros(local.shape), reduce_only=True)
        total = mx.nd.zeros(local.shape)
        self.pushpull(key, local, out=total)
        return total.asnumpy() / self.num_workers

    def broadcast(self, key, value, out, priority=0):
        self.init(key, value)
        self.pull(key, out=out, priority=priority)

    def pushpull(self, key, value, out=None, priority=0):
        self.push(key, value, priority=priority)
        self.pull(key, out=value if out is None else out, priority=priority)

    def _gradients(self, key, value):
        """{key: this worker's gradient} of a push (the sum of a key's arrays), checked; reports the last
        push's non-finite values (nonfinite.py)."""
        self._nonfinite.check()
        grads = {}
        for k, arrays in arguments.key_arrays("push", key, value):
            self._check("push", k, arrays)
            grads[k] = arrays[0] if len(arrays) == 1 else mx.nd.add_n(*arrays)
            if k in self._owed:  # a residual left by the last compression (see _owe)
                grads[k] = grads[k] + mx.nd.array(self._owed.pop(k).reshape(self._shapes[k]), ctx=grads[k].context)
        return grads

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

    # ---- messages (layout.py): what both transports send ----

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
        """Drops a chunk's error-feedback state that no longer fits its codec (the compression changed):
        the residual (its first values, for every codec), the part of the gradient not yet sent, is added
        to the key's next push instead of being lost."""
        owed = self._owed.setdefault(chunk.key, np.zeros(int(np.prod(self._shapes[chunk.key])), np.float32))
        owed[chunk.begin:chunk.end] += chunk.residual.asnumpy().reshape(-1)[:chunk.size]
        chunk.residual = None

    def _relayout(self, groups):
        """Moves initialized keys into one message per group; each chunk keeps its state (the chunks are
        the same: splits depend on the size only).  Returns (messages gone, new messages)."""
        keys = [k for g in groups for k in g]
        for k in keys:
            self._check_initialized(k)
        states = {k: [c.residual for c in self._layout.chunks[k]] for k in keys}
        gone = self._layout.remove(keys)
        for m in gone:
            self._plans.pop(m, None)
            self._counts.pop(m, None)
        messages = self._layout.add(keys, [self._shapes[k] for k in keys], groups, self.payload_per_value)
        for k in keys:
            for c, state in zip(self._layout.chunks[k], states[k]):
                c.residual = state
        return gone, messages
