"""A worker's side of LGC for one group of coded tensors (one server's, or on a ring all of them):
accumulation with error feedback, the messages it sends each step, and what the step's result does to
its accumulators.

Per tensor the worker keeps an accumulator v (and with ``momentum`` m a velocity u, DGC's momentum
correction): each step u = m u + g, v = v + u (without momentum v = v + g).  After a step:

- train phase (exact values were sent): v and u are zeroed at the leader's indices and at the
  worker's innovation coordinates;
- lgc phase, error_feedback='subtract': v -= what was applied on this worker's behalf (its decoded
  estimate, or on a ring the mean's, times the scales at the leader's indices, exact at its innovation
  coordinates), u is zeroed there; 'clip': the same, each applied value clamped between 0 and v's value
  (no value of v grows by an estimate's error); 'zero': v and u are zeroed there, as in the train phase.

On the parameter server a worker decodes its own estimate from the result's code.  That decode is
queued on MXNet's engine and subtracted at the start of the next step (before the new gradients are
added, so the arithmetic is the same), so that the step's update, the optimizer and the next forward
do not wait for it.
"""
import time

import numpy as np

from ..schedule import LGC
from . import vectors
from .autoencoder import Autoencoder


class GroupCoder:
    """The accumulators of one group's tensors (flat numpy float32) and the messages built from them."""

    def __init__(self, fmt, options, rank):
        self.fmt, self.options, self.rank = fmt, options, rank
        self.v = [np.zeros(n, np.float32) for n in fmt.sizes]
        self.u = [np.zeros(n, np.float32) for n in fmt.sizes] if options.momentum > 0 else None
        self.ae = None  # the autoencoder's weights, once the lgc phase has them
        self._selected = None  # per tensor, this step's (leader's indices, innovation coordinates, scale)
        self._sent = None  # what this step sent: (innovation indices, values)
        self._pending = None  # the last step's queued estimate and what its error feedback needs
        self._to_decode = None  # (leader, code, innovation channel) of the last step's estimate, until queued
        self.errors = []  # lgc phase, per step: (error, led, best-scale error) of this worker's estimate (_feedback)
        self._led = False  # whether this step's leader message was this worker's
        self._own_code = None  # codes 'own': this step's (code, scales) of its own vector
        self.network_seconds = 0.0  # time in the autoencoder's networks (encode, decode)

    def load(self, v, u=None):
        """Starts from given accumulators (the sparse ramp's residuals and velocities)."""
        self._pending = self._to_decode = None
        self.v = [np.array(x, np.float32).reshape(-1) for x in v]
        if self.u is not None:
            self.u = [np.zeros(n, np.float32) if x is None else np.array(x, np.float32).reshape(-1)
                      for n, x in zip(self.fmt.sizes, u or [None] * len(v))]

    def accumulate(self, grads, lead=False):
        """Adds a step's gradients (per tensor, float32) in one C++ pass per tensor, which also selects this
        step's innovation coordinates, the leader's indices (``lead``) and scales.  A non-finite gradient
        value is dropped, as the codecs drop it: the accumulator and velocity keep their values there (so
        no scale, message, sum or autoencoder sample ever holds one).  Returns the number of such values
        per tensor (counted by the same pass)."""
        self.settle()
        self._led = False
        m = float(self.options.momentum)
        self._selected, dropped = [], []
        for c, g in enumerate(grads):
            g = np.ascontiguousarray(g, np.float32).reshape(-1)
            *selected, nonfinite = vectors.accumulate(self.v[c], None if self.u is None else self.u[c], g, m,
                                                      self.fmt.k[c] if lead else 0, self.fmt.ki[c])
            self._selected.append(selected)
            dropped.append(nonfinite)
        return dropped

    def leader_indices(self):
        """Per tensor, the k largest |v|: ascending (order 'index') or largest first ('magnitude')."""
        if self._selected[0][0].size != self.fmt.k[0]:
            raise RuntimeError("lgc: the leader's indices are selected by accumulate(..., lead=True)")
        top = [s[0] for s in self._selected]
        return [np.sort(t) for t in top] if self.options.order == "index" else top

    def _innovation(self):
        idx = [s[1] for s in self._selected]
        values = [v[i] for v, i in zip(self.v, idx)]
        self._sent = (idx, values)
        return idx, values

    def scales(self):
        """The leader's scales: each tensor's largest finite |v| (every worker's vector is divided by these;
        1 for a tensor of zeros)."""
        return [s[2] for s in self._selected]

    def index_message(self, step):
        """The train phase's first message (and with codes 'own' the lgc phase's), from the leader: its
        scales and indices."""
        self._led = True
        return self.fmt.index_message(step, self.rank, self.scales(), self.leader_indices())

    def candidate_message(self, step):
        """With index 'union': this worker's scales and its share of the index set, its top kc indices per
        tensor, largest first (CAND)."""
        if self._selected[0][0].size != self.fmt.k[0]:
            raise RuntimeError("lgc: candidates are selected by accumulate(..., lead=True)")
        return self.fmt.index_message(step, self.rank, self.scales(),
                                      [s[0][:kc] for s, kc in zip(self._selected, self.fmt.kc)], kind="CAND")

    def vector_message(self, step, indices):
        """The train phase's second message: this worker's values at the leader's indices, its innovation."""
        idx, values = self._innovation()
        return self.fmt.innov_message(step, self.rank, idx, values, vector=vectors.gather(self.fmt, self.v, indices))

    def lead_message(self, step):
        """The lgc phase's leader message: its scales, its indices and the code of its scaled vector."""
        indices, scales = self.leader_indices(), self.scales()
        code = self._encode(vectors.scale_segments(self.fmt, vectors.gather(self.fmt, self.v, indices), scales))
        self._led = True
        return self.fmt.lead_message(step, self.rank, scales, indices, code)

    def code(self, indices, scales):
        """On a ring: the code of this worker's own vector at the leader's indices, in the leader's scales."""
        return self._encode(vectors.scale_segments(self.fmt, vectors.gather(self.fmt, self.v, indices), scales))

    def _encode(self, vector):
        """The autoencoder's code of a scaled vector (its time counted)."""
        start = time.perf_counter()
        code = self.ae.encode(vector)
        self.network_seconds += time.perf_counter() - start
        return code

    def own_code_message(self, step, indices):
        """The lgc phase's message with codes 'own': this worker's own scales (its largest |value| per tensor
        at the leader's indices), innovation, the code of its vector in its own scales and, with option
        signs, the vector's signs (all kept for the decode of its own estimate)."""
        idx, values = self._innovation()
        vector = vectors.gather(self.fmt, self.v, indices)
        scales = vectors.segment_scales(self.fmt, vector)
        signs = vectors.signs_of(vector) if self.options.signs else None
        self._own_code = (self._encode(vectors.scale_segments(self.fmt, vector, scales)), scales, signs)
        return self.fmt.innov_message(step, self.rank, idx, values, code=self._own_code[0], scales=scales,
                                      signs=signs)

    def innov_message(self, step):
        idx, values = self._innovation()
        return self.fmt.innov_message(step, self.rank, idx, values)

    def set_autoencoder(self, ae, weights):
        Autoencoder.set_flat(ae.params(), weights)
        self.ae = ae

    def finish(self, phase, result, estimate=None):
        """Applies a step's RESULT fields: returns the updates per tensor (``vectors.sparse_update``); updates
        the accumulators.
        ``estimate``: in the lgc phase, the values applied at the leader's indices on this worker's behalf
        (on a ring, the mean's); by default its own decoder's estimate from the result's code, which
        ``start_estimate`` queues on MXNet's engine and the next step takes into the accumulators
        (``settle``), so that the step's update does not wait for it."""
        fmt = self.fmt
        indices = result["indices"]
        idx, values = self._sent
        update = vectors.sparse_update(fmt, indices, result["sums"], result["innov_indices"], result["innov_values"])
        if phase == LGC:
            truth = vectors.gather(fmt, self.v, indices)[:fmt.K]  # (before any change of the step)
            if estimate is None:  # this worker's estimate, decoded as the server did (start_estimate)
                code, scales, signs = self._own_code if self.options.codes == "own" else \
                    (result["code"], result["scales"], None)
                channel = vectors.innovation_channel(fmt, indices, idx, values, scales, signs)
                self._to_decode = (result["rank"], code, channel)
                self._pending = [None, scales, truth, self._led, indices, idx, values]
            else:
                self._feedback(estimate, truth, self._led, indices, idx, values)
        feeds_back = phase == LGC and self.options.error_feedback != "zero"
        for c in range(len(fmt.sizes)):
            lead, own = indices[c], idx[c]
            if not feeds_back:
                self.v[c][lead] = 0
                self.v[c][own] = 0
            if self.u is not None:
                self.u[c][lead] = 0
                self.u[c][own] = 0
        return update

    def start_estimate(self):
        """Queues the decode of the estimate ``finish`` left for this worker on MXNet's engine (called once the
        step's update is written: with one engine thread, writes queued behind the decoder would wait)."""
        if self._to_decode is None:
            return
        start = time.perf_counter()
        self._pending[0] = self.ae.decode_later(self.rank, *self._to_decode, self.fmt.padded)
        self._to_decode = None
        self.network_seconds += time.perf_counter() - start

    def settle(self):
        """Takes the last step's queued estimate (``finish``) into the accumulators: before they are read."""
        if self._pending is None:
            return
        self.start_estimate()
        (later, scales, *rest), self._pending = self._pending, None
        start = time.perf_counter()
        decoded = later()
        self.network_seconds += time.perf_counter() - start
        self._feedback(vectors.scale_segments(self.fmt, decoded, scales, inverse=True), *rest)

    def _feedback(self, estimate, truth, led, indices, idx, values):
        """Records the error of what was applied on this worker's behalf at the leader's indices (the
        estimate, exact at its innovation coordinates) against its values there (``truth``): the relative
        squared error |applied - truth|^2 / |truth|^2, whether this worker led the step (its own code: a
        reconstruction, not an estimate from another worker's code), and the error with the best scale a
        (min over a of |a applied - truth|^2 / |truth|^2 = 1 - cos^2): how much of the error is in the
        estimate's size rather than its shape.  With error_feedback 'subtract', takes what was applied
        from its accumulators; with 'clip', that clamped between 0 and each accumulator value."""
        fmt = self.fmt
        mine, extras = vectors.applied(fmt, estimate, indices, idx, values)
        a, t = mine.astype(np.float64), truth.astype(np.float64)
        norm = max(float(np.dot(t, t)), 1e-30)
        cos2 = float(np.dot(a, t)) ** 2 / (max(float(np.dot(a, a)), 1e-30) * norm)
        self.errors.append((float(np.sum((a - t) ** 2)) / norm, led, 1.0 - cos2))
        rule = self.options.error_feedback
        if rule == "zero":
            return
        off = vectors.offsets(fmt)
        for c in range(len(fmt.sizes)):
            for at, taken in ((indices[c], mine[off[c]:off[c + 1]]), (idx[c], extras[c])):
                self.v[c][at] -= vectors.clamped(taken, self.v[c][at]) if rule == "clip" else taken
