"""The Horovod transport: mxnet_gc's codecs and trainer over Horovod's collectives (Gloo), no servers.

``mxnet_gc.kvstore.create('horovod')``, in processes started by ``horovodrun --gloo``.  Each message (one
key, or one merge group of keys, see ``init(groups=)`` and ``regroup``) is one collective per step:

- coded: every worker's payload goes to every worker (``allgather``); each worker decodes the W
  payloads and adds them up in rank order, so all workers hold bit-identical sums;
- 2bit and 4bit with ``'compressed_pull': True``: the compressed allreduce of ring_scatter.py (an
  ``alltoall`` of the payloads' parts, each part's sum re-encoded by the worker owning it, an
  ``allgather`` of the parts), whose bytes per worker do not grow with W;
- uncompressed: ``allreduce`` (sum).

A push returns at once: encode, the collective and the decode are engine operations ordered by their
inputs, so a message goes out as soon as backward has written its gradients.  There is no optimizer
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
import numpy as np

from ... import _mx, config, log, schedule
from .. import agreement, protocol, residual_file
from ..base import StoreBase
from ..failure import PeerFailure, exit_at_once_on_error
from .collective_wait import CollectiveError
from ..compression import Compression
from .horovod_join import init as join
from ..layout import Layout
from .lgc_ring import RingRounds
from .ring_scatter import RingScatter, scatters
from ..step_order import RULE, StepOrder
from .timed_collectives import TimedCollectives

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
        self._hvd = hvd
        log.set_up(self.rank)
        self._collectives = TimedCollectives(hvd, settings.collective_timeout, self._describe)
        self._order = StepOrder()
        self._values = {}
        self._decoding = set()  # message plans of the last pull's decodes
        self._send = {}  # Message -> the array its pushes send (its payload words, or its values when dense)
        self._results = {}  # Message -> its last collective's result
        self._scatter = {}  # Message -> its RingScatter, when it travels by the compressed allreduce
        self._layout = Layout(1, NO_SPLIT, protocol.KeyAllocator(1))
        # the settings that change which collectives a message makes (agreed before any is made)
        self.agree("settings", {"MXNET_GC_ALLTOALL": settings.alltoall,
                                "MXNET_GC_ALLTOALL_PEERS": settings.alltoall_peers})

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

    num_servers = 0  # (a ring: no servers)

    @property
    def hvd(self):
        """horovod.mxnet: the collectives that rounds start through ``collective``."""
        return self._hvd

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
        self._check_compression_replaceable()
        self._order.between_steps("set_gradient_compression")
        self.agree("compression", compression.config)
        self._compression = compression
        self._clock.set_compression(compression)
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
            name = _init_name(k)
            self.collective(name, "the init of key %r" % (k,),
                            lambda v=self._values[k], n=name: self._hvd.broadcast_(v, root_rank=0, name=n))
        if reduce_only:
            self._reduce_only.update(keys)
        self._assign_codecs(messages)
        self.wait_collectives([_init_name(k) for k in keys])

    def push(self, key, value, priority=0):
        """Starts each message's collective (after encoding it); returns at once."""
        grads = self._gradients(key, value)
        for m in self._layout.messages_of(list(grads)):
            missing = [c.key for c in m.chunks if c.key not in grads]
            if missing:
                raise ValueError("push: keys %s share a message with %s; push them in the same call"
                                 % (missing, list(grads)))
        for plan in self._decoding:  # a corrupt payload of the last pull, once its decode has run
            plan.raise_engine_error()
        self._decoding = set()
        self._order.push(grads)  # (before anything is sent)
        self._count_step(list(grads))
        self._observe_warmup(grads)
        keys, sent = self._lgc_push(grads)
        messages = self._layout.messages_of(keys)
        step = self._order.step % STEPS
        for m in messages:  # (engine operations: the encodes of later messages run during the collectives)
            self._encode(m, sent, self._send[m], priority)
        # the compressed allreduce: every message's alltoall (each owner's sum runs on the engine during the
        # next one's), then every message's allgather
        parts = {m: self._scatter_parts(m, priority, step) for m in messages if m in self._scatter}
        for m, part in parts.items():
            self._results[m] = self._gather_parts(m, part, priority)
        for m in messages:
            if m in self._scatter:
                continue
            send, name = self._send[m], self._name(m)
            at = m.payload_words if m.coded else m.size + self.rank  # (this worker's step word)
            send[at:at + 1] = step
            if m.coded:  # (Horovod's allgather returns once complete: the payloads' sizes could differ)
                start = lambda: self._hvd.allgather(send, name=name, priority=priority)  # noqa: E731
            else:
                start = lambda: self._hvd.allreduce(send, op=self._hvd.Sum, name=name, priority=priority)  # noqa: E731
            self._results[m] = self.collective(name, "key(s) %s" % [c.key for c in m.chunks], start,
                                                  blocking=m.coded)
        self._record_nonfinite(grads, messages)
        self._watch_residuals(keys, grads)
        self._lgc_send(grads)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Writes each key's sum over the workers of its last push (its initial value before any push)."""
        targets = self._targets(key, out)
        self._order.pull(targets, needs_push=True)
        lgc_step, keys = self._lgc_pull(list(targets))
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
        self.wait_collectives([self._name(m) for m in messages])  # (after the decodes are queued behind them)
        for m in messages:
            self._check_steps(m)
        if lgc_step is not None:
            self._lgc_finish({k: t[0] for k, t in targets.items()})
            if lgc_step in (schedule.AE_TRAIN, schedule.LGC):
                for k in set(targets) - set(keys):
                    for extra in targets[k][1:]:
                        targets[k][0].copyto(extra)
        self._order.pulled(targets)

    def _scatter_parts(self, m, priority, step):
        """The first half of message ``m``'s compressed allreduce (ring_scatter.py): the alltoall of its
        payload's parts; returns this worker's part of their sum, re-encoded and followed by ``step``, on
        the engine (written once the engine has run it)."""
        scatter, send, name = self._scatter[m], self._send[m], self._name(m) + ".parts"
        what = "key(s) %s (the alltoall of their parts)" % [c.key for c in m.chunks]
        if scatter.pairwise:
            received = _mx.array(self._exchange_pairwise(scatter, send, name, what, priority))
        else:
            received = self.collective(name, what, lambda: self._hvd.alltoall(
                send, splits=scatter.splits, name=name, priority=priority)[0], blocking=True)
            self.wait_collectives([name])
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
        return self.collective(name, "key(s) %s (the allgather of the summed parts)" % [c.key for c in m.chunks],
                               lambda: self._hvd.allgather(part, name=name, priority=priority), blocking=True)

    def _exchange_pairwise(self, scatter, send, name, what, priority):
        """The alltoall of large parts in rounds of K peers (MXNET_GC_ALLTOALL_PEERS): in round j this
        worker sends its parts for ranks rank + jK + 1 ... rank + (j + 1)K and receives from as many ranks
        below it (one alltoall whose other splits are 0), so each link carries K flows each way (with K = 1
        as in a ring).  Gloo's alltoall sends to every peer at once: W - 1 flows into each link, which
        overflow a switch's queue and lose packets (at 25 Mbit/s with 8 workers, 3 to 9% of them, and twice
        the wire time); each round costs a negotiation of Horovod's.  Returns every worker's part of this
        worker's range, in rank order."""
        rank, workers = self.rank, self.num_workers
        starts = np.cumsum([0] + scatter.splits)
        words = scatter.splits[rank]
        received = np.empty(workers * words, np.float32)
        send.wait_to_read()
        received[rank * words:(rank + 1) * words] = _mx.host_view(send)[starts[rank]:starts[rank + 1]]
        peers = min(config.settings().alltoall_peers, workers - 1)
        for first in range(1, workers, peers):
            offsets = range(first, min(first + peers, workers))
            to = sorted((rank + i) % workers for i in offsets)  # (an alltoall's parts go in rank order)
            sources = sorted((rank - i) % workers for i in offsets)
            splits = [scatter.splits[r] if r in to else 0 for r in range(workers)]
            pieces = [send[int(starts[r]):int(starts[r + 1])] for r in to]
            piece = pieces[0] if len(pieces) == 1 else mx.nd.concat(*pieces, dim=0)
            round_name = "%s.%d" % (name, first)
            out = self.collective(round_name, what, lambda p=piece, sp=splits, n=round_name: self._hvd.alltoall(
                p, splits=sp, name=n, priority=priority)[0], blocking=True)
            self.wait_collectives([round_name])
            host = _mx.host_view(out)
            for k, source in enumerate(sources):
                received[source * words:(source + 1) * words] = host[k * words:(k + 1) * words]
        return received

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
        self.collective("mxgc.barrier", "a barrier", lambda: self._hvd.allreduce(mx.nd.zeros(1), name="mxgc.barrier"))
        self.wait_collectives(["mxgc.barrier"])

    # ---- collectives: every wait has a timeout ----

    @staticmethod
    def _name(message):
        return "mxgc.%d" % message.value_key

    def collective(self, name, what, start, blocking=False):
        """Starts a collective (timed_collectives.py): ``start()`` (a Horovod call) returns its output;
        ``what``: what it carries, for messages; ``blocking``: the call returns once complete."""
        return self._collectives.start(name, what, start, blocking)

    def wait_collectives(self, names):
        """Returns once the collectives ``names`` this worker started have completed, or raises on every
        worker it can reach (after MXNET_GC_COLLECTIVE_TIMEOUT, or when another worker failed)."""
        self._collectives.wait(names)

    def _describe(self, name):
        """The keys a collective carries (a message's), or its name."""
        for m in self._layout.messages:
            if name == self._name(m) or name.startswith(self._name(m) + ".parts"):  # (the compressed allreduce's
                # alltoall: .parts, or its rounds .parts.i)
                return "key(s) %s" % [c.key for c in m.chunks]
        return name

    def regroup(self, groups):
        """Sends initialized keys as one message per group from now on; keeps their codec states."""
        groups = agreement.canonical_groups(groups)
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
        """Every key's residual of the compressed allreduce, whole (the owners' parts, one allgather per
        message: a collective call), named by key: it loads into other messages and other numbers of
        workers."""
        out = {}
        for m in sorted(self._scatter, key=lambda m: m.value_key):
            name = "mxgc.owners.%d" % m.value_key
            part = self._scatter[m].owner_residual
            whole = self.collective(name, "the owners' residuals of key(s) %s" % [c.key for c in m.chunks],
                                    lambda: self._hvd.allgather(part, name=name), blocking=True).asnumpy()
            out.update((residual_file.pull_name(c.key), whole[c.offset:c.offset + c.size]) for c in m.chunks)
        return out

    def _restore_pull_residuals(self, saved, source):
        """Each owner's part of the keys' saved residuals of the compressed allreduce.  Without them (a
        parameter server's checkpoint: its servers' residuals are not saved) the owners start from zero,
        as a resumed parameter server does."""
        for m, scatter in self._scatter.items():
            names = [residual_file.pull_name(c.key) for c in m.chunks]
            if not all(n in saved for n in names):
                log.logger.warning("%s holds no residual of the compressed pull of key(s) %s: their owners start "
                                   "from zero", source, [c.key for c in m.chunks])
                continue
            for n, c in zip(names, m.chunks):
                if saved[n].size != c.size:
                    raise ValueError("%s: the residual of the compressed pull of key %r has %d values, the key %d"
                                     % (source, c.key, saved[n].size, c.size))
            whole = np.concatenate([saved[n].reshape(-1) for n in names])
            scatter.owner_residual[:] = whole[scatter.bounds[self.rank]:scatter.bounds[self.rank + 1]]

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
        ``config`` (a collective: every worker gathers every worker's settings; ``what``: one of
        agreement.SUBJECTS)."""
        try:
            configs = self._collectives.gather_json("mxgc.agree.%s" % what, config)
        except TimeoutError:
            raise RuntimeError("mxnet_gc horovod store: the other workers did not set their %s within %g s "
                               "(MXNET_GC_COLLECTIVE_TIMEOUT)" % (agreement.SUBJECTS[what][0], self._collectives.timeout)) from None
        except CollectiveError as e:
            raise PeerFailure("mxnet_gc horovod store: agreeing on the %s failed: %s; another worker failed or "
                              "ended (its output says why)" % (agreement.SUBJECTS[what][0], e)) from None
        message = agreement.disagreement(what, configs)
        if message is not None:
            raise ValueError("mxnet_gc: %s (this worker is rank %d)" % (message, self.rank))


def _init_name(key):
    """The name of a key's init broadcast: int 3 and str '3' are different keys."""
    return "mxgc.init.%s.%s" % (type(key).__name__, key)
