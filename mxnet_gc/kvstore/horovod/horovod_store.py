"""The Horovod transport: mxnet_gc's codecs and trainer over Horovod's collectives (Gloo), no servers.

``mxnet_gc.kvstore.create('horovod')``, in processes started by ``horovodrun --gloo``.  Each message (one
key, or one merge group of keys, see ``init(groups=)`` and ``regroup``) is one collective per step:

- coded: every worker's payload goes to every worker (``allgather``); each worker decodes the W
  payloads and adds them up in rank order, so all workers hold bit-identical sums;
- 2bit and 4bit with ``'compressed_pull': True``: the compressed allreduce of ring_scatter.py (an
  ``alltoall`` of the payloads' parts, each part's sum re-encoded by the worker owning it, an
  ``allgather`` of the parts), whose bytes per worker do not grow with W;
- uncompressed: ``allreduce`` (sum).

The encodes, the allreduces and the decodes are engine operations ordered by their inputs, so a message
goes out as soon as backward has written its gradients; Horovod's MXNet allgather and alltoall return
only once complete, so a push of coded messages returns once their collectives have run (a helper
thread makes each wait, within the collective timeout).  There is no optimizer
on this store (Gluon: update_on_kvstore=False); workers apply the summed gradients themselves.
Payloads have their codec's fixed size (for 'layerwise_topk': its capacity), so the collectives need
no size exchange.  Keys, chunks and messages are the dist store's (layout.py), one chunk per key.
With 'lgc', its train and lgc phases send the coded keys by the ring rounds of lgc_ring.py.

Horovod pairs the workers' collectives of a message by name, one per push; the store pairs steps
(step_order.py).  A worker refuses at once a push of a key twice before its pull, a pull without a push
since the last pull, and a regroup or compression change between a push and its pull.  Each payload (or
each owner's part) carries the step its worker pushed it in, and dense values one word per worker: a pull
raises on every worker when a collective paired different steps (a worker skipped a key in a step).
"""
import mxnet as mx

from ... import _mx, config, log
from .. import agreement
from ..base import StoreBase
from ..failure import exit_at_once_on_error
from ..compression import Compression
from .horovod_join import init as join
from ..layout import Layout
from .lgc_ring import RingRounds
from .ring import Ring
from . import ring_scatter
from .ring_scatter import RingScatter, scatters
from ..step_order import RULE

NO_SPLIT = 2 ** 62  # a collective carries a key whole
STEPS = 2 ** 24  # step numbers travel as float32 words: modulo this, exact


def _corrupt(message, error):
    """The error of a corrupt part in ``message``'s compressed allreduce."""
    return ValueError("mxnet_gc horovod store: corrupt payload of key(s) %s: %s" % ([c.key for c in message.chunks],
                                                                                  error))


class HorovodStore(StoreBase):
    """A kvstore whose push and pull are Horovod collectives; the codecs and messages are the dist store's."""

    def __init__(self):
        super().__init__()
        settings = config.settings()
        if settings.role and not settings.horovod_size:
            raise RuntimeError("mxnet_gc horovod store: this process was started as a parameter-server job's %s "
                               "(DMLC_ROLE, by python -m mxnet_gc.launch), where every worker would run Horovod "
                               "alone: start a Horovod script with `horovodrun -np W python your_script.py`, or use "
                               "kvstore='dist_sync' under the launcher" % settings.role)
        try:
            import horovod.mxnet as hvd
        except ImportError as e:
            raise RuntimeError("mxnet_gc horovod store: cannot import horovod.mxnet (%s); `make install` builds "
                               "Horovod with MXNet and Gloo" % e) from e
        join(hvd)
        exit_at_once_on_error()
        self._ring = Ring(hvd, self._describe)
        log.set_up(self.rank)
        self._values = {}
        self._decoding = set()  # message plans of the last pull's decodes
        self._send = {}  # Message -> the array its pushes send (its payload words, or its values when dense)
        self._results = {}  # Message -> its last collective's result
        self._scatter = {}  # Message -> its RingScatter, when it travels by the compressed allreduce
        self._layout = Layout(1, NO_SPLIT)
        # the settings that change which collectives a message makes (agreed before any is made)
        self.agree("settings", {"MXNET_GC_ALLTOALL": settings.alltoall,
                                "MXNET_GC_ALLTOALL_PEERS": settings.alltoall_peers,
                                "MXNET_GC_HOROVOD_MESSAGE_BYTES": settings.horovod_message_bytes})
        # (every message costs collectives of its own, so by default most models travel as one)
        self.message_bytes = settings.horovod_message_bytes

    # ---- the KVStoreBase interface ----

    @property
    def type(self):
        return "gc_horovod"

    @property
    def rank(self):
        return self._ring.rank

    @property
    def num_workers(self):
        return self._ring.num_workers

    num_servers = 0  # (a ring: no servers)

    @staticmethod
    def is_capable(capability):
        return False  # no optimizer on the store

    def set_optimizer(self, optimizer):
        raise ValueError("the horovod store has no servers to run an optimizer on; use update_on_kvstore=False")

    def set_gradient_compression(self, compression_params):
        """Selects the codec of later pushes (a collective call: every worker, the same params)."""
        compression = Compression(compression_params, self.num_workers)
        if compression.is_mxnet and compression.type == "2bit":
            raise ValueError("MXNet's built-in '2bit' runs only on MXNet's parameter server; use 'gc_2bit'")
        self._method.check_replaceable()
        self._order.between_steps("set_gradient_compression")
        self.agree("compression", compression.config)
        self._compression = compression
        self._clock.set_compression(compression)
        self._set_method(compression)
        self._assign_codecs(self._layout.messages)

    def init(self, key, value, reduce_only=False, groups=None):
        """Initializes keys with rank 0's values (broadcast); ``groups``: lists of keys, one message each."""
        keys, values, groups = self._init_arguments(key, value, reduce_only, groups)
        groups = self._method_groups(keys, [v.shape for v in values], groups, reduce_only)
        messages = self._layout.add(keys, [v.shape for v in values], groups)
        for k, v in zip(keys, values):
            self._shapes[k] = v.shape
            self._values[k] = v.copy()
            self._ring.broadcast_into(_init_name(k), "the init of key %r" % (k,), self._values[k])
        if reduce_only:
            self._reduce_only.update(keys)
        self._assign_codecs(messages)
        self._ring.wait([_init_name(k) for k in keys])

    def _before_push(self):
        for plan in self._decoding:  # a corrupt payload of the last pull, once its decode has run
            plan.raise_engine_error()
        self._decoding = set()

    def _payloads(self, messages):
        return [self._send[m] for m in messages]

    def _send_messages(self, messages, payloads, priority):
        """Starts each message's collective (the encodes are engine operations: those of later messages run
        during the collectives); returns at once."""
        step = self._order.step % STEPS
        # the compressed allreduce: every message's alltoall (each owner's sum runs on the engine during the
        # next one's), then every message's allgather
        parts = {m: self._scatter_parts(m, priority, step) for m in messages if m in self._scatter}
        for m, part in parts.items():
            self._results[m] = self._gather_parts(m, part, priority)
        for m, send in zip(messages, payloads):
            if m in self._scatter:
                continue
            at = m.payload_words if m.coded else m.size + self.rank  # (this worker's step word)
            send[at:at + 1] = step
            collective = self._ring.allgather if m.coded else self._ring.allreduce
            self._results[m] = collective(self._name(m), "key(s) %s" % [c.key for c in m.chunks], send, priority)

    def _receive(self, targets, keys, method_step, priority):
        """Each key's sum over the workers of its last push (its initial value before any push), decoded
        from its message's collective."""
        messages = self._layout.messages_of(keys)
        for m in messages:
            result = self._results.get(m)
            outputs = [targets[c.key][0] if c.key in targets else None for c in m.chunks]
            if result is None:
                for c, dest in zip(m.chunks, outputs):
                    if dest is not None:
                        self._values[c.key].copyto(dest)
            elif m in self._scatter:  # every owner's re-encoded part of the sum
                scatter = self._scatter[m]
                scatter.pull_plan.push_decode(result, [targets[k][0] if k in targets else None for k in scatter.pull_keys],
                                              priority=priority)
                self._decoding.add(scatter.pull_plan)
            elif m.coded:  # the workers' payloads summed in rank order: the same sum on every worker
                self._plans[m].push.push_decode(result, outputs, priority=priority, count=self.num_workers,
                                                stride=m.payload_words + 1)
                self._decoding.add(self._plans[m].push)
            else:
                self._plans[m].values.push_decode(result, outputs, priority=priority)
            for c in m.chunks:
                for extra in targets.get(c.key, [])[1:]:
                    targets[c.key][0].copyto(extra)
        self._ring.wait([self._name(m) for m in messages])  # (after the decodes are queued behind them)
        for m in messages:
            self._check_steps(m)
        if method_step is not None:
            self._end_method_step({k: t[0] for k, t in targets.items()})
            if method_step.rounds:
                for k in set(targets) - set(keys):
                    for extra in targets[k][1:]:
                        targets[k][0].copyto(extra)

    def _scatter_parts(self, m, priority, step):
        """The first half of message ``m``'s compressed allreduce (ring_scatter.py): the alltoall of its
        payload's parts; returns this worker's part of their sum, re-encoded and followed by ``step``, on
        the engine (written once the engine has run it)."""
        scatter, send, name = self._scatter[m], self._send[m], self._name(m) + ".parts"
        what = "key(s) %s (the alltoall of their parts)" % [c.key for c in m.chunks]
        if scatter.pairwise:
            received = _mx.array(self._ring.alltoall_in_rounds(name, what, send, scatter.splits, priority))
        else:
            received = self._ring.alltoall(name, what, send, scatter.splits, priority)
        try:
            return scatter.push_reduce(received, step, priority)
        except ValueError as e:
            raise _corrupt(m, e) from None

    def _gather_parts(self, m, part, priority):
        """The second half: once this worker's ``part`` is summed (and no part was corrupt), the allgather
        of every owner's; returns its output."""
        scatter, name = self._scatter[m], self._name(m)
        part.wait_to_read()
        try:
            scatter.check_reduced()
        except ValueError as e:
            raise _corrupt(m, e) from None
        return self._ring.allgather(name, "key(s) %s (the allgather of the summed parts)" % [c.key for c in m.chunks],
                                    part, priority)

    def _check_steps(self, m):
        """Raises RuntimeError unless message ``m``'s last collective (complete) paired the same step of
        every worker: each worker's step word, after each payload (or each owner's part), or in a dense
        message's word of that worker."""
        result = self._results.get(m)
        if result is None:
            return
        words, workers = _mx.host_view(result), self.num_workers
        if m in self._scatter:
            at = self._scatter[m].step_words
        elif m.coded:
            at = [(m.payload_words + 1) * (r + 1) - 1 for r in range(workers)]
        else:
            at = [m.size + r for r in range(workers)]
        steps = [int(s) for s in words[at]]
        if len(set(steps)) > 1:
            raise RuntimeError("mxnet_gc horovod store: the collective of key(s) %s paired different steps of the "
                               "workers (%s): a worker skipped these keys in a step, or pushed them in another "
                               "step than the others; %s" % ([c.key for c in m.chunks], ", ".join(
                                   "rank %d: step %d" % (r, s) for r, s in enumerate(steps)), RULE))

    def barrier(self):
        """Returns when every worker has called it."""
        self._ring.barrier()

    @property
    def transport(self):
        """The ring's collectives (ring.py), which LGC's rounds send through."""
        return self._ring

    lgc_rounds = RingRounds

    @staticmethod
    def _name(message):
        return "mxgc.%d" % message.id

    def _describe(self, name):
        """The keys a collective carries (a message's), or its name."""
        for m in self._layout.messages:
            if name == self._name(m) or name.startswith(self._name(m) + ".parts"):  # (the compressed allreduce's
                # alltoall: .parts, or its rounds .parts.i)
                return "key(s) %s" % [c.key for c in m.chunks]
        return name

    def regroup(self, groups):
        """Sends initialized keys as one message per group from now on; keeps their codec states."""
        groups = agreement.groups_as_lists(groups)
        self._order.between_steps("regroup")
        self.agree("groups", groups)
        mx.nd.waitall()  # the old messages' collectives are read by pulls already issued
        owners = self._pull_residuals()  # (the new messages' parts have other owners)
        gone, messages = self._relayout(groups)
        for m in gone:
            self._send.pop(m, None)
            self._results.pop(m, None)
            self._scatter.pop(m, None)
        self._assign_codecs(messages)
        if owners:
            self._restore_pull_residuals(owners, "regroup")

    def wire_bytes(self, codec, n):
        """Bytes one worker's link carries per step for a key of n values (ring collectives)."""
        if codec is None:
            return 8 * n  # a ring allreduce sends and receives about the whole array
        if self._compression.compressed_pull and codec.cuttable:
            # the compressed allreduce (ring_scatter.py): (W-1)/W of the pushed payload and of the pulled one,
            # each sent and received
            words = codec.payload_size(n) + codec.pull_codec(self.num_workers).payload_size(n)
            return 8 * words * (self.num_workers - 1) // self.num_workers
        return 4 * codec.payload_size(n) * self.num_workers

    def _pull_residuals(self):
        return ring_scatter.gather_owner_residuals(self._ring, self._scatter)

    def _restore_pull_residuals(self, saved, source):
        ring_scatter.restore_owner_residuals(self._scatter, saved, source, self.rank)

    # ---- messages ----

    def _assign_codecs(self, messages):
        """Codecs, states and plans for the chunks of ``messages``, and each message's send buffer: its
        payload words then this worker's step, or its values then one step word per worker when dense
        (the others 0: the allreduce sums every worker's into its own word); by the compressed allreduce,
        its payload words alone (the owners' parts carry the step)."""
        self._give_codecs(messages)
        for m in messages:
            self._results.pop(m, None)
            self._scatter.pop(m, None)
            if self._compression.compressed_pull and scatters(m):
                self._scatter[m] = RingScatter(m, self.num_workers, self.rank,
                                               rounds=config.settings().alltoall == "rounds")
            if not m.coded:
                words = m.size + self.num_workers
            else:
                words = m.payload_words if m in self._scatter else m.payload_words + 1
            self._send[m] = mx.nd.zeros(words)

    def agree(self, what, config):
        """Raises ValueError on every worker, saying how they differ, unless all workers pass the same
        ``config`` (a collective; ``what``: one of agreement.SUBJECTS)."""
        self._ring.agree(what, config)


def _init_name(key):
    """The name of a key's init broadcast: int 3 and str '3' are different keys."""
    return "mxgc.init.%s.%s" % (type(key).__name__, key)
