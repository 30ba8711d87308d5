"""Independent numpy reference of an 'lgc' run, written from its definition (docs/lgc.md).

``simulate`` replays every worker's local gradients through the phases and returns the update every
worker must have pulled at each step, per parameter.  ``ring=True``: LGC-RAR's lgc phase (every worker
encodes its own vector; the mean decoder decodes the mean code), else LGC-PS's (the leader's code,
the decoder of each worker's position after the leader; with codes 'own', each worker's own code of its
vector in its own scales, one decoder).  Only the autoencoder's networks come from
mxnet_gc (run with the weights the workers received); the selection, the vector, the scales, the
innovations, the combination and the error feedback are computed here.
"""
import math

import numpy as np

import dgc_reference
import topk_reference as topk
from mxnet_gc.lgc.autoencoder import Autoencoder

STRIDE = 16


def count(fraction, n):
    return min(n, max(1, int(math.floor(fraction * n + 0.5))))


def largest(values, k):
    """Indices of the k largest |values|, largest first, ties to the lower index."""
    return np.argsort(-np.abs(values), kind="stable")[:k]


def phase_list(p):
    """[(name, density or None)] per step of the dense and ramp phases, then 'train' and 'lgc'."""
    steps = ["dense"] * p["dense_steps"]
    stages = p["ramp_stages"]
    densities = [p["ramp_start"] * (p["density"] / p["ramp_start"]) ** (i / (stages - 1)) for i in range(stages)] \
        if stages > 1 else [p["density"]]
    for i in range(stages):
        n = p["ramp_steps"] // stages + (i < p["ramp_steps"] % stages)
        steps += ["sparse-%d" % (i + 1)] * n
    return steps, densities


def tunes(p, step, first):
    """Whether lgc-phase ``step`` (the phase starting at ``first``) is a fine-tuning (train) step."""
    n = p.get("fine_tune_every", 0)
    return bool(n) and step >= first and (step - first) % n == n - 1


def dense_sum(grads):
    """The sum of the workers' dense pushes; under 'lgc' a non-finite value is dropped (sent as 0)."""
    return sum(np.where(np.isfinite(g), g, np.float32(0)).ravel() for g in grads).astype(np.float32)


def simulate(p, locals_, groups, steps, ring=False):
    """``locals_[r][step][name]``: worker r's gradient; ``groups``: [(coded names in vector order, a
    function step -> the autoencoder's flat weights in use at that step)], one per server; returns
    ``pulled[step][name]``."""
    W = len(locals_)
    names = list(locals_[0][0])
    coded = [n for g, _ in groups for n in g]
    head, densities = phase_list(p)
    if p["autoencoder"]:
        head += ["train"] * p["ae_steps"]
    else:  # the ramp's last stage to the end
        head += [head[-1]] * steps
    states = [{n: topk.new_state(locals_[0][0][n].size) for n in coded} for _ in range(W)]
    coders = [GroupReference(p, W, g, weights, ring) for g, weights in groups]
    m = np.float32(p.get("momentum", 0.0) if p.get("dense_momentum") else 0.0)
    velocity = [{n: np.zeros(locals_[0][0][n].size, np.float32) for n in names} for _ in range(W)]

    def dense(n, step):  # the sum of the workers' dense pushes; with momentum each pushes its velocity
        if not m:
            return dense_sum([locals_[r][step][n] for r in range(W)])
        for r in range(W):
            g = locals_[r][step][n].ravel()
            velocity[r][n] = dgc_reference.velocity_step(g, velocity[r][n], m)
        return dense_sum([velocity[r][n] for r in range(W)])

    pulled = []
    for step in range(steps):
        phase = head[step] if step < len(head) else ("train" if tunes(p, step, len(head)) else "lgc")
        out = {n: dense(n, step) for n in names if n not in coded}
        if phase == "dense":
            out.update({n: dense(n, step) for n in coded})
        elif phase.startswith("sparse-"):
            stage = int(phase.split("-")[1])
            first = step == 0 or head[step - 1] != phase
            for n in coded:
                total = np.zeros(locals_[0][0][n].size, np.float32)
                for r in range(W):
                    if first and stage == 1:  # the dense phase's velocity goes on in the ramp
                        states[r][n]["velocity"] = velocity[r][n].copy()
                    if first:
                        states[r][n]["threshold"] = np.float32(0)
                    idx, vals, _ = topk.step(locals_[r][step][n], states[r][n], densities[stage - 1],
                                             momentum=p.get("momentum", 0.0))
                    total[idx] += vals
                out[n] = total
        else:
            for g in coders:
                out.update(g.step(step, phase, [[locals_[r][step][n] for n in g.names] for r in range(W)],
                                  [[states[r][n] for n in g.names] for r in range(W)]))
        pulled.append(out)
    return pulled


class GroupReference:
    """The train and lgc phases of one server's coded tensors."""

    def __init__(self, p, W, names, weights_at, ring):
        self.p, self.W, self.names, self.ring = p, W, names, ring
        self.v = None
        self.weights_at = weights_at
        self.ae = Autoencoder(W, p["encoder_channels"], p["latent_channels"], 0, p["codes"] == "own")

    def step(self, step, phase, grads, ramp):
        """This step's updates {name: values}; ``ramp``: the sparse ramp's states (residuals, velocities),
        taken at the first step."""
        p, W, L = self.p, self.W, len(self.names)
        m = np.float32(p.get("momentum", 0.0))
        if self.v is None:
            self.v = [[st["residual"].copy() for st in ramp[r]] for r in range(W)]
            self.u = [[st["velocity"].copy() for st in ramp[r]] for r in range(W)]
        v, u = self.v, self.u
        sizes = [x.size for x in v[0]]
        k = [count(p["density"], n) for n in sizes]
        ki = [count(p["innovation_density"], n) for n in sizes]
        K = sum(k)
        P = max(STRIDE, -(-K // STRIDE) * STRIDE)
        off = np.concatenate([[0], np.cumsum(k)])
        ae, coded = self.ae, self.names
        if phase == "lgc":
            Autoencoder.set_flat(ae.params(), self.weights_at(step))
        for r in range(W):
            for c in range(L):  # DGC's momentum correction: u = m u + g, v += u (a non-finite v keeps both)
                u[r][c], v[r][c] = dgc_reference.step(grads[r][c].ravel(), u[r][c], v[r][c], m)
        leader = step % W if p["leader"] == "rotate" else p["leader"]
        lead = [largest(v[leader][c], k[c]) for c in range(len(coded))]
        if p.get("index", "leader") == "union" and phase in ("train", "lgc"):  # drawn from every worker's top-k
            lead = []
            for c in range(len(coded)):
                share = -(-k[c] // W)  # each worker's candidates: its top ceil(k / W)
                tops = [largest(v[(leader + t) % W][c], share) for t in range(W)]  # in turns from the leader
                chosen = []
                for j in range(share):  # everyone's largest, then everyone's second, ...: the first k distinct
                    for t in range(W):
                        if len(chosen) < k[c] and tops[t][j] not in chosen:
                            chosen.append(tops[t][j])
                free = 0
                while len(chosen) < k[c]:  # overlapping candidates: the lowest indices not chosen complete it
                    if free not in chosen:
                        chosen.append(free)
                    free += 1
                lead.append(np.sort(np.array(chosen, np.int64)))
        elif p["order"] == "index":  # the vector in the order of the tensor, else by |value|
            lead = [np.sort(i) for i in lead]
        own = [[largest(v[r][c], ki[c]) for c in range(len(coded))] for r in range(W)]
        scales = [[float(np.max(np.abs(v[r][c]))) or 1.0 for c in range(len(coded))] for r in range(W)]

        def scaled(r):  # worker r's values at the leader's indices, in the leader's scales
            out = np.zeros(P, np.float32)
            out[:K] = np.concatenate([v[r][c][lead[c]] / np.float32(scales[leader][c]) for c in range(len(coded))])
            return out

        def channel(r, by=None, base=None):  # worker r's innovation values at their positions among the leader's
            out = np.zeros(P, np.float32) if base is None else base.copy()  # indices / the leader's scales (or ``by``)
            for c in range(len(coded)):
                for i in own[r][c]:
                    hit = np.flatnonzero(lead[c] == i)
                    if hit.size:
                        out[off[c] + hit[0]] = v[r][c][i] / np.float32((by or scales[leader])[c])
            return out

        def unscaled(est):
            return np.concatenate([est[off[c]:off[c + 1]] * np.float32(scales[leader][c])
                                   for c in range(len(coded))]).astype(np.float32)

        if phase == "train":
            values = [np.concatenate([v[r][c][lead[c]] for c in range(len(coded))]).astype(np.float32)
                      for r in range(W)]
        elif self.ring:  # the mean code of every worker's own code; the mean decoder
            code = np.sum([ae.encode(scaled(r)) for r in range(W)], axis=0) / np.float32(W)
            mean = ae.decode_mean(code, np.mean([channel(r) for r in range(W)], axis=0), P)[:K]
            values = [unscaled(mean)] * W
        elif p["codes"] == "own":  # each worker's code of its vector in its own scales; the one decoder
            values = []
            for r in range(W):
                own_scales = [float(np.max(np.abs(v[r][c][lead[c]]))) or 1.0 for c in range(len(coded))]
                mine = np.zeros(P, np.float32)
                mine[:K] = np.concatenate([v[r][c][lead[c]] / np.float32(own_scales[c]) for c in range(len(coded))])
                marks = None  # with signs: each value's sign as +-0.25 where no innovation value is
                if p.get("signs"):
                    marks = np.zeros(P, np.float32)
                    marks[:K] = np.where(mine[:K] > 0, np.float32(0.25), np.float32(-0.25))
                estimate = ae.decode(r, r, ae.encode(mine), channel(r, own_scales, marks), P)[:K]
                values.append(np.concatenate([estimate[off[c]:off[c + 1]] * np.float32(own_scales[c])
                                              for c in range(len(coded))]).astype(np.float32))
        else:  # the leader's code; the decoder of each worker's position after the leader
            code = ae.encode(scaled(leader))
            values = [unscaled(ae.decode(r, leader, code, channel(r), P)[:K]) for r in range(W)]
        updates = [np.zeros(s, np.float32) for s in sizes]
        applied = []
        for r in range(W):
            mine = values[r].copy()
            extra = []
            for c in range(len(coded)):
                for i in own[r][c]:
                    hit = np.flatnonzero(lead[c] == i)
                    if hit.size:
                        mine[off[c] + hit[0]] = v[r][c][i]
                    else:
                        extra.append((c, i, v[r][c][i]))
            applied.append((mine, extra))
        sums = np.zeros(K, np.float32)
        for mine, _ in applied:
            sums += mine
        for c in range(len(coded)):
            updates[c][lead[c]] = sums[off[c]:off[c + 1]]
        for _, extra in applied:
            for c, i, value in extra:
                updates[c][i] += value
        rule = p["error_feedback"] if phase == "lgc" else "zero"  # exact values were sent in a train step

        def taken(value, x):  # what the rule takes from an accumulator value x for an applied value
            if rule == "clip":  # no further than 0 from x's side
                return min(max(value, min(x, 0)), max(x, 0))
            return value

        for r, (mine, extra) in enumerate(applied):
            for c in range(len(coded)):
                u[r][c][lead[c]] = 0
                u[r][c][own[r][c]] = 0
                if rule == "zero":
                    v[r][c][lead[c]] = 0
                    v[r][c][own[r][c]] = 0
                    continue
                for j, i in enumerate(lead[c]):  # what was applied on r's behalf
                    v[r][c][i] -= np.float32(taken(mine[off[c] + j], v[r][c][i]))
            if rule != "zero":
                for c, i, value in extra:
                    v[r][c][i] -= np.float32(taken(value, v[r][c][i]))
        return {n: updates[c] for c, n in enumerate(coded)}
