"""Compressed weight pulls on the dist store with the optimizer on the servers: the workers' side.

With ``'compressed_pull': True`` and ``set_optimizer``, each server keeps, per message, how far its
weights are from the weights the workers hold (aggregator.py); after each round it encodes that
difference with the key's codec and sends the payload, and what the encoding leaves stays on the server
for the next round (error feedback on the weights: bounded, never lost).  A worker adds each decoded
difference to the weights it holds (its private copy), so every worker holds the same weights.  Pulls
before the first push, in a dense warm-up step, and after a change to or from an uncompressed setting
carry the whole weights.

The codec's levels are fitted to the differences as 'thresholds': 'auto' fits them to gradients
(level_fit.py): ``WeightChanges`` measures each key's largest change of its weights in each of the last
FIT_STEPS dense steps (what a worker pulls, after a push, against what it held), and when the codecs
start, the mean over the workers (they pull the same weights) of each key's largest gives its ladder.
"""
import collections

import mxnet as mx
import numpy as np

from ... import log
from ..compression import FIT_STEPS



def pullable(codec_class):
    """Whether a codec can send the servers' weights' differences: one whose levels a store fits (to the
    changes, during the warm-up) or one that scales each segment itself (8bit)."""
    return codec_class is not None and (codec_class.level_fit is not None or codec_class.scales_itself)


def check(compression, asynchronous):
    """Raises ValueError unless ``compression`` can pull the servers' weights compressed."""
    if not compression.compressed_pull:
        return
    if asynchronous:
        raise ValueError("dist_async: each worker pulls the weights when it pushes, so compressed weight pulls would "
                         "need a copy of the weights per worker on the servers; 'compressed_pull' is refused there "
                         "(use dist_sync)")
    if not pullable(compression.codec_class):
        raise ValueError("'compressed_pull' with the optimizer on the servers sends the weights' differences, on "
                         "4bit, gc_2bit or 8bit; %r cannot (run the optimizer on the workers: update_on_kvstore=False)"
                         % compression.type)
    if not compression.codec_class.scales_itself and compression.warmup_steps < 1:
        raise ValueError("'compressed_pull' (4bit's default) with the optimizer on the servers fits the levels of the "
                         "weights' differences during the dense warm-up: 'warmup_steps' must be at least 1, got 0 (or "
                         "give 'compressed_pull': False for float32 weight pulls)")


def applied(compression, asynchronous):
    """``compression`` as it runs with the optimizer on the servers.  An explicit 'compressed_pull' that cannot
    run there raises ValueError (``check``); 4bit's default compressed pull gives way to float32 weight pulls
    where it cannot (such as 'warmup_steps': 0, which leaves no step to fit its levels in), saying why once."""
    try:
        check(compression, asynchronous)
        return compression
    except ValueError as e:
        if compression.pull_given:
            raise
        log.logger.info("mxnet_gc: weights pulled as float32: %s", e)
        return compression.with_float32_pulls()


class WeightChanges:
    """Each key's largest change of its weights in the last FIT_STEPS dense steps, and once fitted, the
    workers' mean of them (``largest``), from which each key's pull codec is made."""

    def __init__(self):
        self._maxima = collections.defaultdict(lambda: collections.deque(maxlen=FIT_STEPS))
        self.largest = None  # {key: float} once fitted

    def observe(self, key, before, after):
        """One step's change of ``key``'s weights (NDArrays; an engine operation, no wait)."""
        self._maxima[key].append(mx.nd.max(mx.nd.abs(after - before)))

    @property
    def measured(self):
        return bool(self._maxima)

    def fit(self, store, keys, names):
        """The workers' mean of each key's largest change (a collective call on ``store``); returns the
        table as text (``names``: the keys' names)."""
        local = [max([m.asscalar() for m in self._maxima.get(k, ())] or [0.0]) for k in keys]
        local = np.nan_to_num(np.array(local, np.float64), nan=0.0, posinf=0.0)
        largest = store.average("weight_changes", local)
        self.largest = {k: float(v) for k, v in zip(keys, largest)}
        self._maxima.clear()
        return "\n".join("  %-40s %.3g" % (n, self.largest[k]) for k, n in zip(keys, names))

    def codec(self, compression, key):
        """The codec of ``key``'s compressed weight pull."""
        return compression.weight_pull_codec(self.largest.get(key, 0.0))

    def state_dict(self):
        return None if self.largest is None else [[k, v] for k, v in self.largest.items()]

    def load_state_dict(self, state):
        if state is not None:
            self.largest = {k: v for k, v in state}
