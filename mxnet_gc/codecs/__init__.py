"""Gradient codecs, created by type name: ``create({'type': '4bit', 'thresholds': [...]})``.

registry.py          name -> codec class, create(), available()
base.py              the Codec interface and the array checks
threshold_group.py   ThresholdGroup and the three default groups
threshold_codecs.py  '2bit' (MXNet-compatible), '4bit' and '5bit' multi-threshold
layerwise_topk.py    'layerwise_topk': adaptive-threshold sparsification (indices + values)
linear8.py           '8bit': linear quantization with a per-array scale
sign.py              'sign': one bit a value, the sign times the array's mean magnitude
"""
from .base import Codec, LevelFit
from .layerwise_topk import LayerwiseTopkCodec
from .linear8 import Linear8Codec
from .registry import available, codec_class, create
from .sign import SignCodec
from .threshold_codecs import FiveBitCodec, FourBitCodec, ThresholdCodec, TwoBitCodec
from .threshold_group import DEFAULT_GROUPS, ThresholdGroup, default_group

__all__ = ["Codec", "LevelFit", "codec_class", "LayerwiseTopkCodec", "Linear8Codec", "SignCodec", "ThresholdCodec", "TwoBitCodec", "FourBitCodec", "FiveBitCodec", "ThresholdGroup", "DEFAULT_GROUPS",
           "available", "create", "default_group"]
