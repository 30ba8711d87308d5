"""LGC on the workers, what both transports share: the phases of a run, the coded keys, the
accumulators and checkpoints.  The rounds of a step are the transport's (lgc_ps.py on the parameter
server, lgc_ring.py on Horovod's ring collectives), subclasses of ``LGCRounds``.

LGC's method (lgc_method.py) holds one for the store.  The store's step clock holds LGC's phases (dense,
the sparse ramp, train, lgc; mxnet_gc/lgc/options.py); the rounds mark the end of each step (the
store then advances a clock of its own; a trainer advances its schedule itself) and switch phases at
the first push of a phase's first step, on every worker at the same step (a collective call).  The
dense and sparse phases travel as the store's other compressions do (float32, then 'layerwise_topk' for
the coded tensors); with ``dense_momentum`` what travels dense is DGC's velocity
(lgc/velocities.py).  In the train and lgc phases the coded tensors form groups (one per server holding
any; one on a ring), each with its accumulators (lgc/coder.py) and the transport's rounds.
"""
import numpy as np

from .. import _mx, codecs
from ..lgc.autoencoder import Autoencoder
from ..lgc.coder import GroupCoder
from ..lgc.options import LGCOptions
from ..lgc.velocities import DenseVelocities
from ..lgc.wire import WireFormat
from ..log import logger
from ..schedule import AE_TRAIN, LGC, SPARSE_PREFIX, WARMUP

REPORT_EVERY = 100  # steps between rank 0's reports of its estimates' error


def _mean(values):
    """The mean, or NaN for none (a report without steps of that kind)."""
    return float(np.mean(values)) if len(values) else float("nan")


class Group:
    """One group's coded chunks (one server's), its wire format and accumulators; ``keys`` and
    ``buffers`` (parameter server) or ``combiner`` (ring) are the transport's."""

    def __init__(self, server, chunks, fmt, coder):
        self.server, self.chunks, self.fmt, self.coder = server, chunks, fmt, coder
        self.keys, self.buffers, self.combiner = {}, {}, None


class LGCRounds:
    """The worker side of LGC; the transport's rounds are a subclass's ``push``, ``finish`` and ``_install``,
    which send through ``transport`` (transport.py).  ``host``: the store, of which the rounds call
    ``schedule``, ``chunks_of`` (a key's chunks in the layout), ``start_codecs`` and ``agree`` (which on a
    parameter server first hands over the store's queued pushes)."""

    def __init__(self, transport, host, params):
        self.transport, self.host = transport, host
        self.options = LGCOptions(params)
        self.installed = None  # the phase whose settings are in place
        self.coded = []  # user keys coded by the autoencoder
        self.groups = []
        self.autoencoder_bytes = 0  # the autoencoder's weight transfers through this worker's link
        self.nonfinite = {}  # coded key -> its non-finite gradient values in the last step's accumulation
        self.velocities = DenseVelocities(self.options.momentum)  # (with ``dense_momentum``)
        self._resume = None  # (accumulators, autoencoder state path) of a checkpoint, for the next switch

    @property
    def schedule(self):
        """The store's step clock (its phases are LGC's)."""
        return self.host.schedule

    def choose_coded(self, keys, shapes, names):
        """Picks the coded keys among newly initialized ones (tensors of >= 2 dims, DGC's rule)."""
        self.coded += self.options.coded_keys(keys, shapes, names)

    def codec_for(self, key):
        """The codec of a key's pushes through the store's messages in the installed phase."""
        phase = self.installed
        if key in self.coded and phase is not None and phase.startswith(SPARSE_PREFIX):
            return codecs.create(self.options.sparse_codec(phase))
        return None

    def separate(self, groups):
        """Merge groups with the coded keys each in a message of its own, after the others, in the order
        they were chosen (the keys' canonical order: they travel in LGC's rounds, not in push order)."""
        coded, grouped = set(self.coded), {k for g in groups for k in g}
        out = [[k for k in g if k not in coded] for g in groups]
        return [g for g in out if g] + [[k] for k in self.coded if k in grouped]

    def through_messages(self, keys):
        """The keys of a push or pull that travel in the store's messages in the installed phase."""
        if self.installed in (AE_TRAIN, LGC):
            return [k for k in keys if k not in set(self.coded)]
        return list(keys)

    # ---- a step ----

    def begin_step(self, keys):
        """Called by the store's push: switches phase when a new one starts; returns the phase's name."""
        missing = [k for k in self.coded if k not in keys]
        if missing:
            raise ValueError("lgc codes keys %s together: push every one of them in the same call (the "
                             "mxnet_gc Gluon trainer does); missing %s" % (self.coded, missing))
        phase = self.schedule.current.name
        if phase != self.installed:
            self._switch(phase)
        return phase

    def with_momentum(self, grads, keys):
        """With ``dense_momentum``, what ``keys`` send dense: their velocities (lgc/velocities.py) in place
        of their gradients in ``grads``; the coded keys in the sparse ramp are the codec's.  Their non-finite
        values are then in ``velocities.nonfinite`` (the host's numpy: the push waits for the gradients)."""
        self.velocities.nonfinite = {}
        if not self.options.dense_momentum:
            return grads
        ramp = self.installed is not None and self.installed.startswith(SPARSE_PREFIX)
        out = dict(grads)
        for k in keys:
            if not (ramp and k in self.coded):
                u = self.velocities.step(k, _mx.host_view(grads[k]).reshape(-1))
                out[k] = _mx.array(u.reshape(grads[k].shape))
        return out

    def push(self, grads):
        """Sends this step's LGC messages (train and lgc phases); ``grads``: user key -> NDArray."""
        raise NotImplementedError

    def finish(self, dests):
        """After the store's pull: writes each coded key's update into ``dests`` (key -> NDArray), updates
        the accumulators, ends the step."""
        raise NotImplementedError

    def mode(self):
        """How this step travels: 'train' (exact values at the leader's indices; the autoencoder trains)
        or 'lgc'."""
        return AE_TRAIN if self.options.trains(self.installed, self.schedule.step) else LGC

    def leader(self):
        return self.options.leader_at(self.schedule.step, self.transport.num_workers)

    def sends_candidates(self):
        """Whether every worker sends its candidate indices this step (index 'union'): on the parameter
        server, the steps whose indices go first."""
        return self.options.candidates_first(self.installed, self.schedule.step)

    def accumulate(self, grads):
        """Adds the step's gradients (float32, as the store checks; read in place once backward has written
        them) to every group's accumulators; the step's leader (with index 'union' every worker, on the
        steps whose indices go first) also selects its indices.  ``nonfinite`` then holds the coded keys'
        non-finite gradient values of the step, counted by the same pass."""
        lead = self.transport.rank == self.leader() or self.sends_candidates()
        self.nonfinite = dict.fromkeys(self.coded, 0)
        for g in self.groups:
            dropped = g.coder.accumulate([self._part(_mx.host_view(grads[c.key]), c) for c in g.chunks], lead)
            for c, n in zip(g.chunks, dropped):
                self.nonfinite[c.key] += n

    def apply(self, g, dests, update):
        """Writes a group's updates (per chunk: nonzero coordinates, values) into ``dests`` (float32), in
        place once nothing on the engine uses them: zeros and a scatter, no dense copy."""
        for c, (at, values) in zip(g.chunks, update):
            if c.key in dests:
                _mx.wait_to_write(dests[c.key])
                view = self._part(_mx.host_view(dests[c.key]), c)
                view[:] = 0
                view[at] = values

    def end_step(self):
        """The step's bookkeeping: every REPORT_EVERY steps of the lgc phase rank 0 logs its estimates'
        error and the autoencoder's time."""
        step = self.schedule.step
        if self.installed == LGC and (step + 1) % REPORT_EVERY == 0:
            if self.transport.rank == 0:
                errors = np.array([e for g in self.groups for e in g.coder.errors[-REPORT_EVERY:]]).reshape(-1, 3)
                seconds = sum(g.coder.network_seconds for g in self.groups)
                led = errors[:, 1] > 0
                logger.info("lgc step %d: rank 0's estimates, relative squared error: mean %.3f, median %.3f "
                            "(steps it led, %d: mean %.3f; steps others led: mean %.3f; with the best scale per step: "
                            "mean %.3f); autoencoder on this worker %.2f ms per step (over the last %d steps)", step,
                            np.mean(errors[:, 0]), np.median(errors[:, 0]), led.sum(), _mean(errors[led, 0]),
                            _mean(errors[~led, 0]), np.mean(errors[:, 2]), 1e3 * seconds / REPORT_EVERY,
                            REPORT_EVERY)
            for g in self.groups:
                del g.coder.errors[:]
                g.coder.network_seconds = 0.0

    @staticmethod
    def _part(flat, chunk):
        """A chunk's values in a key's flat numpy view."""
        return flat if chunk.whole_key else flat[chunk.begin:chunk.end]

    # ---- phase switches (collective) ----

    def _switch(self, phase):
        logger.info("lgc step %d: phase %s -> %s", self.schedule.step, self.installed, phase)
        previous, self.installed = self.installed, phase
        resume, self._resume = self._resume, None
        if phase.startswith(SPARSE_PREFIX) or phase == WARMUP:
            self.host.start_codecs(self.coded)
            for k in self.coded:
                dense = self.velocities.take(k)
                for i, c in enumerate(self.host.chunks_of(k)):
                    if c.residual is None:
                        continue
                    name = "%r/%d" % (k, i)
                    if resume is not None and name in resume[0]:  # the codec's state of the checkpoint
                        c.residual[:] = resume[0][name].reshape(c.residual.shape)
                    if dense is not None:  # the dense phase's velocity goes on in the ramp's codec
                        c.residual[c.size:2 * c.size] = _mx.array(dense.reshape(-1)[c.begin:c.begin + c.size])
                    if self.schedule.step == self.schedule.start(phase):  # a new density: the exact threshold
                        c.residual[-2:-1] = 0
            return
        if phase == AE_TRAIN or resume is not None:
            self._make_groups(previous, resume[0] if resume is not None else None)
            for g in self.groups:  # the ramp's codec states now live in the accumulators
                for c in g.chunks:
                    c.residual = None
        self._install(phase, resume[1] if resume is not None else None)

    def _install(self, phase, state_path):
        """The transport's part of a switch to the train or lgc phase; ``state_path``: a checkpoint's
        autoencoder states to resume from (``state_files``), or None."""
        raise NotImplementedError

    def _make_groups(self, previous, saved=None):
        """One group per server holding coded chunks.  The accumulators: a checkpoint's (``saved``), or
        the sparse ramp's residuals and velocities (the codec states: residual, velocity, threshold,
        step), live after a ramp phase or in a checkpoint saved at the ramp's last step; else zeros."""
        by_server = self._chunks_by_server()
        self.groups = []
        for s, server in enumerate(sorted(by_server)):
            chunks = [c for c, _ in by_server[server]]
            fmt = WireFormat([c.size for c in chunks], self.options.density, self.options.innovation_density,
                             self.transport.num_workers, self.options.latent_channels, self.options.signs)
            coder = GroupCoder(fmt, self.options, self.transport.rank)
            if saved is not None and "lgc/%d/v/0" % s in saved:
                v = [saved.get("lgc/%d/v/%d" % (s, c)) for c in range(len(chunks))]
                if any(x is None or x.size != c.size for x, c in zip(v, chunks)) or "lgc/%d/v/%d" % (s, len(chunks)) in saved:
                    raise ValueError("lgc: the checkpoint's accumulators of group %d do not match this job's coded "
                                     "tensors %s (its groups: one per server holding coded tensors)"
                                     % (s, [c.size for c in chunks]))
                coder.load(v, [saved.get("lgc/%d/u/%d" % (s, c)) for c in range(len(chunks))])
            else:
                if previous is not None and previous.startswith(SPARSE_PREFIX):
                    states = [c.residual.asnumpy() for c in chunks]
                elif saved is not None and all(name in saved for _, name in by_server[server]):
                    states = [saved[name] for _, name in by_server[server]]
                else:
                    states = None
                if states is not None:
                    coder.load([st[:c.size] for st, c in zip(states, chunks)],
                               [st[c.size:2 * c.size] if st.size >= 2 * c.size + 2 else None
                                for st, c in zip(states, chunks)])
            self.groups.append(Group(server, chunks, fmt, coder))

    def _chunks_by_server(self):
        """{server: [(coded chunk, its name in checkpoints)]}: the groups' chunks, in vector order."""
        by_server = {}
        for k in self.coded:
            for i, c in enumerate(self.host.chunks_of(k)):
                by_server.setdefault(c.message.server, []).append((c, "%r/%d" % (k, i)))
        return by_server

    def _group_sizes(self):
        """The sizes of each group's chunks (the groups this job's layout makes)."""
        by_server = self._chunks_by_server()
        return [[c.size for c, _ in by_server[s]] for s in sorted(by_server)]

    def _autoencoder(self):
        return Autoencoder(self.transport.num_workers, self.options.encoder_channels, self.options.latent_channels,
                           self.options.seed, self.options.codes == "own")

    def group_keys(self):
        """The coded keys of each group (one per server holding any), in vector order."""
        return [[c.key for c in g.chunks] for g in self.groups]

    def group_parts(self):
        """The coded parts of each group, in vector order: (key, first, end) of the key's flat values (a key
        of at least MXNET_GC_BIGARRAY_BOUND values is cut into parts on several servers)."""
        return [[(c.key, c.begin, c.end) for c in g.chunks] for g in self.groups]

    def autoencoder_weights(self):
        """The autoencoder's weights (encoder, each worker's decoder, the mean decoder; flat) this worker
        holds in the lgc phase, per group (None before)."""
        return [None if g.coder.ae is None else Autoencoder.flat(g.coder.ae.params()) for g in self.groups]

    # ---- checkpoints ----

    def state(self):
        """The arrays (name -> numpy) and numbers a checkpoint keeps of this worker's LGC state."""
        arrays = {}
        for s, g in enumerate(self.groups):
            g.coder.settle()
            for c in range(len(g.fmt.sizes)):
                arrays["lgc/%d/v/%d" % (s, c)] = g.coder.v[c]
                if g.coder.u is not None:
                    arrays["lgc/%d/u/%d" % (s, c)] = g.coder.u[c]
        arrays.update(self.velocities.state())
        return {"step": self.schedule.step, "autoencoder_states": self._has_states(),
                "groups": [list(g.fmt.sizes) for g in self.groups]}, arrays

    def _has_states(self):
        return self.installed in (AE_TRAIN, LGC)

    def state_files(self, path):
        """The autoencoder state files ``save_states(path)`` writes: ``path.lgc<g>`` per group."""
        return ["%s.lgc%d" % (path, s) for s in range(len(self.groups))] if self._has_states() else []

    def save_states(self, path):
        """Writes each group's autoencoder state (weights, Adam's, the replay buffer) to ``path.lgc<g>``
        (a collective call)."""
        raise NotImplementedError

    def load_state(self, meta, arrays, path):
        """Resumes at a checkpoint's step (before its first push): the phase is installed again at the next
        push with the checkpoint's ``arrays`` (the codec states of the coded keys, by "key/chunk", and the
        accumulators, "lgc/...") and, in the train and lgc phases, the autoencoder states saved beside
        ``path`` (rank 0's residual file)."""
        if self.installed is not None:
            raise ValueError("lgc: a checkpoint loads before the first step")
        saved, mine = meta.get("groups"), self._group_sizes()
        if saved and saved != mine:
            raise ValueError("lgc: the checkpoint's coded tensors form %d group(s) of %s values (one group per server "
                             "holding coded tensors; on a ring one), this job's %d of %s: resume on as many servers"
                             % (len(saved), [sum(g) for g in saved], len(mine), [sum(g) for g in mine]))
        self.schedule.step = meta["step"]
        self._resume = (arrays, path if meta["autoencoder_states"] else None)
        self.velocities.load(arrays)
