"""The '8bit' codec: linear quantization with one scale per array, and error feedback.

Per array (per segment of a store's message): a = residual + grad; s = max |a| / 127; each value is
sent as rint(a / s) * s, an integer in -127..127 times s, and residual = a - that (with s = 0, when a
cancels to 0 or is below ~9e-44, everything is sent as 0 and residual = a).  A non-finite a is sent as 0
and its residual keeps its previous value.  4 values per float32 word, plus the scale: the
payload is 1 + ceil(n / 4) words, [s][int8 codes] (docs/wire_format.md).  No parameters: the scale
follows the gradients, so it needs no tuning; a compressed pull re-encodes the servers' sum the same
way.  Its kernels and C++ description are in src_cpp/linear8_codec.h.
"""
from .base import Codec
from .registry import register


@register
class Linear8Codec(Codec):
    """'8bit': 255 evenly spaced levels scaled to each array's largest value, with error feedback."""

    type = "8bit"
    scales_itself = True
    kernel_name = "8bit"
    values = {}  # (none: each array is scaled to its largest |value| / 127)
    hints = {"scale": "8bit takes no parameters: its scale is each array's largest |value| / 127"}

    def config(self):
        return {"type": self.type}

    def payload_size(self, n):
        return 1 + (n + 3) // 4

    def kernel_params(self, n):
        return []
