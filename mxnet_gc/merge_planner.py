"""The layer-merge planner: which consecutive layers share one message.

Layers are taken in gradient-ready order (the last layer first, as backward produces them).  Layer l
is ready ``ready[l]`` seconds after backward starts and takes ``encode[l]`` seconds to sparsify; a
message of x bytes takes ``alpha + beta * x`` seconds on the transport, one message at a time, and
``host`` seconds of the sender's CPU (starting it, the transport's negotiation or barrier, taking the
result).  Host work done while backward still runs delays backward by ``contention`` times its length
(0: spare cores take it; 1: backward already uses every core).  The k-th message (k = 0, 1, ...),
layers j+1..i, is encoded once its last layer is ready and sent once the transport is free:

    C(j, i, k) = ready[i] + contention * (sum(encode[1..j]) + k * host) + sum(encode[j+1..i]) + host
    F[k][i]    = min over j < i of  max(F[k-1][j], C(j, i, k)) + alpha + beta * bytes(j+1..i)

and the plan is the best over k of F[k][L], the predicted time at which the last message has arrived.
F[k][i] only grows with F[k-1][j], so the best plan of k messages for a prefix is part of a best plan
for the whole: dynamic programming over (k, i) finds the optimum in O(L^3) (tests/test_merge_planner.py
checks it against every partition of small instances).  With host = 0 (or no contention) more
messages never delay one another's encoding, and plans that tie on F would differ only in how many
messages they send; the host cost is what makes a message that cannot gain anything not worth sending.
Baselines: every layer alone, one message for all, fixed-size buckets.
"""
import dataclasses

import numpy as np


@dataclasses.dataclass
class CostModel:
    """A message of x bytes: alpha + beta * x seconds on the transport, ``host`` seconds of the sender's
    CPU, of which ``contention`` (in [0, 1]) delays a backward still running."""

    alpha: float
    beta: float
    host: float = 0.0
    contention: float = 0.0

    def __post_init__(self):
        if min(self.alpha, self.beta, self.host) < 0 or not 0 <= self.contention <= 1:
            raise ValueError("cost model: alpha, beta and host must be >= 0 and contention in [0, 1], got %r" % (self,))

    def time(self, nbytes):
        return self.alpha + self.beta * nbytes

    @classmethod
    def fit(cls, nbytes, seconds, host=0.0, contention=0.0):
        """alpha and beta from measured (message bytes, seconds) pairs: the line through the smallest
        message's time with the least-squares slope of the others (a free line can cross below it, as
        when large messages are slowed by more than their bytes, and give alpha = 0); both kept >= 0."""
        x, y = np.asarray(nbytes, float), np.asarray(seconds, float)
        if len(x) < 2 or np.ptp(x) == 0:
            raise ValueError("fitting alpha and beta needs measurements at two or more message sizes")
        smallest = np.argmin(x)
        dx, dy = x - x[smallest], y - y[smallest]
        beta = max(0.0, float(np.dot(dx, dy) / np.dot(dx, dx)))
        alpha = max(0.0, float(y[smallest] - beta * x[smallest]))
        return cls(alpha, beta, float(host), float(contention))


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
    finish, start, encoded = 0.0, 0, 0.0
    for k, end in enumerate(bounds):
        group = layers[start:end]
        encode = sum(layer.encode for layer in group)
        ready = group[-1].ready + cost.contention * (encoded + k * cost.host) + encode + cost.host
        finish = max(finish, ready) + cost.time(sum(layer.nbytes for layer in group))
        start, encoded = end, encoded + encode
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
    ready = np.array([layer.ready for layer in layers])
    prefix_bytes = np.concatenate([[0.0], np.cumsum([float(layer.nbytes) for layer in layers])])
    prefix_encode = np.concatenate([[0.0], np.cumsum([layer.encode for layer in layers])])
    best = np.full((n + 1, n + 1), np.inf)  # best[k][i]: the first i layers in k messages
    cut = np.zeros((n + 1, n + 1), dtype=int)
    best[0][0] = 0.0
    for k in range(1, n + 1):
        for i in range(k, n + 1):
            j = np.arange(k - 1, i)  # the k-th message holds layers[j:i]
            start = (ready[i - 1] + cost.contention * (prefix_encode[j] + (k - 1) * cost.host)
                     + prefix_encode[i] - prefix_encode[j] + cost.host)
            f = (np.maximum(best[k - 1][j], start) + cost.alpha
                 + cost.beta * (prefix_bytes[i] - prefix_bytes[j]))
            m = int(np.argmin(f))  # the first minimum: the fewest layers in earlier messages
            best[k][i], cut[k][i] = f[m], j[m]
    finish = best[:, n]  # of the plans within rounding of the best, the one of fewest messages
    k = int(np.flatnonzero(finish <= finish.min() * (1 + 1e-9))[0])
    bounds, i = [], n
    while i > 0:
        bounds.append(i)
        i, k = cut[k][i], k - 1
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
