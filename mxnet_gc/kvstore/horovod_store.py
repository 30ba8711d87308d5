"""The Horovod transport: mxnet_gc's codecs and trainer over Horovod's collectives (Gloo), no servers.

``mxnet_gc.kvstore.create('horovod')``, in processes started by ``horovodrun --gloo``.  Each message (one
key, or one merge group of keys, see ``init(groups=)`` and ``regroup``) is one collective per step:

- coded: every worker's payload goes to every worker (``allgather``); each worker decodes the W
  payloads and adds them up in rank order, so all workers hold bit-identical sums;
- uncompressed: ``allreduce`` (sum).

A push returns at once: encode, the collective and the decode are engine operations ordered by their
inputs, so a message goes out as soon as backward has written its gradients.  There is no optimizer
on this store (Gluon: update_on_kvstore=False); workers apply the summed gradients themselves.
Payloads have their codec's fixed size (for 'layerwise_topk': its capacity), so the collectives need
no size exchange.
"""
import json

import mxnet as mx
import numpy as np

from . import arguments, protocol
from .base import StoreBase
from .compression import Compression


class _Message:
    """Keys sent together: their values end to end (dense) or their payloads end to end (coded)."""

    def __init__(self, ident, keys, shapes):
        self.id, self.keys = ident, list(keys)
        self.sizes = [int(np.prod(shapes[k])) for k in keys]
        self.offsets = np.cumsum([0] + self.sizes).tolist()
        self.codecs, self.payload_offsets, self.buffer, self.result = None, None, None, None

    @property
    def coded(self):
        return self.codecs is not None


class HorovodStore(StoreBase):
    """A kvstore whose push and pull are Horovod collectives; the codecs are those of the dist store."""

    def __init__(self):
        super().__init__()
        try:
            import horovod.mxnet as hvd
        except ImportError as e:
            raise RuntimeError("mxnet_gc horovod store: cannot import horovod.mxnet (%s); `make install` builds "
                               "Horovod with MXNet and Gloo" % e) from e
        hvd.init()
        self._hvd = hvd
        self._compression = Compression({"type": "none"})
        self._shapes, self._values, self._residuals = {}, {}, {}
        self._reduce_only = set()
        self._messages, self._message_of = [], {}
        self._next_id = 0

    # ---- the KVStoreBase interface ----

    @property
    def type(self):
        return "gc_horovod"

    @property
    def rank(self):
        return self._hvd.rank()

    @property
    def num_workers(self):
        return self._hvd.size()

    @staticmethod
    def is_capable(capability):
        return False  # no optimizer on the store

    def set_optimizer(self, optimizer):
        raise ValueError("the horovod store has no servers to run an optimizer on; use update_on_kvstore=False")

    def set_gradient_compression(self, compression_params):
        """Selects the codec of later pushes (a collective call: every worker, the same params)."""
        compression = Compression(compression_params)
        if compression.is_mxnet and compression.type == "2bit":
            raise ValueError("MXNet's built-in '2bit' runs only on MXNet's parameter server; use 'gc_2bit'")
        self._check_same("compression", compression.config)
        self._compression = compression
        for m in self._messages:
            self._set_codecs(m)

    def init(self, key, value, reduce_only=False, groups=None):
        """Initializes keys with rank 0's values (broadcast); ``groups``: lists of keys, one message each."""
        pairs = arguments.initial_values(key, value)
        keys = [k for k, _ in pairs]
        for k, v in pairs:
            if k in self._shapes:
                raise ValueError("key %r is already initialized" % (k,))
            self._shapes[k] = v.shape
            self._values[k] = v.copy()
            self._hvd.broadcast_(self._values[k], root_rank=0, name="mxgc.init.%s" % (k,))
        if reduce_only:
            self._reduce_only.update(keys)
        self._add_messages(keys, groups)

    def push(self, key, value, priority=0):
        """Starts each message's collective (after encoding it); returns at once."""
        grads = self._gradients(key, value)
        keys = list(grads)
        for m in self._messages_of(keys):
            missing = [k for k in m.keys if k not in grads]
            if missing:
                raise ValueError("push: keys %s share a message with %s; push them in the same call" % (missing, keys))
            for i, k in enumerate(m.keys):
                if m.coded:
                    words = m.buffer[m.payload_offsets[i]:m.payload_offsets[i + 1]]
                    m.codecs[i].encode(grads[k], self._residuals[k], out=words, validate=False)
                else:
                    grads[k].reshape(-1).copyto(m.buffer[m.offsets[i]:m.offsets[i + 1]])
            name = "mxgc.%d" % m.id
            if m.coded:
                m.result = self._hvd.allgather(m.buffer, name=name, priority=priority)
            else:
                m.result = self._hvd.allreduce(m.buffer, op=self._hvd.Sum, name=name, priority=priority)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Writes each key's sum over the workers of its last push (its initial value before any push)."""
        targets = self._targets(key, out)
        for m in self._messages_of(list(targets)):
            for i, k in enumerate(m.keys):
                if k not in targets:
                    continue
                dest = targets[k][0]
                if m.result is None:
                    self._values[k].copyto(dest)
                elif m.coded:
                    total = m.payload_offsets[-1]
                    for w in range(self.num_workers):  # in rank order: the same sum on every worker
                        base = w * total
                        payload = m.result[base + m.payload_offsets[i]:base + m.payload_offsets[i + 1]]
                        if w == 0:
                            m.codecs[i].decode(payload, dest)
                        else:
                            m.codecs[i].decode_add(payload, dest)
                else:
                    m.result[m.offsets[i]:m.offsets[i + 1]].reshape(self._shapes[k]).copyto(dest)
                for extra in targets[k][1:]:
                    dest.copyto(extra)

    def barrier(self):
        """Returns when every worker has called it."""
        self._hvd.allreduce(mx.nd.zeros(1), name="mxgc.barrier").wait_to_read()

    def regroup(self, groups):
        """Sends initialized keys as one message per group from now on; keeps their codec states."""
        keys = [k for g in groups for k in g]
        for k in keys:
            self._check_initialized(k)
        gone = self._messages_of(keys)
        others = [k for m in gone for k in m.keys if k not in set(keys)]
        if others:
            raise ValueError("keys %s share messages with %s; regroup them together" % (keys, others))
        mx.nd.waitall()  # the old messages' collectives are read by pulls already issued
        self._messages = [m for m in self._messages if m not in gone]
        self._add_messages(keys, groups)

    def wire_bytes(self, codec, n):
        """Bytes one worker's link carries per step for a key of n values (ring collectives)."""
        if codec is None:
            return 8 * n  # a ring allreduce sends and receives about the whole array
        return 4 * codec.payload_size(n) * self.num_workers

    def _residual_items(self):
        return [(k, 0, r) for k, r in self._residuals.items()]

    # ---- messages ----

    def _add_messages(self, keys, groups):
        groups = groups if groups is not None else [[k] for k in keys]
        if sorted(map(str, keys)) != sorted(str(k) for g in groups for k in g):
            raise ValueError("merge groups must hold every key being initialized exactly once")
        for g in groups:
            m = _Message(self._next_id, g, self._shapes)
            self._next_id += 1
            self._messages.append(m)
            for k in g:
                self._message_of[k] = m
            self._set_codecs(m)

    def _set_codecs(self, m):
        codecs = [self.codec_for(k) for k in m.keys]
        if codecs[0] is None:
            m.codecs, m.buffer = None, mx.nd.zeros(m.offsets[-1])
            return
        for k, codec in zip(m.keys, codecs):
            state = self._residuals.get(k)
            if state is None or state.shape != codec.new_residual(self._shapes[k]).shape:
                self._residuals[k] = codec.new_residual(self._shapes[k])
        words = [codec.payload_size(n) for codec, n in zip(codecs, m.sizes)]
        m.codecs, m.payload_offsets = codecs, np.cumsum([0] + words).tolist()
        m.buffer = mx.nd.zeros(m.payload_offsets[-1])

    def _messages_of(self, keys):
        wanted = {id(self._message_of[k]) for k in keys if k in self._message_of}
        for k in keys:
            self._check_initialized(k)
        return [m for m in self._messages if id(m) in wanted]

    def _check_same(self, what, config):
        """Raises ValueError on every worker unless all workers passed the same ``config``."""
        mine = protocol.config_hash(config)
        seen = self._hvd.allgather(mx.nd.array([mine]), name="mxgc.check.%s" % what).asnumpy()
        if not np.all(seen == mine):
            raise ValueError("the workers set different %s settings (this worker: %s)"
                             % (what, json.dumps(config, sort_keys=True)))
