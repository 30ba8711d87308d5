"""What mxnet_gc's two stores (the parameter server and Horovod) share above their transports."""
import mxnet as mx
from mxnet.kvstore import KVStoreBase

from ..warmup_notice import WarmupNotice
from . import arguments, method
from .compression import Compression
from .store_arguments import CheckedArguments
from .store_checkpoints import ResidualCheckpoints
from .store_clock import ClockCalls, StoreClock
from .store_messages import StoreMessages
from .store_monitors import StoreMonitors
from .step_order import StepOrder


class StoreBase(CheckedArguments, ClockCalls, StoreMessages, StoreMonitors, ResidualCheckpoints, KVStoreBase):
    """MXNet's KVStoreBase plus the calls both of mxnet_gc's stores implement the same way: the compression
    method's hooks, push and pull; the arguments' checks (store_arguments.py), the step clock's calls
    (store_clock.py), the messages' codecs (store_messages.py), the monitors (store_monitors.py) and the
    checkpoints (store_checkpoints.py) are parts of it."""

    def __init__(self):
        self._compression = Compression({"type": "none"})
        self._shapes = {}  # user key -> shape
        self._reduce_only = set()  # keys initialized with reduce_only=True
        self._layout = None  # the transport's Layout (layout.py): where each key's chunks travel
        self._plans = {}  # Message -> its Plans (store_messages.py)
        self._start_monitors()
        self._start_checks()
        self._pull_each_message = False
        self._method = method.CodecMethod()  # the compression's hooks (method.py)
        self._clock = StoreClock(self._compression)  # the step clock (store_clock.py)
        self._warmup_notice = WarmupNotice()  # what rank 0 says of the dense warm-up (warmup_notice.py)
        self._owed = {}  # key -> residual of a codec no longer in use, added to the key's next push (_owe)
        self._weight_changes = None  # the dist store's with the optimizer on its servers (weight_pulls.py)
        self._order = StepOrder()  # each key's pushes and pulls paired, step by step (step_order.py)

    asynchronous = False  # (dist_async: each push applied on its own, no rounds to pair)
    # the largest message (bytes of float32 values) the Gluon trainer's default merge fills: on the parameter
    # server each message goes to one server, and 1 MiB spreads a model over them
    message_bytes = 1 << 20

    # ---- push and pull: the same steps on every transport, the transport's in its hooks ----

    def push(self, key, value, priority=0):
        """Sends each key's gradient (summed over the list if several devices give one): the gradients are
        checked, the step clock counts the step, the compression method says which keys travel in the
        store's messages and what they send, each message is encoded by one engine operation into the
        payload the transport sends, and the monitors see what was sent."""
        self._before_push()
        grads = self._gradients(key, value)
        for m in self._layout.messages_of(list(grads)):
            missing = [c.key for c in m.chunks if c.key not in grads]
            if missing:
                raise ValueError("push: keys %s share a message with %s (init's groups, such as the trainer's "
                                 "merge policy); push them in the same call"
                                 % (missing, [k for k in grads if k in {c.key for c in m.chunks}]))
        if not self.asynchronous:  # (a round completes with one push of every worker: step_order.py)
            self._order.push(grads)
        self._count_step(list(grads))
        self._observe_warmup(grads)
        keys, sent = self._method.push(grads, self._reduce_only)
        messages = self._layout.messages_of(keys)
        payloads = self._payloads(messages)
        for m, payload in zip(messages, payloads):
            self._encode(m, sent, payload, priority)
        self._send_messages(messages, payloads, priority)
        self._record_nonfinite(grads, messages)
        self._watch_residuals(keys, grads)
        self._method_send(grads)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Writes each key's value into ``out``: the sum over the workers of their last pushes (or, with an
        optimizer on the servers, the weights), by the transport (``_receive``); the method's own step
        ends with it."""
        targets = self._targets(key, out)
        self._order.pull(targets, needs_push=self._pulls_need_push())
        keys, method_step = self._method.pull(list(targets))
        self._receive(targets, keys, method_step, priority)
        self._order.pulled(targets)

    def _before_push(self):
        """The transport's checks before anything of a push is read (an error a past call left)."""

    def _payloads(self, messages):
        """The arrays the encodes of ``messages`` write into, once the transport no longer reads them."""
        raise NotImplementedError

    def _send_messages(self, messages, payloads, priority):
        """Hands the encoded ``payloads`` of ``messages`` to the transport."""
        raise NotImplementedError

    def _pulls_need_push(self):
        """Whether a pull needs a push of its keys since their last pull (a sum does; weights do not)."""
        return True

    def _receive(self, targets, keys, method_step, priority):
        """The transport's part of a pull: ``keys``' messages into ``targets`` ({key: [arrays]}); with a
        ``method_step`` (method.py's StepEnd), ``_end_method_step`` once the method's results may be read."""
        raise NotImplementedError

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

