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
no size exchange.  Keys, chunks and messages are the dist store's (layout.py), one chunk per key.
With 'lgc', its train and lgc phases send the coded keys by the ring rounds of lgc_ring.py.
"""
import json

import mxnet as mx
import numpy as np

from . import agreement, protocol
from .base import StoreBase
from .compression import Compression
from .layout import Layout
from .lgc_ring import RingRounds

NO_SPLIT = 2 ** 62  # a collective carries a key whole


class HorovodStore(StoreBase):
    """A kvstore whose push and pull are Horovod collectives; the codecs and messages are the dist store's."""

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
        self._shapes, self._values = {}, {}
        self._decoding = set()  # message plans of the last pull's decodes
        self._reduce_only = set()
        self._layout = Layout(1, NO_SPLIT, protocol.KeyAllocator(1))

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
        self._check_compression_replaceable()
        self.agree("compression", compression.config)
        self._compression = compression
        self._set_warmup(compression)
        self._set_lgc(compression, RingRounds)
        self._assign_codecs(self._layout.messages)

    def init(self, key, value, reduce_only=False, groups=None):
        """Initializes keys with rank 0's values (broadcast); ``groups``: lists of keys, one message each."""
        keys, values, groups = self._init_arguments(key, value, reduce_only, groups)
        groups = self._lgc_init(keys, [v.shape for v in values], groups, reduce_only)
        messages = self._layout.add(keys, [v.shape for v in values], groups)
        for k, v in zip(keys, values):
            self._shapes[k] = v.shape
            self._values[k] = v.copy()
            self._hvd.broadcast_(self._values[k], root_rank=0, name="mxgc.init.%s" % (k,))
        if reduce_only:
            self._reduce_only.update(keys)
        self._assign_codecs(messages)

    def push(self, key, value, priority=0):
        """Starts each message's collective (after encoding it); returns at once."""
        grads = self._gradients(key, value)
        for plan in self._decoding:  # a corrupt payload of the last pull, once its decode has run
            plan.raise_engine_error()
        self._decoding = set()
        self._count_step(list(grads))
        lgc_phase, keys = self._lgc_push(list(grads))
        for m in self._layout.messages_of(keys):
            missing = [c.key for c in m.chunks if c.key not in grads]
            if missing:
                raise ValueError("push: keys %s share a message with %s; push them in the same call" % (missing, keys))
            m.plan.push_encode([grads[c.key] for c in m.chunks], [c.residual for c in m.chunks], m.buffers["send"],
                               priority)
            name = "mxgc.%d" % m.value_key
            if m.coded:
                m.buffers["result"] = self._hvd.allgather(m.buffers["send"], name=name, priority=priority)
            else:
                m.buffers["result"] = self._hvd.allreduce(m.buffers["send"], op=self._hvd.Sum, name=name,
                                                          priority=priority)
        if lgc_phase in ("train", "lgc"):
            self._lgc.push(grads)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Writes each key's sum over the workers of its last push (its initial value before any push)."""
        targets = self._targets(key, out)
        lgc_step, keys = self._lgc_pull(list(targets))
        for m in self._layout.messages_of(keys):
            result = m.buffers.get("result")
            outputs = [targets[c.key][0] if c.key in targets else None for c in m.chunks]
            if result is None:
                for c, dest in zip(m.chunks, outputs):
                    if dest is not None:
                        self._values[c.key].copyto(dest)
            elif m.coded:  # the workers' payloads summed in rank order: the same sum on every worker
                m.plan.push_decode(result, outputs, priority=priority, count=self.num_workers, stride=m.payload_words)
                self._decoding.add(m.plan)
            else:
                m.values_plan.push_decode(result, outputs, priority=priority)
            for c in m.chunks:
                for extra in targets.get(c.key, [])[1:]:
                    targets[c.key][0].copyto(extra)
        if lgc_step is not None:
            self._lgc_finish({k: t[0] for k, t in targets.items()})
            if lgc_step in ("train", "lgc"):
                for k in set(targets) - set(keys):
                    for extra in targets[k][1:]:
                        targets[k][0].copyto(extra)

    def barrier(self):
        """Returns when every worker has called it."""
        self._hvd.allreduce(mx.nd.zeros(1), name="mxgc.barrier").wait_to_read()

    def regroup(self, groups):
        """Sends initialized keys as one message per group from now on; keeps their codec states."""
        groups = agreement.canonical_groups(groups)
        self.agree("groups", groups)
        mx.nd.waitall()  # the old messages' collectives are read by pulls already issued
        _, messages = self._relayout(groups)
        self._assign_codecs(messages)

    def wire_bytes(self, codec, n):
        """Bytes one worker's link carries per step for a key of n values (ring collectives)."""
        if codec is None:
            return 8 * n  # a ring allreduce sends and receives about the whole array
        return 4 * codec.payload_size(n) * self.num_workers

    # ---- messages ----

    def _assign_codecs(self, messages):
        """Codecs, states and plans for the chunks of ``messages``, and each message's send buffer (its
        payload words, or its values when dense)."""
        self._give_codecs(messages)
        for m in messages:
            m.buffers = {"send": mx.nd.zeros(m.payload_words if m.coded else m.size)}

    def agree(self, what, config):
        """Raises ValueError on every worker, saying how they differ, unless all workers pass the same
        ``config`` (a collective: every worker gathers every worker's settings; ``what``: one of
        agreement.SUBJECTS)."""
        text = np.frombuffer(json.dumps(config, sort_keys=True).encode(), np.uint8).astype(np.float32)
        lengths = self._hvd.allgather(mx.nd.array([text.size]), name="mxgc.agree.length").asnumpy().astype(int)
        gathered = self._hvd.allgather(mx.nd.array(text), name="mxgc.agree.%s" % what).asnumpy()
        ends = np.cumsum(lengths)
        configs = {r: json.loads(bytes(gathered[end - n:end].astype(np.uint8)).decode())
                   for r, (n, end) in enumerate(zip(lengths, ends))}
        message = agreement.disagreement(what, configs)
        if message is not None:
            raise ValueError("mxnet_gc: %s (this worker is rank %d)" % (message, self.rank))
