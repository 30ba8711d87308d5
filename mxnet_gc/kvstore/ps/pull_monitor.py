"""Watches the servers' compressed pulls: every N rounds of a message, how much of the summed gradient the
re-encoded pull carries and how much waits in the servers' residual.

A compressed pull re-encodes each round's sum a = (sum of the workers' pushes) + residual on the pull
levels; the pulled update is q and the servers keep r = a - q for later rounds.  Logged per sample (one
``pull stats {json}`` line on the server's log, read by tools/study_accuracy.py): the norms of a, q and r,
the share of a's non-zero values that are sent as 0 (below the first decision bound) and the share sent
at the top level (the sum clipped, the excess left in r).  Off unless MXNET_GC_PULL_STATS is set.
"""
import json
import logging

import numpy as np

log = logging.getLogger("mxnet_gc.server")


class PullMonitor:
    """``due(message)`` once per round of a message with a compressed pull; when due, ``record`` after the
    encode with the sum ``a`` as it was before."""

    def __init__(self, every):
        self.every = every
        self._rounds = {}  # pull key -> rounds seen

    def due(self, message):
        if not self.every:
            return False
        rounds = self._rounds.get(message.pull_key, 0) + 1
        self._rounds[message.pull_key] = rounds
        return rounds % self.every == 0

    def record(self, message, a):
        q = a - message.residual_np
        nonzero = a != 0
        top = np.zeros(a.size, bool)
        for seg in message.segments:
            span = slice(seg["offset"], seg["offset"] + seg["size"])
            top[span] = np.abs(q[span]) >= np.float32(seg["pull_codec"].group.levels[-1])
        stats = {"keys": message.keys, "round": self._rounds[message.pull_key], "values": int(a.size),
                 "sum": float(np.linalg.norm(a)), "pulled": float(np.linalg.norm(q)),
                 "residual": float(np.linalg.norm(message.residual_np)),
                 "zeros": float(np.count_nonzero(nonzero & (q == 0)) / max(1, np.count_nonzero(nonzero))),
                 "top": float(np.count_nonzero(top) / a.size)}
        log.info("pull stats %s", json.dumps(stats))
        return stats
