"""LGC on the parameter server, the workers' side: the phases of a run and each step's rounds.

The dist store hands this object its 'lgc' compression.  It owns the run's schedule (dense, the sparse
ramp, train, lgc; mxnet_gc/lgc/options.py) and switches phases at the first push of a phase's first
step, on every worker at the same step (a collective call, checked by the servers).  The dense and
sparse phases travel as the store's other compressions do (float32, then 'layerwise_topk' for the
coded tensors).  In the train and lgc phases the coded tensors of each server form one group with four
keys on that server: 'lead' and 'all' (pushes), 'index' and 'result' (values workers pull):

    train: the leader pushes INDEX to 'lead'; barrier; every worker pulls 'index', pushes VECTOR to
           'all'; barrier (the store's pull); every worker pulls 'result'.
    lgc:   the leader pushes LEAD to 'lead', every worker INNOV to 'all'; barrier; pull 'result'.

Each step counts two rounds on every group's server (the 'lead' and 'all' rounds).  At the switch to
the lgc phase every worker pulls the autoencoder's weights from each server ('weights', counted).
With ``fine_tune_every``, the lgc phase's fine-tuning steps run as train steps through two more push
keys ('tune_lead', 'tune_all') and 'index'; after each the workers pull the new weights.
"""
import mxnet as mx
import numpy as np

from .. import codecs
from ..lgc.autoencoder import Autoencoder
from ..lgc.coder import GroupCoder
from ..lgc.options import LGCOptions
from ..lgc.wire import WireFormat
from ..schedule import Schedule
from .server_link import wait_to_write

REPORT_EVERY = 100  # steps between rank 0's reports of its estimates' error


class Group:
    """One server's coded chunks, their coder and their keys."""

    def __init__(self, server, chunks, fmt, coder):
        self.server, self.chunks, self.fmt, self.coder = server, chunks, fmt, coder
        self.keys = {}
        self.buffers = {}


class LGCRounds:
    """The worker side of LGC for a DistSyncStore ``store`` (which it reads and drives)."""

    def __init__(self, store, params):
        self.store = store
        self.options = LGCOptions(params)
        self.schedule = Schedule(self.options.phases())
        self.installed = None  # the phase whose settings are in place
        self.coded = []  # user keys coded by the autoencoder
        self.groups = []
        self.autoencoder_bytes = 0  # one-time weight transfers, pulled by this worker
        self._resume = None  # (accumulators, servers' state file) of a checkpoint, for the next switch

    def choose_coded(self, keys, shapes, names):
        """Picks the coded keys among newly initialized ones (tensors of >= 2 dims, DGC's rule)."""
        self.coded += self.options.coded_keys(keys, shapes, names)

    def codec_for(self, key):
        """The codec of a key's pushes through the store's messages in the installed phase."""
        phase = self.installed
        if key in self.coded and phase is not None and phase.startswith("sparse-"):
            return codecs.create(self.options.sparse_codec(phase))
        return None

    def separate(self, groups):
        """Merge groups with the coded keys each in a message of its own."""
        coded = set(self.coded)
        out = [[k for k in g if k not in coded] for g in groups]
        return [g for g in out if g] + [[k] for g in groups for k in g if k in coded]

    def through_messages(self, keys):
        """The keys of a push or pull that travel in the store's messages in the installed phase."""
        if self.installed in ("train", "lgc"):
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

    def push(self, grads):
        """Sends this step's LGC messages (train and lgc phases); ``grads``: user key -> NDArray."""
        step, phase, kv = self.schedule.step, self.installed, self.store._kv
        leader = self.options.leader_at(step, self.store.num_workers)
        for g in self.groups:
            g.coder.accumulate([self._part(grads[c.key], c).asnumpy() for c in g.chunks])
        lead = self.store.rank == leader
        if self._mode() == "train":
            keys = ("lead", "all") if phase == "train" else ("tune_lead", "tune_all")
            if lead:
                self._send([(g, keys[0], g.coder.index_message(step)) for g in self.groups])
            kv._barrier()
            kv.pull([g.keys["index"] for g in self.groups], out=[g.buffers["index"] for g in self.groups])
            messages = []
            for g in self.groups:
                indices = g.fmt.read("INDEX", g.buffers["index"].asnumpy(), step)["indices"]
                messages.append((g, keys[1], g.coder.vector_message(step, indices)))
            self._send(messages)
        else:
            messages = [(g, "lead", g.coder.lead_message(step)) for g in self.groups] if lead else []
            self._send(messages + [(g, "all", g.coder.innov_message(step)) for g in self.groups])
        for g in self.groups:
            self.store._link.rounds_pushed[g.server] += 2

    def _mode(self):
        """How this step travels: 'train' (exact values at the leader's indices; the servers train) or 'lgc'."""
        return "train" if self.options.trains(self.installed, self.schedule.step) else "lgc"

    def _send(self, messages):
        arrays = []
        for g, name, words in messages:
            g.buffers[name][:] = words
            arrays.append(g.buffers[name])
        self.store._kv.push([g.keys[name] for g, name, _ in messages], arrays)
        for a in arrays:
            wait_to_write(a)

    def pull_keys(self):
        return [g.keys["result"] for g in self.groups], [g.buffers["result"] for g in self.groups]

    def finish(self, dests):
        """After the store pulled the results: writes each coded key's update into ``dests`` (key -> NDArray)
        and updates the accumulators; ends the step."""
        step, phase, mode = self.schedule.step, self.installed, self._mode()
        for g in self.groups:
            result = g.fmt.read("RESULT", g.buffers["result"].asnumpy(), step)
            for c, update in zip(g.chunks, g.coder.finish(mode, result)):
                if c.key in dests:
                    self._part(dests[c.key], c)[:] = update
        if phase == "lgc" and mode == "train":  # fine-tuned: the servers' new weights
            self._fetch_autoencoder()
        if phase == "lgc" and (step + 1) % REPORT_EVERY == 0:
            if self.store.rank == 0:
                errors = [e for g in self.groups for e in g.coder.errors[-REPORT_EVERY:]]
                seconds = sum(g.coder.network_seconds for g in self.groups)
                print("mxnet_gc: lgc step %d: rank 0's estimates, relative squared error: mean %.3f, median %.3f; "
                      "autoencoder on this worker %.2f ms per step (over the last %d steps)"
                      % (step, np.mean(errors), np.median(errors), 1e3 * seconds / REPORT_EVERY, REPORT_EVERY),
                      flush=True)
            for g in self.groups:
                del g.coder.errors[:]
                g.coder.network_seconds = 0.0
        self.end_step()

    def end_step(self):
        self.schedule.advance()

    @staticmethod
    def _part(array, chunk):
        flat = array.reshape(-1)
        return flat if chunk.whole_key else flat[chunk.begin:chunk.end]

    # ---- phase switches (collective) ----

    def _switch(self, phase):
        store = self.store
        if store.rank == 0:
            print("mxnet_gc: lgc step %d: phase %s -> %s" % (self.schedule.step, self.installed, phase), flush=True)
        previous, self.installed = self.installed, phase
        resume, self._resume = self._resume, None
        if phase.startswith("sparse-") or phase == "dense":
            store._assign_codecs(store._layout.messages_of(self.coded))
            for k in self.coded:
                for i, c in enumerate(store._layout.chunks[k]):
                    if c.residual is None:
                        continue
                    name = "%r/%d" % (k, i)
                    if resume is not None and name in resume[0]:  # the codec's state of the checkpoint
                        c.residual[:] = resume[0][name].reshape(c.residual.shape)
                    if self.schedule.step == self.schedule.start(phase):  # a new density: the exact threshold
                        c.residual[-2:-1] = 0
            return
        if phase == "train" or resume is not None:
            self._make_groups(previous, resume[0] if resume is not None else None)
            for g in self.groups:  # the ramp's codec states now live in the accumulators
                for c in g.chunks:
                    c.residual = None
        self._make_keys(phase)
        if resume is not None and resume[1] is not None:  # the servers' autoencoders of the checkpoint
            store._link.command("lgc_load", path=resume[1])
            store._link.synchronize()
        if phase == "lgc":
            self._fetch_autoencoder()

    def _make_groups(self, previous, saved=None):
        """One group per server holding coded chunks.  The accumulators: a checkpoint's (``saved``), or
        the sparse ramp's residuals and velocities (the codec states: residual, velocity, threshold,
        step), live after a ramp phase or in a checkpoint saved at the ramp's last step; else zeros."""
        store = self.store
        by_server = {}
        for k in self.coded:
            for i, c in enumerate(store._layout.chunks[k]):
                by_server.setdefault(c.message.server, []).append((c, "%r/%d" % (k, i)))
        self.groups = []
        for s, server in enumerate(sorted(by_server)):
            chunks = [c for c, _ in by_server[server]]
            fmt = WireFormat([c.size for c in chunks], self.options.density, self.options.innovation_density,
                             store.num_workers, self.options.latent_channels)
            coder = GroupCoder(fmt, self.options, store.rank)
            if saved is not None and "lgc/%d/v/0" % s in saved:
                coder.load([saved["lgc/%d/v/%d" % (s, c)] for c in range(len(chunks))],
                           [saved.get("lgc/%d/u/%d" % (s, c)) for c in range(len(chunks))])
            else:
                if previous is not None and previous.startswith("sparse-"):
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

    def _make_keys(self, phase):
        """New push and value keys on each group's server for ``phase``, told to the servers."""
        store = self.store
        sizes = {"train": {"lead": "INDEX", "all": "VECTOR", "index": "INDEX", "result": "RESULT"},
                 "lgc": {"lead": "LEAD", "all": "INNOV", "result": "RESULT"}}[phase]
        if phase == "lgc" and self.options.fine_tune_every:
            sizes = dict(sizes, tune_lead="INDEX", tune_all="VECTOR", index="INDEX")
        pushing = [n for n in sizes if n in ("lead", "all", "tune_lead", "tune_all")]
        pushes, values = [], []
        for g in self.groups:
            g.keys = {name: store._alloc.on_server(g.server) for name in sizes}
            g.buffers = {name: mx.nd.zeros(g.fmt.words[kind]) for name, kind in sizes.items()}
            pushes += [(g.keys[n], g.fmt.words[sizes[n]]) for n in pushing]
            values += [(g.keys[n], g.fmt.words[sizes[n]]) for n in sizes if n not in pushing]
        if phase == "lgc":
            for g in self.groups:
                g.keys["weights"] = store._alloc.on_server(g.server)
                values.append((g.keys["weights"], self._autoencoder().weight_count()))
        store._kv.init([k for k, _ in pushes], [mx.nd.zeros(n) for _, n in pushes])
        store._kv.init([k for k, _ in values], [mx.nd.zeros(n) for _, n in values])
        store._link.register([k for k, _ in values], [n for _, n in values])
        store._link.command("lgc", phase=phase, step=self.schedule.step, options=self.options.config,
                            num_workers=store.num_workers, groups=[{"server": g.server, "sizes": g.fmt.sizes, "keys": g.keys,
                                     "chunks": [c.id for c in g.chunks]} for g in self.groups])
        store.agree({"lgc_phase": phase, "step": self.schedule.step, **self.options.config})

    def _autoencoder(self):
        return Autoencoder(self.store.num_workers, self.options.encoder_channels, self.options.latent_channels,
                           self.options.seed)

    def _fetch_autoencoder(self):
        kv = self.store._kv
        outs = [mx.nd.zeros(self._autoencoder().weight_count()) for _ in self.groups]
        kv.pull([g.keys["weights"] for g in self.groups], out=outs)
        for g, weights in zip(self.groups, outs):
            g.coder.set_autoencoder(self._autoencoder(), weights.asnumpy())
            self.autoencoder_bytes += 4 * weights.size

    def group_keys(self):
        """The coded keys of each group (one per server holding any), in vector order."""
        return [[c.key for c in g.chunks] for g in self.groups]

    def autoencoder_weights(self):
        """The autoencoder's weights (encoder, then each worker's decoder, flat) this worker received from
        each group's server at the switch to the lgc phase (None before)."""
        return [None if g.coder.ae is None else Autoencoder.flat(g.coder.ae.params()) for g in self.groups]

    # ---- checkpoints ----

    def state(self):
        """The arrays (name -> numpy) and numbers a checkpoint keeps of this worker's LGC state."""
        arrays = {}
        for s, g in enumerate(self.groups):
            for c in range(len(g.fmt.sizes)):
                arrays["lgc/%d/v/%d" % (s, c)] = g.coder.v[c]
                if g.coder.u is not None:
                    arrays["lgc/%d/u/%d" % (s, c)] = g.coder.u[c]
        return {"step": self.schedule.step, "server_states": self.installed in ("train", "lgc")}, arrays

    def save_server_states(self, path):
        """Has each server write its groups' autoencoder state to ``path.server<rank>`` (a collective)."""
        self.store._link.command("lgc_save", path=path)
        self.store._link.synchronize()

    def load_state(self, meta, arrays, path):
        """Resumes at a checkpoint's step (before its first push): the phase is installed again at the next
        push with the checkpoint's ``arrays`` (the codec states of the coded keys, by "key/chunk", and the
        accumulators, "lgc/...") and, in the train and lgc phases, the servers' state saved beside
        ``path`` (rank 0's residual file)."""
        if self.installed is not None:
            raise ValueError("lgc: a checkpoint loads before the first step")
        self.schedule.step = meta["step"]
        self._resume = (arrays, path if meta["server_states"] else None)

