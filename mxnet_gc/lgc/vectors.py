"""The arithmetic of LGC that workers and servers share: top-k, the coded vector, the combined sum.

For one server's coded tensors (a WireFormat ``fmt``): the leader's indices fix, per tensor, k_c
coordinates in the leader's |value| order; tensor c's segment of the vector is positions
[offset_c, offset_c + k_c).  A worker's innovation is its own i_c largest values per tensor, exact.

The combined sum of a step: each worker's values at the leader's indices (exact in the train phase,
the decoder's estimate times the worker's scale in the lgc phase), with the worker's innovation
coordinates among them replaced by their exact values, summed over workers; innovation coordinates
outside the leader's indices add their exact values.
"""
import ctypes

import numpy as np

from .._library import load
from .wire import CorruptMessage


def top(values, k):
    """Indices of the k largest |values| (int64), largest first (ties: lower index first; NaN last): one
    C++ pass (src_cpp/lgc_select.cc)."""
    values = np.ascontiguousarray(values, np.float32).reshape(-1)
    out = np.empty(k, np.int64)
    if load().mxgc_top_indices(values.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(values.size), ctypes.c_int64(k),
                               out.ctypes.data_as(ctypes.c_void_p)) != 0:
        raise ValueError("top: k = %d is not within 0..%d" % (k, values.size))
    return out


def accumulate(v, velocity, g, momentum, k_lead, k_innov):
    """One accumulation step of a tensor in place (``velocity`` None: without momentum; a non-finite g is
    dropped) and, from the same pass (src_cpp/lgc_select.cc), the indices of the ``k_lead`` and
    ``k_innov`` largest |v| after it (as ``top``), its scale (as ``scale_of``) and the number of
    non-finite values in g."""
    lead, innov, largest = np.empty(k_lead, np.int64), np.empty(k_innov, np.int64), ctypes.c_double()
    nonfinite = ctypes.c_int64()
    if load().mxgc_lgc_accumulate(v.ctypes.data_as(ctypes.c_void_p),
                                  None if velocity is None else velocity.ctypes.data_as(ctypes.c_void_p),
                                  g.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(v.size), ctypes.c_float(momentum),
                                  ctypes.c_int64(k_lead), lead.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(k_innov),
                                  innov.ctypes.data_as(ctypes.c_void_p), ctypes.byref(largest),
                                  ctypes.byref(nonfinite)) != 0:
        raise ValueError("accumulate: counts %d and %d are not within 0..%d" % (k_lead, k_innov, v.size))
    return lead, innov, largest.value if largest.value > 0 else 1.0, nonfinite.value


def union(fmt, candidates, first):
    """The step's index set with index 'union', per tensor ascending: ``candidates`` per worker (rank order)
    per tensor, each worker's top kc largest first; they are taken in turns starting with rank ``first``
    (each worker's largest, then each one's second, ...), the first k_c distinct indices of that order.
    When the workers' candidates overlap so that fewer than k_c are distinct, the set is completed with
    the lowest indices not in it.  Raises CorruptMessage when a worker repeats an index."""
    W, out = len(candidates), []
    turns = [(first + i) % W for i in range(W)]
    for c, k in enumerate(fmt.k):
        rows = [np.asarray(candidates[r][c], np.int64) for r in turns]
        for t, row in zip(turns, rows):
            if np.unique(row).size != row.size:
                raise CorruptMessage("worker %d's candidates for tensor %d repeat an index" % (t, c))
        distinct, at = np.unique(np.stack(rows, axis=1).reshape(-1), return_index=True)
        chosen = distinct[np.argsort(at, kind="stable")[:k]]
        if chosen.size < k:
            free = np.setdiff1d(np.arange(min(fmt.sizes[c], 2 * k)), chosen)
            chosen = np.concatenate([chosen, free[:k - chosen.size]])
        out.append(np.sort(chosen))
    return out


def scale_of(values):
    """A tensor's scale: its largest finite |value| (1 when it has none but zeros)."""
    magnitude = np.abs(values)
    finite = magnitude[np.isfinite(magnitude)]
    m = float(np.max(finite)) if finite.size else 0.0
    return m if m > 0 and np.isfinite(np.float32(m)) else 1.0


def segment_scales(fmt, vector):
    """Each tensor's segment's scale (``scale_of``) in a vector: a worker's own scales (codes 'own')."""
    off = offsets(fmt)
    return [scale_of(vector[off[c]:off[c + 1]]) for c in range(len(fmt.sizes))]


def offsets(fmt):
    return np.concatenate([[0], np.cumsum(fmt.k)]).astype(np.int64)


def gather(fmt, tensors, indices):
    """The vector (P values): each tensor's values at the leader's indices, end to end, zero padded."""
    out = np.zeros(fmt.padded, np.float32)
    off = offsets(fmt)
    for c, (t, idx) in enumerate(zip(tensors, indices)):
        out[off[c]:off[c + 1]] = t[idx]
    return out


def scale_segments(fmt, vector, scales, inverse=False):
    """The vector with each tensor's segment divided (or, ``inverse``, multiplied) by its scale."""
    out = np.array(vector, np.float32)
    off = offsets(fmt)
    for c, s in enumerate(scales):
        seg = out[off[c]:off[c + 1]]
        seg *= np.float32(s) if inverse else np.float32(1.0 / np.float32(s))
    return out


def innovation_positions(fmt, leader_indices, innov_indices):
    """Per tensor: (positions in the vector, or -1, of a worker's innovation coordinates)."""
    off = offsets(fmt)
    out = []
    for c, (lead, own) in enumerate(zip(leader_indices, innov_indices)):
        lead, own = np.asarray(lead, np.int64), np.asarray(own, np.int64)
        order = np.argsort(lead, kind="stable")  # (the leader's indices differ from each other)
        at = np.minimum(np.searchsorted(lead[order], own), lead.size - 1)
        out.append(np.where(lead[order][at] == own, off[c] + order[at], -1).astype(np.int64))
    return out


SIGN_MARK = 0.25  # (option signs) the channel where a worker's value is > 0, and its negative where it is not


def innovation_channel(fmt, leader_indices, innov_indices, innov_values, scales, signs=None):
    """The decoder's second input: a worker's innovation values / scale at their vector positions; with
    ``signs`` (a bit per vector value, 1 where it is > 0: option signs) +-SIGN_MARK at the vector's other
    positions, so that the decoder knows each value's sign and its code need only carry the sizes."""
    out = np.zeros(fmt.padded, np.float32)
    if signs is not None:
        out[:fmt.K] = np.where(np.asarray(signs)[:fmt.K] > 0, np.float32(SIGN_MARK), np.float32(-SIGN_MARK))
    for c, pos in enumerate(innovation_positions(fmt, leader_indices, innov_indices)):
        inside = pos >= 0
        out[pos[inside]] = innov_values[c][inside] / np.float32(scales[c])
    return out


def signs_of(vector):
    """The signs a worker sends (option signs): a bit per vector value, 1 where it is > 0."""
    return (np.asarray(vector) > 0).astype(np.uint8)


def applied(fmt, values_at_leader, leader_indices, innov_indices, innov_values):
    """What one worker contributes: (its values at the leader's indices with its innovation coordinates
    there made exact; per tensor, what its innovation adds outside the leader's indices)."""
    values = np.array(values_at_leader[:fmt.K], np.float32)
    extras = []
    for c, pos in enumerate(innovation_positions(fmt, leader_indices, innov_indices)):
        inside = pos >= 0
        values[pos[inside]] = innov_values[c][inside]
        extras.append(np.where(inside, 0, innov_values[c]).astype(np.float32))
    return values, extras


def clamped(applied_values, values):
    """Error feedback 'clip': what is taken from accumulator ``values`` for ``applied_values``, clamped
    between 0 and each value (an estimate that overshoots a value, or has the other sign, takes no more
    than the value, or nothing), so that no accumulator value grows by an estimate's error."""
    return np.clip(applied_values, np.minimum(values, 0), np.maximum(values, 0))


def sparse_update(fmt, leader_indices, sums, innov_indices, extras):
    """Per tensor, the update's nonzero coordinates (ascending) and values: the sums at the leader's
    indices plus every worker's extras, added in rank order (the update is zero elsewhere)."""
    off = offsets(fmt)
    out = []
    for c in range(len(fmt.sizes)):
        idx = np.concatenate([leader_indices[c]] + [own[c] for own in innov_indices])
        values = np.concatenate([sums[off[c]:off[c + 1]]] + [add[c] for add in extras]).astype(np.float32)
        at, where = np.unique(idx, return_inverse=True)
        update = np.zeros(at.size, np.float32)
        np.add.at(update, where, values)
        out.append((at, update))
    return out
