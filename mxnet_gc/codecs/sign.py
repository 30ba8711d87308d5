"""The 'sign' codec: each value's sign times one scale per array, with error feedback (scaled signSGD).

Per array (per segment of a store's message): a = residual + grad (a non-finite gradient value, or a
non-finite sum, is dropped: a = residual there); s = mean |a|; each value is sent as -s where a < 0, else
s, and residual = a - that.  1 bit per value plus the scale: the payload is 1 + ceil(n / 32) words,
[s][sign bits] (docs/wire_format.md).  No parameters.  Its kernels and C++ description are in
src_cpp/sign_codec.h.
"""
from .base import Codec
from .registry import register


@register
class SignCodec(Codec):
    """'sign': one bit a value, every value sent as plus or minus its array's mean magnitude."""

    type = "sign"
    scales_itself = True
    kernel_name = "sign"
    values = {}  # (none: the scale is each array's mean |value|)
    hints = {"scale": "sign takes no parameters: its scale is each array's mean |value|"}

    def config(self):
        return {"type": self.type}

    def payload_size(self, n):
        return 1 + (n + 31) // 32

    def kernel_params(self, n):
        return []
