"""The worker side of the compressed dist store: MXNet's kvstore API over ps-lite, with mxnet_gc codecs.

``DistSyncStore`` behaves like MXNet's 'dist_sync' store with gradient compression: every worker
encodes its gradient with its own residual and pushes only the payload; the servers decode every
worker's payload and sum; a pull returns that sum in float32 (or, with ``set_optimizer``, the weight
the servers updated with it).  The protocol is in docs/kvstore.md and mxnet_gc/kvstore/protocol.py.
"""
import weakref

import mxnet as mx
import numpy as np
from mxnet.kvstore import KVStoreBase

from ... import _mx, config, log
from .. import agreement
from ..base import StoreBase
from ..failure import exit_at_once_on_error
from ..compression import Compression
from ..layout import Layout
from .lgc_ps import PSRounds
from .optimizer_calls import ServerOptimizerCalls
from .staged_pulls import StagedPulls
from .ps_buffers import MessageBuffers
from .ps_port import PSPort
from .pull_stages import PULL_STAGES, PushQueue, stage_min_bytes
from . import weight_pulls


def _end_job(port, end_line):
    """At exit (or when the store is freed): this worker's part of the job's end (MXNet's last barrier),
    then, under mxnet_gc's launcher, the line that tells it this worker ended with the job."""
    port.end_job()
    if end_line:
        print(end_line, flush=True)



class DistSyncStore(StagedPulls, ServerOptimizerCalls, StoreBase):
    """A dist_sync kvstore whose pushes can be compressed by mxnet_gc's codecs.

    Start the processes with mxnet_gc's launcher (``python -m mxnet_gc.launch``).  A tensor of at least MXNET_GC_BIGARRAY_BOUND values
    (mxnet_gc/config.py) is cut into parts of at most that many values, as many on every server (and a large tensor further, for
    the pull's stages: layout.py).  Keys initialized with ``groups`` share
    one message per group (the Gluon trainer's merge policy); they must then be pushed together.
    Pushes beyond a step's first stage go out with the pull (pull_stages.py), or at the latest
    with the next barrier or other collective call (DistAsyncStore sends each push at once).
    """

    def __init__(self):
        super().__init__()
        settings = config.settings()
        if not settings.num_servers:
            from ...launch import HOW_TO_LAUNCH  # (here: `python -m mxnet_gc.launch` runs that module unimported)
            if settings.horovod_size:
                raise RuntimeError("mxnet_gc dist store: this process was started by horovodrun (a ring job), which "
                                   "starts no parameter servers: use kvstore='horovod' under horovodrun, or start "
                                   "this dist_sync script with mxnet_gc's launcher: `%s`" % HOW_TO_LAUNCH)
            raise RuntimeError("mxnet_gc dist store: no DMLC_* environment (this process was not started as a job's "
                               "worker): start the job with mxnet_gc's launcher: `%s`" % HOW_TO_LAUNCH)
        self._port = PSPort(settings.num_servers)
        exit_at_once_on_error()
        log.set_up(self.rank)
        if settings.rank_line:
            print("%s %d" % (settings.rank_line, self._port.rank), flush=True)
        self._num_servers = settings.num_servers
        self._stage_bytes = stage_min_bytes(settings.num_workers)
        self._layout = Layout(self._num_servers, settings.bigarray_bound, (PULL_STAGES, self._stage_bytes))
        self._chunks = self._layout.chunks  # user key -> [Chunk]
        self._buffers = MessageBuffers(self._port)
        self._pushed = []  # (message, payload array) pushed since the last synchronisation
        self._pulled = []  # arrays whose pulls the next push waits for
        self._decoding = []  # message plans whose decodes the next push checks
        self._tokens = {}  # user key -> a one-value array written after its pull
        self._staging = {}  # user key -> a private array that pulls of weights land in (see pull)
        self._optimizer_on_servers = False
        self._pulled_rounds = {}  # Message -> its pushes when its weights' difference was last pulled
        self._port.connect()
        self._queue = PushQueue(self._port, self._buffers, self._stage_bytes)
        weakref.finalize(self, _end_job, self._port, settings.end_line)
        self.agree("settings", settings.shared())
        if self.asynchronous:
            self._port.stop_counting_rounds()
            self._port.command("asynchronous")
            self._port.synchronize()

    asynchronous = False  # DistAsyncStore: each push applied at once, no barrier

    # ---- the KVStoreBase interface ----

    @property
    def type(self):
        return "gc_dist_sync"  # (Gluon and MXNet's Module look for 'dist' and '_sync' in it)

    @property
    def rank(self):
        return self._port.rank

    @property
    def num_workers(self):
        return self._port.num_workers

    @property
    def num_servers(self):
        return self._num_servers

    @property
    def transport(self):
        """The servers' port (ps_port.py), which LGC's rounds send through."""
        return self._port

    lgc_rounds = PSRounds

    @staticmethod
    def is_capable(capability):
        if capability.lower() == KVStoreBase.OPTIMIZER:
            return True
        raise ValueError("Unknown capability: {}".format(capability))

    def set_gradient_compression(self, compression_params):
        """Selects the compression of every later push; a collective call (every worker, same params).

        Raises ValueError before any traffic for an unknown type or bad parameters, and on every
        worker when the workers' parameters differ.
        """
        compression = Compression(compression_params, self.num_workers, pulls_compressed=not self.asynchronous)
        if self.asynchronous and (compression.compressed_pull or compression.needs_workers_optimizer):
            raise ValueError("dist_async sends weights back, not gradients: 'compressed_pull' and 'lgc' need "
                             "dist_sync with the optimizer on the workers")
        if self._optimizer_on_servers:
            compression = weight_pulls.applied(compression, self.asynchronous)
        if compression.needs_workers_optimizer and self._optimizer_on_servers:
            raise ValueError("'lgc' needs the optimizer on the workers (update_on_kvstore=False)")
        self._method.check_replaceable()
        self.agree("compression", compression.config)
        if compression.is_mxnet and compression.type == "2bit":
            self._port.set_mxnet_compression(compression.config)
        elif self._compression.is_mxnet and self._compression.type == "2bit":
            raise ValueError("MXNet's built-in 2bit cannot be switched off once set; create a new store")
        self._compression = compression
        self._clock.set_compression(compression)
        self._set_method(compression)
        self._assign_codecs(self._layout.messages)

    def agree(self, what, config):
        """Raises on every worker, saying how they differ, unless all workers call this with the same
        ``config`` (a collective; ``what``: one of agreement.SUBJECTS)."""
        self._send(everything=True)
        self._port.agree(what, config)

    def init(self, key, value, reduce_only=False, groups=None):
        """Initializes keys with rank 0's values (a collective call, like MXNet's init).

        ``groups``: lists of the keys, each sent as one message (a merge plan, mxnet_gc/merge_planner.py).

        ``reduce_only=True``: these keys are pushed dense whatever the compression and pulls return
        the exact sum, never an optimizer's update (for statistics, such as the trainer's calibration).
        """
        keys, values, groups = self._init_arguments(key, value, reduce_only, groups)
        groups = self._method_groups(keys, [v.shape for v in values], groups, reduce_only)
        messages = self._layout.add(keys, [v.shape for v in values], groups, self.payload_per_value)
        self._shapes.update((k, v.shape) for k, v in zip(keys, values))
        if reduce_only:
            self._reduce_only.update(keys)
        # A message's value is its chunks' parts, end to end, in a private array (MXNet keeps the array
        # given to init as the key's buffer for later pulls).  Through numpy: an array in MKL-DNN's
        # layout cannot be viewed flat.
        flat = {k: v.asnumpy().ravel() for k, v in zip(keys, values)}
        initial = [mx.nd.array(np.concatenate([flat[c.key][c.begin:c.end] for c in m.chunks])) for m in messages]
        value_keys = self._buffers.place(messages)
        self._port.init(value_keys, initial)
        self._port.register(value_keys, [m.size for m in messages])
        self._assign_codecs(messages)

    def regroup(self, groups):
        """Sends initialized keys as one message per group from now on (a collective call, between steps).

        Each key keeps the workers' codec states (residuals): a part of a key that the new layout cuts at
        other places sends its residual with the key's next push.  The servers' residuals of compressed
        pulls start from zero, as after a resume.  Only without an optimizer on the servers: the new
        messages start from zero values, as a sum does.
        """
        if self._optimizer_on_servers:
            raise ValueError("regroup needs the optimizer on the workers (update_on_kvstore=False)")
        groups = agreement.groups_as_lists(groups)
        self.agree("groups", groups)
        for a in self._pulled:
            a.wait_to_read()
        gone, messages = self._relayout(groups)
        dropped = [self._buffers.drop(m).value_key for m in gone]
        value_keys = self._buffers.place(messages)
        self._port.init(value_keys, [mx.nd.zeros(m.size) for m in messages])
        self._port.register(value_keys, [m.size for m in messages])
        self._assign_codecs(messages, dropped=dropped)

    def wire_bytes(self, codec, n):
        """Bytes one worker sends and receives per step for a key of n values."""
        if codec is None:
            return 8 * n
        pull = codec.pull_codec(self.num_workers).payload_size(n) if self._compression.compressed_pull else n
        return 4 * (codec.payload_size(n) + pull)

    def _before_push(self):
        if self.asynchronous and not self._optimizer_on_servers:
            raise ValueError("dist_async applies each push with the optimizer on the servers: call set_optimizer "
                             "first (Gluon: update_on_kvstore=True)")

    def _payloads(self, messages):
        """Each message's private outgoing buffer, once the last step's pushes and pulls no longer use it."""
        self._check_weight_pulls(messages)
        if self._queue.holds(messages):
            self._send(everything=True)  # (its payload buffer is about to be written again)
        # A pull still in flight must read the value before this push can start a new round: the engine
        # cannot order them (they use different keys), so wait here.
        for a in self._pulled:
            a.wait_to_read()
        self._pulled = []
        for plan in self._decoding:
            plan.raise_engine_error()
        self._decoding = []
        return [self._buffers[m].outgoing(m.coded) for m in messages]

    def _send_messages(self, messages, payloads, priority):
        """Queues the payloads for their pull stages (pull_stages.py); dist_async sends them at once."""
        for m, a in zip(messages, payloads):
            self._queue.add(m, a, priority)
        self._send(everything=self.asynchronous)
        self._pushed += zip(messages, payloads)

    def push_payload(self, message, payload):
        """Pushes a payload made outside the store (a replayed or hand-made one) as ``message``'s, and
        checks the servers' answer to it like the store's own pushes: the next pull raises the error a
        server reports for it."""
        self._port.push(self._buffers.push_key(message), payload)
        self._port.count_round(message.server)
        self._pushed.append((message, payload))

    def _send(self, through=(), everything=False):
        """Hands queued pushes to the transport (pull_stages.PushQueue.send)."""
        self._queue.send(through, everything)

    def barrier(self):
        """Returns when every worker has called it, and this worker's earlier pushes and pulls have been
        answered: a pull (asynchronous, on MXNet's engine) must not reach a server after the barrier, where
        dist_async may already have applied another worker's later push."""
        self._send(everything=True)
        for _, array in self._pushed:
            _mx.wait_to_write(array)
        for array in self._pulled:
            array.wait_to_read()
        self._port.barrier()

    # ---- key layout ----

    def _assign_codecs(self, messages, dropped=()):
        """Gives the chunks of ``messages`` their codecs; makes the buffers and payload keys they need (a
        collective call).  Compressed weight pulls start once their levels are fitted (here, when the
        codecs start after the measuring steps) or restored (load_residuals)."""
        self._send(everything=True)
        pull = self._pulls_compressed(messages)
        self._buffers.allocate(messages, self._give_codecs(messages), pull)
        if self.rank == 0:
            self._port.command("layout", messages=[dict(self._buffers[m].describe(m),
                                                        reduce_only=m.chunks[0].key in self._reduce_only)
                                                   for m in messages], dropped=list(dropped))
        self._port.synchronize()


class DistAsyncStore(DistSyncStore):
    """MXNet's 'dist_async' with mxnet_gc's codecs: the servers decode each worker's push and apply the
    optimizer to it as soon as it arrives; a pull returns the weights as they are then, with no
    barrier (after this worker's own pushes have been applied).  Needs ``set_optimizer`` before the
    first push (Gluon: update_on_kvstore=True)."""

    asynchronous = True

    @property
    def type(self):
        return "gc_dist_async"  # (Gluon looks for 'dist' and 'async' in it)
