"""LGC on the parameter server, the workers' rounds (the phases, accumulators and checkpoints are
lgc_rounds.py's; the servers' side is lgc_server.py).

In the train and lgc phases the coded tensors of each server form one group with four keys on that
server: 'lead' and 'all' (pushes), 'index' and 'result' (values workers pull):

    train: the leader pushes INDEX to 'lead'; barrier; every worker pulls 'index', pushes VECTOR to
           'all'; barrier (the store's pull); every worker pulls 'result'.
    lgc:   the leader pushes LEAD to 'lead', every worker INNOV to 'all'; barrier; pull 'result'.
           With codes 'own': as train, every worker pushing CODED (its own vector's code) to 'all'.
    With index 'union' every worker pushes its candidates (CAND) to 'lead' instead of the leader's INDEX;
    the server's 'index' value is the set drawn from them.

Each step counts two rounds on every group's server (the 'lead' and 'all' rounds).  At the switch to
the lgc phase every worker pulls the autoencoder's weights from each server ('weights', counted).
With ``fine_tune_every``, the lgc phase's fine-tuning steps run as train steps through two more push
keys ('tune_lead', 'tune_all') and 'index'; after each the workers pull the new weights.
"""
import mxnet as mx

from ... import _mx
from ...lgc.wire import CorruptMessage
from ...schedule import AE_TRAIN, LGC
from ..lgc_rounds import LGCRounds


class PSRounds(LGCRounds):
    """The worker side of LGC for a DistSyncStore (``transport``: its PSPort)."""

    def __init__(self, transport, host, params):
        super().__init__(transport, host, params)
        if self.options.index == "union" and self.options.codes != "own":
            raise ValueError("lgc: 'index' 'union' needs 'codes' 'own' on the parameter server: with the leader's "
                             "code an lgc step sends the leader's indices and code in one round, with no round for "
                             "every worker's candidates first")

    def push(self, grads):
        step, phase, port = self.schedule.step, self.installed, self.transport
        self.accumulate(grads)
        lead = self.transport.rank == self.leader()
        train = self.mode() == AE_TRAIN
        if self.options.index_first(phase, step):
            keys = ("tune_lead", "tune_all") if train and phase == LGC else ("lead", "all")
            if self.options.candidates_first(phase, step):  # every worker's candidates; the servers draw the set
                self._send([(g, keys[0], g.coder.candidate_message(step)) for g in self.groups])
            elif lead:
                self._send([(g, keys[0], g.coder.index_message(step)) for g in self.groups])
            port.barrier()
            port.pull([g.keys["index"] for g in self.groups], [g.buffers["index"] for g in self.groups])
            messages = []
            for g in self.groups:
                try:
                    index = g.fmt.read("INDEX", g.buffers["index"].asnumpy(), step)["indices"]
                except CorruptMessage:  # a set the server refused (every worker reads it): raise the server's error
                    port.synchronize()
                    raise
                messages.append((g, keys[1], g.coder.vector_message(step, index) if train
                                 else g.coder.own_code_message(step, index)))
            self._send(messages)
        else:
            messages = [(g, "lead", g.coder.lead_message(step)) for g in self.groups] if lead else []
            self._send(messages + [(g, "all", g.coder.innov_message(step)) for g in self.groups])
        for g in self.groups:
            port.count_round(g.server, 2)

    def _send(self, messages):
        arrays = []
        for g, name, words in messages:
            _mx.write(g.buffers[name], words)  # (the last step's push of it has ended: below)
            arrays.append(g.buffers[name])
        self.transport.push([g.keys[name] for g, name, _ in messages], arrays)
        for a in arrays:
            _mx.wait_to_write(a)

    def pull_keys(self):
        return [g.keys["result"] for g in self.groups], [g.buffers["result"] for g in self.groups]

    def finish(self, dests):
        step, phase, mode = self.schedule.step, self.installed, self.mode()
        for g in self.groups:
            result = g.fmt.read("RESULT", g.buffers["result"].asnumpy(), step)
            self.apply(g, dests, g.coder.finish(mode, result))
            g.coder.start_estimate()
        if phase == LGC and mode == AE_TRAIN:  # fine-tuned: the servers' new weights
            self._fetch_autoencoder()
        self.end_step()

    # ---- phase switches (collective) ----

    def _install(self, phase, state_path):
        port = self.transport
        self._make_keys(phase)
        if state_path is not None:  # the servers' autoencoders of the checkpoint
            port.command("lgc_load", path=state_path)
            port.synchronize()
        if phase == LGC:
            self._fetch_autoencoder()

    def _make_keys(self, phase):
        """New push and value keys on each group's server for ``phase``, told to the servers."""
        port = self.transport
        sizes = {AE_TRAIN: {"lead": "INDEX", "all": "VECTOR", "index": "INDEX", "result": "RESULT"},
                 LGC: {"lead": "LEAD", "all": "INNOV", "result": "RESULT"} if self.options.codes == "leader" else
                 {"lead": "INDEX", "all": "CODED", "index": "INDEX", "result": "RESULT"}}[phase]
        if phase == LGC and self.options.fine_tune_every:
            sizes = dict(sizes, tune_lead="INDEX", tune_all="VECTOR", index="INDEX")
        if self.options.index == "union":  # every worker pushes its candidates where the leader pushed INDEX
            sizes = {n: "CAND" if n in ("lead", "tune_lead") else kind for n, kind in sizes.items()}
        pushing = [n for n in sizes if n in ("lead", "all", "tune_lead", "tune_all")]
        pushes, values = [], []
        for g in self.groups:
            g.keys = {name: port.key_on(g.server) for name in sizes}
            g.buffers = {name: mx.nd.zeros(g.fmt.words[kind]) for name, kind in sizes.items()}
            pushes += [(g.keys[n], g.fmt.words[sizes[n]]) for n in pushing]
            values += [(g.keys[n], g.fmt.words[sizes[n]]) for n in sizes if n not in pushing]
        if phase == LGC:
            for g in self.groups:
                g.keys["weights"] = port.key_on(g.server)
                values.append((g.keys["weights"], self._autoencoder().weight_count()))
        port.init([k for k, _ in pushes], [mx.nd.zeros(n) for _, n in pushes])
        port.init([k for k, _ in values], [mx.nd.zeros(n) for _, n in values])
        port.register([k for k, _ in values], [n for _, n in values])
        port.command("lgc", phase=phase, step=self.schedule.step, options=self.options.config,
                            num_workers=port.num_workers,
                            groups=[{"number": s, "server": g.server, "sizes": g.fmt.sizes, "keys": g.keys,
                                     "chunks": [c.id for c in g.chunks]} for s, g in enumerate(self.groups)])
        self.host.agree("lgc_phase", {"lgc_phase": phase, "step": self.schedule.step, **self.options.config})

    def _fetch_autoencoder(self):
        outs = [mx.nd.zeros(self._autoencoder().weight_count()) for _ in self.groups]
        self.transport.pull([g.keys["weights"] for g in self.groups], outs)
        for g, weights in zip(self.groups, outs):
            g.coder.set_autoencoder(self._autoencoder(), weights.asnumpy())
            self.autoencoder_bytes += 4 * weights.size

    # ---- checkpoints ----

    def save_states(self, path):
        """Has each server write its groups' autoencoder states to ``path.lgc<g>`` (a collective)."""
        self.transport.command("lgc_save", path=path)
        self.transport.synchronize()
