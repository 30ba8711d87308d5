"""The 'layerwise_topk' codec: each layer sends only its largest accumulated values.

Per layer (one codec call), with error feedback: a = residual + grad (or, with ``momentum``, DGC's
momentum correction v = momentum * v + grad, a = residual + v); the values with |a| >= the layer's
threshold are sent as (index, value) pairs and cleared from the residual.  The threshold starts as the
exact k-th largest |a| (k = max(1, round(density * n))), is recomputed exactly every ``reset_every``
steps, and in between adapts each step: x (1 + adapt_rate) after a step that selected more than
(1 + tolerance) k values, x (1 - adapt_rate) after one that selected fewer than (1 - tolerance) k.
At most ``capacity(n)`` = min(n, ceil((1 + tolerance) k)) values go out per step (the largest, when more
pass): transports that need fixed-size messages reserve that much.  Kernels in src_cpp/topk_sparsifier.*;
the wire format is in docs/wire_format.md.

With ``compressed_pull``, the servers send the sum of the workers' payloads back as one payload of the
same format (``pull_codec``: every nonzero, capacity ``sum_of`` = W times larger; nothing is lost).

The per-layer state (residual, momentum velocity, threshold, step count) lives in one flat float32
array made by ``new_residual(shape)``, which takes the residual's place in the store.
"""
import math
import numbers

import numpy as np

from .base import Codec
from .registry import register

MAX_VALUES = 2 ** 31 - 1  # indices are int32


def _number(name, value, low, high, low_open=False, high_open=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError("layerwise_topk: %r must be a finite number, got %r" % (name, value))
    below = value <= low if low_open else value < low
    above = value >= high if high_open else value > high
    if below or above:
        raise ValueError("layerwise_topk: %r must be in %s%g, %g%s, got %r" % (
            name, "(" if low_open else "[", low, high, ")" if high_open else "]", value))
    return float(value)


@register
class LayerwiseTopkCodec(Codec):
    """Adaptive-threshold top-k sparsification with error feedback; payload: count, indices, values."""

    type = "layerwise_topk"
    kernel_name = "topk"
    example = {"density": 0.1}
    values = {"density": "a number in (0, 1]: the fraction of each message's values sent a step",
              "adapt_rate": "a number in (0, 1): how fast each layer's threshold follows its top-k",
              "tolerance": "a number in [0, 1): the payload holds up to (1 + tolerance) k values",
              "reset_every": "an int >= 1: steps between two exact top-k selections",
              "momentum": "a number in [0, 1): DGC's momentum correction on the workers (0: none)",
              "sum_of": "an int >= 1: (a pull's codec) how many workers' payloads one holds"}

    def __init__(self, density=0.01, adapt_rate=0.1, tolerance=0.2, reset_every=100, momentum=0.0, sum_of=1):
        self.density = _number("density", density, 0, 1, low_open=True)
        self.adapt_rate = _number("adapt_rate", adapt_rate, 0, 1, low_open=True, high_open=True)
        self.tolerance = _number("tolerance", tolerance, 0, 1, high_open=True)
        self.momentum = _number("momentum", momentum, 0, 1, high_open=True)
        if isinstance(reset_every, bool) or not isinstance(reset_every, int) or reset_every < 1:
            raise ValueError("layerwise_topk: 'reset_every' must be an int >= 1, got %r" % (reset_every,))
        self.reset_every = reset_every
        if isinstance(sum_of, bool) or not isinstance(sum_of, int) or sum_of < 1:
            raise ValueError("layerwise_topk: 'sum_of' must be an int >= 1, got %r" % (sum_of,))
        self.sum_of = sum_of

    def config(self):
        return {"type": self.type, "density": self.density, "adapt_rate": self.adapt_rate,
                "tolerance": self.tolerance, "reset_every": self.reset_every, "momentum": self.momentum,
                "sum_of": self.sum_of}

    def target(self, n):
        """k: the number of values a step aims to send for n values."""
        return min(n, max(1, int(math.floor(self.density * n + 0.5))))

    def capacity(self, n):
        """The most values one payload for n values holds (for the sum of ``sum_of`` workers' payloads)."""
        return min(n, self.sum_of * int(math.ceil((1 + self.tolerance) * self.target(n))))

    def pull_codec(self, num_workers):
        """The codec of a sparse pull: the servers' sum of num_workers payloads, packed without loss."""
        return LayerwiseTopkCodec(**dict({k: v for k, v in self.config().items() if k != "type"},
                                          sum_of=self.sum_of * num_workers))

    def payload_size(self, n):
        return 1 + 2 * self.capacity(n)

    def state_size(self, n):
        return n * (2 if self.momentum > 0 else 1) + 2

    def state_shape(self, shape):
        """The per-layer state for a gradient of ``shape``: residual, velocity, threshold, step count, flat."""
        return (self.state_size(int(np.prod(shape))),)

    def check_size(self, n):
        if n > MAX_VALUES:
            raise ValueError("layerwise_topk: %d values exceed the int32 indices (split the layer)" % n)

    def kernel_params(self, n):
        return [self.density, self.momentum, self.adapt_rate, self.tolerance, self.reset_every, self.capacity(n)]
