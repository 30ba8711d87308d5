"""The layer-merge planner: which consecutive layers share one message (SPEC section 3).

Layers are taken in gradient-ready order (the last layer first, as backward produces them).  Layer l
is ready ``ready[l]`` seconds after backward starts and takes ``encode[l]`` seconds to sparsify; a
message of x bytes takes ``alpha + beta * x`` seconds on the transport, one message at a time.  A group
of layers j+1..i is encoded once its last layer is ready and sent once the transport is free:

    C(j, i) = ready[i] + sum(encode[j+1..i])
    F[i]    = min over j < i of  max(F[j], C(j, i)) + alpha + beta * bytes(j+1..i)

F[L] is the predicted time at which the last message has arrived.  Since F[i] only grows with F[j],
the best plan for a prefix is part of a best plan for the whole: dynamic programming over i finds the
optimum in O(L^2) (tests/test_merge_planner.py checks it against every partition of small instances).
Baselines: every layer alone, one message for all, fixed-size buckets.
"""
import dataclasses

import numpy as np


@dataclasses.dataclass
class CostModel:
    """Seconds to send one message of x bytes: alpha + beta * x."""

    alpha: float
    beta: float

    def time(self, nbytes):
        return self.alpha + self.beta * nbytes

    @classmethod
    def fit(cls, nbytes, seconds):
        """Least-squares fit to measured (message bytes, seconds) pairs, both coefficients kept >= 0."""
        x, y = np.asarray(nbytes, float), np.asarray(seconds, float)
        if len(x) < 2 or np.ptp(x) == 0:
            raise ValueError("fitting alpha and beta needs measurements at two or more message sizes")
        beta, alpha = np.polyfit(x, y, 1)
        if beta < 0:
            beta, alpha = 0.0, float(np.mean(y))
        if alpha < 0:
            alpha, beta = 0.0, float(np.dot(x, y) / np.dot(x, x))
        return cls(float(alpha), float(beta))


@dataclasses.dataclass
class Layer:
    """One layer's gradient as the planner sees it."""

    name: str
    nbytes: int      # payload bytes it sends per step
    ready: float     # seconds after backward starts when its gradient is ready
    encode: float    # seconds to sparsify it


@dataclasses.dataclass
class Plan:
    """Groups of consecutive layers (in ready order), one message each, and the predicted step end."""

    strategy: str
    groups: list
    finish: float

    def describe(self, layers):
        by_name = {layer.name: layer for layer in layers}
        lines = ["merge plan (%s): %d messages, predicted communication end %.2f ms after backward starts"
                 % (self.strategy, len(self.groups), 1e3 * self.finish)]
        for g in self.groups:
            lines.append("  %8d bytes  ready %7.2f ms  %s" % (sum(by_name[n].nbytes for n in g),
                                                              1e3 * by_name[g[-1]].ready, ", ".join(g)))
        return "\n".join(lines)


def _check(layers):
    if not layers:
        raise ValueError("the planner needs at least one layer")
    readies = [layer.ready for layer in layers]
    if any(b < a for a, b in zip(readies, readies[1:])):
        raise ValueError("layers must be given in gradient-ready order (non-decreasing ready times)")


def finish_time(layers, bounds, cost):
    """Predicted end of communication for groups given by their end indices ``bounds`` (exclusive)."""
    finish, start = 0.0, 0
    for end in bounds:
        group = layers[start:end]
        ready = group[-1].ready + sum(layer.encode for layer in group)
        finish = max(finish, ready) + cost.time(sum(layer.nbytes for layer in group))
        start = end
    return finish


def _plan(strategy, layers, bounds, cost):
    groups, start = [], 0
    for end in bounds:
        groups.append([layer.name for layer in layers[start:end]])
        start = end
    return Plan(strategy, groups, finish_time(layers, bounds, cost))


def plan_optimal(layers, cost):
    """The partition into consecutive groups with the earliest predicted finish (dynamic programming)."""
    _check(layers)
    n = len(layers)
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for i in range(1, n + 1):
        nbytes = encode = 0.0
        for j in range(i - 1, -1, -1):  # group j+1..i (layers[j:i]), growing backwards
            nbytes += layers[j].nbytes
            encode += layers[j].encode
            f = max(best[j], layers[i - 1].ready + encode) + cost.time(nbytes)
            if f < best[i]:
                best[i], cut[i] = f, j
    bounds, i = [], n
    while i > 0:
        bounds.append(i)
        i = cut[i]
    return _plan("dp", layers, bounds[::-1], cost)


def plan_layerwise(layers, cost):
    """Every layer its own message."""
    _check(layers)
    return _plan("layerwise", layers, list(range(1, len(layers) + 1)), cost)


def plan_one_bucket(layers, cost):
    """All layers in one message."""
    _check(layers)
    return _plan("one", layers, [len(layers)], cost)


def plan_fixed(layers, cost, bucket_bytes):
    """Consecutive layers filled into messages of at least ``bucket_bytes`` (the last may be smaller)."""
    _check(layers)
    if bucket_bytes <= 0:
        raise ValueError("bucket_bytes must be > 0, got %r" % (bucket_bytes,))
    bounds, size = [], 0
    for i, layer in enumerate(layers):
        size += layer.nbytes
        if size >= bucket_bytes:
            bounds.append(i + 1)
            size = 0
    if not bounds or bounds[-1] != len(layers):
        bounds.append(len(layers))
    return _plan("fixed", layers, bounds, cost)


STRATEGIES = {"dp": plan_optimal, "layerwise": plan_layerwise, "one": plan_one_bucket}


def make_plan(strategy, layers, cost, bucket_bytes=None):
    """``strategy``: 'dp', 'layerwise', 'one', or 'fixed' (with ``bucket_bytes``)."""
    if strategy == "fixed":
        return plan_fixed(layers, cost, bucket_bytes)
    if strategy not in STRATEGIES:
        raise ValueError("unknown merge strategy %r; choose one of dp, layerwise, one, fixed" % (strategy,))
    return STRATEGIES[strategy](layers, cost)
