"""Every bad parameter and bad input gets a clear error."""
import re

import numpy as np
import pytest
import mxnet as mx

import mxnet_gc
from mxnet_gc.codecs import ThresholdGroup

CREATE_ERRORS = [
    ({"type": "3bit"}, "unknown codec type '3bit'; supported types: 2bit, 4bit"),
    ({"threshold": 0.5}, "need a 'type'"),
    ("2bit", "must be a dict"),
    ({"type": "2bit", "threshold": 0}, "'threshold' must be positive"),
    ({"type": "2bit", "threshold": -0.5}, "'threshold' must be positive"),
    ({"type": "2bit", "threshold": float("nan")}, "'threshold' must be positive and finite"),
    ({"type": "2bit", "threshold": float("inf")}, "'threshold' must be positive and finite"),
    ({"type": "2bit", "threshold": 1e39}, "finite in float32"),
    ({"type": "2bit", "threshold": 1e-46}, "positive and finite in float32"),
    ({"type": "2bit", "threshold": "0.5"}, "'threshold' must be a positive number"),
    ({"type": "2bit", "threshold": True}, "'threshold' must be a positive number"),
    ({"type": "2bit", "thresholds": [0.5]}, "thresholds"),
    ({"type": "4bit", "thresholds": []}, "must have 1 to 7 levels, got 0"),
    ({"type": "4bit", "thresholds": [0.1 * k for k in range(1, 9)]}, "must have 1 to 7 levels, got 8"),
    ({"type": "4bit", "thresholds": [0.1, 0.3, 0.2]}, "strictly increasing"),
    ({"type": "4bit", "thresholds": [0.1, 0.1]}, "strictly increasing"),
    ({"type": "4bit", "thresholds": [0.1, 0.1 + 1e-12]}, "strictly increasing (in float32)"),
    ({"type": "4bit", "thresholds": [-0.1, 0.2]}, "'thresholds'[0] must be positive"),
    ({"type": "4bit", "thresholds": [0.1, float("inf")]}, "'thresholds'[1] must be positive and finite"),
    ({"type": "4bit", "thresholds": [0.1, float("nan")]}, "'thresholds'[1] must be positive and finite"),
    ({"type": "4bit", "thresholds": [0.1, "x"]}, "'thresholds'[1] must be a number"),
    ({"type": "4bit", "thresholds": 0.5}, "4bit: 'thresholds' must be 'auto' (on a store: levels fitted to each "
     "key's gradients during the warm-up), a group name ('small', 'medium', 'large') or a list of 1 to 7 increasing "
     "positive numbers (one level: [0.5]), got 0.5"),
    ({"type": "4bit", "thresholds": "huge"}, "a group name ('small', 'medium', 'large') or a list of 1 to 7 "
     "increasing positive numbers (one level: [0.5]), got 'huge'"),
    ({"type": "4bit", "thresholds": "mediun"}, "got 'mediun'; did you mean 'medium'?"),
    ({"type": "gc_2bit", "threshold": "x"}, "2bit: 'threshold' must be a positive number, or 'auto' on a store with "
     "type 'gc_2bit' (fitted to each key's gradients during the warm-up), got 'x'"),
    ({"type": "4bit", "threshold": 0.5}, "threshold"),
    ({"type": "4bit", "thresholds": [0.1], "momentum": 0.9}, "momentum"),
]


@pytest.mark.parametrize("params,message", CREATE_ERRORS, ids=[repr(p) for p, _ in CREATE_ERRORS])
def test_bad_params(params, message):
    with pytest.raises(ValueError) as err:
        mxnet_gc.codecs.create(params)
    assert message in str(err.value)


def test_unknown_key_lists_every_accepted_name_with_its_values():
    """Every name of the codec's table and of the store's options, each with what it takes."""
    from mxnet_gc.codecs.registry import options
    from mxnet_gc.kvstore.compression import STORE_OPTIONS
    for kind, cls in (("4bit", mxnet_gc.codecs.FourBitCodec), ("layerwise_topk", mxnet_gc.codecs.LayerwiseTopkCodec)):
        with pytest.raises(ValueError) as err:
            mxnet_gc.kvstore.Compression({"type": kind, "mementum": 0.9})
        said = str(err.value)
        assert said.startswith("%s: unknown parameter(s) 'mementum'" % kind), said
        for name, _, values in options(cls) + STORE_OPTIONS:
            assert "%s (%s)" % (name, values) in said, (name, said)
    assert [name for name, _, _ in options(mxnet_gc.codecs.FourBitCodec)] == ["thresholds", "rounding", "pull_bits"]


def test_threshold_group_is_immutable_float32():
    group = ThresholdGroup([0.1, 0.2])
    assert group.levels == (float(np.float32(0.1)), float(np.float32(0.2)))
    with pytest.raises(ValueError, match="strictly increasing"):
        ThresholdGroup([0.2, 0.1])


CODEC = {"type": "4bit", "thresholds": [0.1, 0.2]}


def encode_error(grad, residual, **kw):
    with pytest.raises((TypeError, ValueError)) as err:
        mxnet_gc.codecs.create(CODEC).encode(grad, residual, **kw)
    return err


def test_float16_gradient_rejected():
    err = encode_error(mx.nd.zeros(8, dtype="float16"), mx.nd.zeros(8))
    assert err.type is TypeError and "gradient must be float32, got float16" in str(err.value)


def test_float64_residual_rejected():
    err = encode_error(mx.nd.zeros(8), mx.nd.zeros(8, dtype="float64"))
    assert "residual must be float32, got float64" in str(err.value)


def test_numpy_input_rejected():
    err = encode_error(np.zeros(8, np.float32), mx.nd.zeros(8))
    assert "gradient must be an mxnet NDArray, got ndarray" in str(err.value)


def test_sparse_gradient_rejected():
    err = encode_error(mx.nd.zeros((4, 2)).tostype("row_sparse"), mx.nd.zeros((4, 2)))
    assert "must be a dense NDArray" in str(err.value)


def test_shape_mismatch_rejected():
    err = encode_error(mx.nd.zeros(8), mx.nd.zeros(9))
    assert err.type is ValueError and "(8,)" in str(err.value) and "(9,)" in str(err.value)


def test_residual_aliasing_gradient_rejected():
    g = mx.nd.zeros(8)
    assert "separate array" in str(encode_error(g, g).value)


def test_empty_gradient_rejected():
    grad, residual = (mx.nd.array(np.zeros(0, np.float32)) for _ in range(2))
    assert "empty" in str(encode_error(grad, residual).value)


def test_wrong_payload_size_rejected():
    codec = mxnet_gc.codecs.create(CODEC)
    payload = codec.encode(mx.nd.ones(17), mx.nd.zeros(17))  # 3 words
    for bad_out in (mx.nd.zeros(16), mx.nd.zeros(25)):  # 2 and 4 words expected
        with pytest.raises(ValueError, match="payload for %d values must have shape" % bad_out.size):
            codec.decode(payload, bad_out)
        with pytest.raises(ValueError, match="must have shape"):
            codec.decode_add(payload, bad_out)
    with pytest.raises(ValueError, match=r"must have shape \(3,\), got \(4,\)"):
        codec.encode(mx.nd.ones(17), mx.nd.zeros(17), out=mx.nd.zeros(4))


def test_wrong_payload_dtype_rejected():
    codec = mxnet_gc.codecs.create(CODEC)
    with pytest.raises(TypeError, match="payload must be float32, got int32"):
        codec.decode(mx.nd.zeros(3, dtype="int32"), mx.nd.zeros(17))


def test_operator_checks_sizes_too():
    """The C++ operators refuse a mismatched payload even when called directly, without the Python checks."""
    with pytest.raises(mx.base.MXNetError, match="payload has 2 float32 words, expected 3 for 17 values"):
        mx.nd.mxgc_4bit_decode(mx.nd.zeros(2), params="0.1,0.2,0.1,0.2", shape="17").wait_to_read()
    with pytest.raises(mx.base.MXNetError, match="strictly increasing"):
        mx.nd.mxgc_4bit_encode(mx.nd.zeros(2), mx.nd.zeros(2), params="0.2,0.1,0.2,0.1").wait_to_read()
    with pytest.raises(mx.base.MXNetError, match="must be float32"):
        mx.nd.mxgc_2bit_encode(mx.nd.zeros(2, dtype="float16"), mx.nd.zeros(2, dtype="float16"),
                               params="0.5,0.5").wait_to_read()


def test_the_docs_option_tables_are_the_codes():
    """docs/codecs.md's parameter table is the one the messages list, docs/lgc.md's options and
    docs/configuration.md's variables are the code's own tables, with the defaults the code uses
    (python -m tools.option_tables)."""
    from mxnet_gc import config
    from mxnet_gc.lgc.options import DEFAULTS
    from tools import option_tables
    assert option_tables.stale() == [], "run python -m tools.option_tables"
    for kind in mxnet_gc.codecs.available():
        assert "| `%s` |" % kind in option_tables.table()
    lgc = option_tables.lgc_table()
    assert all("| `%s` | %s |" % (field, "(none)" if default is None else "`%r`" % (default,)) in lgc
               for field, default in DEFAULTS.items())
    environment = option_tables.environment_table()
    parsed = config.Settings.from_environ({})
    assert "| `MXNET_GC_BIGARRAY_BOUND` | %d |" % parsed.bigarray_bound in environment
    assert "| `MXNET_GC_JOIN_TIMEOUT` | %g |" % parsed.join_timeout in environment
    with open(config.__file__) as f:  # every variable the parser reads has its row
        read = set(re.findall(r'"((?:MXNET_GC|DMLC|HOROVOD)_[A-Z_]+)"', f.read()))
    read.discard("MXNET_GC_")  # (a prefix in a message)
    assert read and all("`%s`" % name in environment for name in read), read
