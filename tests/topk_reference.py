"""Independent numpy reference of the 'layerwise_topk' codec, written from its definition
(docs/layerwise_sparsification.md, docs/wire_format.md).

A worker's state is a dict (residual, velocity, threshold, steps); ``step`` returns the (indices,
values, selected count) one encode sends and updates the state, in float32 arithmetic.
"""
import math

import numpy as np

import dgc_reference


def new_state(n):
    return {"residual": np.zeros(n, np.float32), "velocity": np.zeros(n, np.float32),
            "threshold": np.float32(0), "steps": 0}


def target(density, n):
    return min(n, max(1, int(math.floor(density * n + 0.5))))


def capacity(density, tolerance, n):
    return min(n, int(math.ceil((1 + tolerance) * target(density, n))))


def step(grad, state, density, adapt_rate=0.1, tolerance=0.2, reset_every=100, momentum=0.0):
    """One encode: returns (indices, values, count over the threshold)."""
    grad = np.asarray(grad, np.float32).ravel()
    n = grad.size
    k = target(density, n)
    state["velocity"], state["residual"] = dgc_reference.step(grad, state["velocity"], state["residual"], momentum)
    r = state["residual"]
    if state["steps"] % reset_every == 0 or not state["threshold"] > 0:
        state["threshold"] = np.sort(np.abs(r))[::-1][k - 1]
    theta = state["threshold"]
    over = np.flatnonzero((r != 0) & (np.abs(r) >= theta))
    passed = len(over)
    cap = capacity(density, tolerance, n)
    if passed > cap:  # the cap largest |a|, ties to the lower index
        order = np.lexsort((over, -np.abs(r[over])))
        over = np.sort(over[order[:cap]])
    values = r[over].copy()
    r[over] = 0
    if momentum > 0:
        state["velocity"][over] = 0
    if passed > cap:  # the exact k-th largest of this step's candidates
        state["threshold"] = np.sort(np.abs(values))[::-1][k - 1]
    elif passed < (1.0 - float(np.float32(tolerance))) * k:
        state["threshold"] = np.float32(theta * (np.float32(1) - np.float32(adapt_rate)))
    state["steps"] += 1
    return over, values, passed


def payload(indices, values, cap):
    """The wire format: count, indices, values (float32 words), zero-padded to 1 + 2 cap words."""
    words = np.zeros(1 + 2 * cap, np.int32)
    c = len(indices)
    words[0] = c
    words[1:1 + c] = indices
    words[1 + c:1 + 2 * c] = np.asarray(values, np.float32).view(np.int32)
    return words.view(np.float32)
