"""What mxnet_gc's two stores (the parameter server and Horovod) share above their transports."""
import collections
import json
import os

import mxnet as mx
import numpy as np
from mxnet.kvstore import KVStoreBase

from .. import checkpoint_files, log
from .. import schedule
from .. import level_fit
from ..warmup_notice import WarmupNotice
from . import agreement, arguments, residual_file
from .compression import Compression
from ..message_plan import MessagePlan
from .nonfinite import NonFiniteMonitor
from .residual_monitor import ResidualMonitor
from .store_clock import StoreClock


# A message's MessagePlans (message_plan.py): of its pushes, of pulled values (dense float32: the sum or the
# weights), and of compressed pulls (None without).
Plans = collections.namedtuple("Plans", "push values pull")

class StoreBase(KVStoreBase):
    """MXNet's KVStoreBase plus the calls both of mxnet_gc's stores implement the same way."""

    def __init__(self):
        self._compression = Compression({"type": "none"})
        self._shapes = {}  # user key -> shape
        self._reduce_only = set()  # keys initialized with reduce_only=True
        self._layout = None  # the transport's Layout (layout.py): where each key's chunks travel
        self._plans = {}  # Message -> its Plans
        self._counts = {}  # Message -> its pushes' non-finite counts (float64 NDArray, one per chunk)
        self._nonfinite = NonFiniteMonitor()
        self._residuals = ResidualMonitor()
        self._residuals.names = self._nonfinite.names
        self._residuals.describe = lambda k: "; its codec: %s" % json.dumps(self.codec_for(k).config())
        self._residuals.fitted = lambda k: self._compression.fits_levels
        self._pull_each_message = False
        self._lgc = None  # learned gradient compression's rounds, when it is the compression
        self._lgc_step = None  # the LGC phase of a step pushed and not yet pulled
        self._checked = {}  # key -> the arrays last checked for it (see _check)
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
        """Learned gradient compression's state (kvstore/lgc_rounds.py: ``schedule``, ``coded`` keys,
        ``autoencoder_weights()``), or None under another compression."""
        return self._lgc

    # ---- learned gradient compression: what both stores do around the transport's rounds ----

    def _check_compression_replaceable(self):
        if self._lgc is not None and self._lgc.installed is not None:
            raise ValueError("'lgc' cannot be replaced once its first step ran; create a new store")

    def _set_lgc(self, compression, rounds):
        """Installs 'lgc' (``rounds``: the transport's LGCRounds class) or drops it; the keys initialized
        so far: the coded ones each get a message of their own."""
        self._lgc = rounds(self, compression.config) if compression.lgc else None
        if self._lgc is not None and self._shapes:
            keys = [k for k in self._shapes if k not in self._reduce_only]
            self._lgc.choose_coded(keys, [self._shapes[k] for k in keys], self._nonfinite.names)
            mixed = [m for m in self._layout.messages if len({c.key in self._lgc.coded for c in m.chunks}) > 1]
            if mixed:
                self.regroup(self._lgc.separate([list(dict.fromkeys(c.key for c in m.chunks)) for m in mixed]))

    def _lgc_init(self, keys, shapes, groups, reduce_only):
        """Picks the coded keys among keys being initialized; returns the merge groups without them."""
        if self._lgc is None or reduce_only:
            return groups
        self._lgc.choose_coded(keys, shapes, self._nonfinite.names)
        return self._lgc.separate(groups) if groups is not None else None

    def _lgc_push(self, grads):
        """For a push of ``grads`` (key -> NDArray): (the keys that go through the store's messages, what
        they send: with LGC's ``dense_momentum`` the dense keys' velocities); a push of coded keys first switches
        to a new LGC phase."""
        keys = list(grads)
        if self._lgc is None:
            return keys, grads
        if any(k in self._lgc.coded for k in keys):
            self._lgc_step = self._lgc.begin_step(keys)
            keys = self._lgc.through_messages(keys)
        return keys, self._lgc.with_momentum(grads, [k for k in keys if k not in self._reduce_only])

    def _lgc_send(self, grads):
        """A train or lgc step's LGC messages of the coded keys (the store's push, after its messages);
        their non-finite values, counted by the accumulation's pass, join the push's counts, as do those
        of the dense velocities' pass."""
        if self._lgc is None:
            return
        dense = self._lgc.velocities.nonfinite
        counted = [(list(dense), list(dense.values()))]
        if self._lgc_step in (schedule.AE_TRAIN, schedule.LGC):
            self._lgc.push(grads)
            counted.append((list(self._lgc.nonfinite), list(self._lgc.nonfinite.values())))
        if self._nonfinite.counting:
            self._nonfinite.add(counted)

    def _lgc_pull(self, keys):
        """For a pull of ``keys``: (the LGC phase of the step it ends, or None; the keys that go through
        the store's messages)."""
        if self._lgc_step is None or not any(k in self._lgc.coded for k in keys):
            return None, keys
        return self._lgc_step, self._lgc.through_messages(keys)

    def _lgc_finish(self, dests):
        """Ends the pushed step: in the train and lgc phases writes the coded keys' updates into ``dests``."""
        step, self._lgc_step = self._lgc_step, None
        if step in (schedule.AE_TRAIN, schedule.LGC):
            self._lgc.finish(dests)
        else:
            self._lgc.end_step()
        self._clock.end_step()

    # ---- the step clock: what a step sends (mxnet_gc/schedule.py) ----

    @property
    def schedule(self):
        """The step clock (mxnet_gc/schedule.py): its phase says whether pushes are dense or coded.  The
        compression's own phases (its dense warm-up, or LGC's), counted by the store from its pushes, or
        a trainer's schedule (``follow``)."""
        return self._clock.schedule

    @property
    def followed(self):
        """Whether the steps are counted by a trainer's schedule (``follow``) rather than by the store."""
        return self._clock.followed

    def follow(self, schedule):
        """Makes ``schedule`` (mxnet_gc.gluon.Trainer's) the step clock, advanced by its owner after each
        step's pull: its phases replace the compression's dense warm-up; with 'lgc' they are LGC's."""
        self._clock.follow(schedule, self._compression)

    def _count_step(self, keys):
        """Before a push: counts the step on a clock of the store's own; at the end of its dense steps the
        codecs start (a collective call, at the same push on every worker, which push the same keys)."""
        if not self._clock.followed:  # (a trainer's schedule: the trainer says it)
            self._warmup_notice.push(self.rank, self._clock.schedule, self._compression, self._clock.counts)
        if self._clock.push([k for k in keys if k not in self._reduce_only]):
            self._warmup_notice.started(self.rank, self._clock.schedule.step)
            if self._clock.fitter is not None:
                self._fit_levels()
            self._assign_codecs(self._layout.messages)

    def _observe_warmup(self, grads):
        self._clock.observe({k: g for k, g in grads.items() if k not in self._reduce_only})

    def _fit_levels(self):
        """Ends 'thresholds': 'auto''s measurement (a collective call; level_fit.py); logs the table."""
        keys = sorted((k for k in self._shapes if k not in self._reduce_only), key=agreement.key_order)
        levels, table = self._clock.fit(self, keys, [self._nonfinite.names.get(k, str(k)) for k in keys])
        self._compression = self._compression.fitted(levels)
        log.logger.info("%s:\n%s", level_fit.title(self._compression.codec_type, self._compression.fit_steps), table)

    def codec_for(self, key):
        """The codec that encodes ``key``'s pushes, or None when they are dense float32."""
        if key in self._reduce_only or self._clock.schedule.current.sends == schedule.DENSE:
            return None
        return self._lgc.codec_for(key) if self._lgc is not None else self._compression.codec_for(key)

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
        return self._lgc is None and (self._compression.codec_type is None or self._compression.codec_class.cuttable)

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

    def set_nonfinite(self, policy):
        """What a push of NaN or inf gradient values does: 'warn' (default: once per key), 'raise'
        (NonFiniteGradientError at the next push) or 'ignore' (no counting)."""
        self._nonfinite.set_policy(policy)

    def set_key_names(self, names):
        """Names for keys in messages ({key: name}; the Gluon trainer gives parameter names)."""
        self._nonfinite.names.update(names)

    @property
    def nonfinite_counts(self):
        """{key: NaN and inf values pushed so far}, for the keys that had any (counted until the last push
        but one)."""
        return dict(self._nonfinite.counts)

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

    def _record_nonfinite(self, grads, messages):
        """After a push's encodes (``messages``): its non-finite counts, with what the push does with such
        values, to the monitor (every key travels in a message, but LGC's coded keys in its train and lgc
        steps, which its accumulation counts: ``_lgc_send``)."""
        def treatment(k):
            if k in self._reduce_only or self._compression.type == "none":
                return "spread"
            return "mxnet_2bit" if self._compression.is_mxnet else "dropped"
        counted = [([c.key for c in m.chunks], self._counts[m]) for m in messages] if self._nonfinite.counting else []
        self._nonfinite.record(counted, {k: treatment(k) for k in grads})

    def _drops_nonfinite(self, message):
        """Whether a message's dense pushes drop NaN and inf values as its codecs do: under mxnet_gc's
        compressions (their dense warm-up, LGC's dense phase), not uncompressed or under MXNet's 2bit (as
        MXNet) nor for statistics (``reduce_only``)."""
        return not self._compression.is_mxnet and message.chunks[0].key not in self._reduce_only

    @property
    def residual_history(self):
        """{key: [(push number, gradient norm, residual norm)]}: every 10th push of each coded key, the norm
        of this worker's gradient and of its residual after the encode (residual_monitor.py)."""
        return {k: list(rows) for k, rows in self._residuals.history.items()}

    def _watch_residuals(self, keys, grads):
        """After a push's encodes: samples the residual against the gradient of each coded key."""
        for k in keys:
            chunks = self._layout.chunks[k]
            if all(c.codec is not None and c.residual is not None and c.residual.size == c.size for c in chunks):
                self._residuals.sample(k, grads[k], [c.residual for c in chunks])

    def _targets(self, key, out):
        """{key: [output arrays]} of a pull, checked."""
        targets = dict(arguments.pull_targets(key, out))
        for k, t in targets.items():
            self._check("pull", k, t)
        return targets

    def _init_arguments(self, key, value, reduce_only, groups):
        """(keys, initial arrays, groups) of an init call, checked, in the canonical order of agreement.py,
        after every worker has said it initializes the same keys with the same shapes (a collective): the
        stores place keys in that order, so that a key's messages are the same on every worker whatever
        order each lists its keys in."""
        pairs = arguments.initial_values(key, value)
        for k, _ in pairs:
            if k in self._shapes:
                raise ValueError("key %r is already initialized" % (k,))
        pairs.sort(key=lambda p: agreement.key_order(p[0]))
        keys, values = [k for k, _ in pairs], [v for _, v in pairs]
        config = agreement.init_config(keys, [v.shape for v in values], reduce_only, groups)
        self.agree("keys", config)
        return keys, values, config["groups"]

    def _check(self, what, key, arrays):
        """Raises unless ``key`` is initialized and ``arrays`` have its shape and are float32.  The arrays
        passed last for a key are remembered: the same objects again (a trainer's gradients, every step)
        need no check."""
        last = self._checked.get(key)
        if last is not None and len(last) == len(arrays) and all(a is b for a, b in zip(last, arrays)):
            return
        self._check_initialized(key)
        arguments.check_arrays(what, key, arrays, self._shapes[key])
        self._checked[key] = list(arrays)

    def _check_initialized(self, key):
        if key not in self._shapes:
            raise ValueError("key %r is not initialized (call init first)" % (key,))

    def save_residuals(self, fname):
        """Writes this worker's error-feedback state (one array per chunk of a key; with 'lgc' also its
        accumulators and phase) and the compression it belongs to, to ``fname`` (.npz, with
        ``fname.sha256``).  Named by key and chunk, not by message: a store whose keys are grouped into
        other messages (``regroup``) loads them too.  With 'lgc', a collective call: the autoencoders'
        states go beside rank 0's file (``state_files``); on Horovod with 'compressed_pull' too: the
        owners' residuals are gathered whole."""
        arrays = {residual_file.chunk_name(k, i): r.asnumpy() for k, i, r in self._residual_items()}
        arrays.update({residual_file.owed_name(k): owed for k, owed in self._owed.items()})
        meta = {"compression": self._compression.config, "servers": self.num_servers,
                "warmup": self._clock.state_dict()}
        if self._weight_changes is not None:
            meta["weight_changes"] = self._weight_changes.state_dict()
        arrays.update(self._pull_residuals())
        if self._lgc is not None:
            meta["lgc"], lgc_arrays = self._lgc.state()
            arrays.update(lgc_arrays)
        checkpoint_files.write_arrays(fname, meta, arrays)
        if self._lgc is not None:
            self._lgc.save_states(self._state_path(fname))

    def load_residuals(self, fname):
        """Restores what ``save_residuals`` wrote, into a store with the same compression and keys (with
        'lgc', on either transport: a checkpoint of one loads into the other when the groups match), and
        where the store's warm-up was: a fresh 'thresholds': 'auto' store takes the saved levels fitted
        to the gradients.  A collective call when the saved warm-up was over (the codecs start)."""
        meta, saved = checkpoint_files.read_arrays(fname)
        saved_compression = meta["compression"]
        if saved_compression != json.loads(json.dumps(self._compression.config)):
            fitted = self._compression.as_fitted(saved_compression)
            if fitted is None:
                raise ValueError("%s holds residuals of gradient compression %s; this store uses %s"
                                 % (fname, json.dumps(saved_compression, sort_keys=True),
                                    json.dumps(self._compression.config, sort_keys=True)))
            self._compression = fitted
        restarted = self._clock.load_state_dict(meta.get("warmup"))
        if self._weight_changes is not None and meta.get("weight_changes") is not None:
            self._weight_changes.load_state_dict(meta["weight_changes"])
            restarted = restarted or any(m.coded for m in self._layout.messages)  # (their pulls' levels)
        if restarted:
            self._assign_codecs(self._layout.messages)
        residual_file.restore(fname, meta, saved, self._residual_items(), self.num_servers, self._state_per_value())
        self._owed = {k: saved[residual_file.owed_name(k)] for k in self._shapes if residual_file.owed_name(k) in saved}
        self._restore_pull_residuals(saved, fname)
        if self._lgc is not None:
            self._lgc.load_state(meta["lgc"], saved, self._state_path(fname))

    def _pull_residuals(self):
        """{name: array} of the compressed pull's residuals that a worker saves (the Horovod store's owners';
        a parameter server's servers keep theirs, not saved)."""
        return {}

    def _restore_pull_residuals(self, saved, source):
        """Takes ``_pull_residuals``' arrays from ``saved`` (read from ``source``)."""

    def state_files(self, fname):
        """The files ``save_residuals`` writes beside rank 0's residual file ``fname`` (with 'lgc', the
        autoencoders' states; none otherwise)."""
        return self._lgc.state_files(os.path.abspath(fname)) if self._lgc is not None else []

    def _state_path(self, fname):
        """Where the autoencoders' states of this residual file are: beside rank 0's (``fname`` is this
        rank's)."""
        return os.path.abspath(fname).replace(".rank%d." % self.rank, ".rank0.")

    def _residual_items(self):
        """(key, chunk index, residual NDArray) of every chunk that has error-feedback state."""
        return [(k, i, c.residual) for k, cs in self._layout.chunks.items() for i, c in enumerate(cs)
                if c.residual is not None]

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
