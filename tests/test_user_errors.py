"""What a user writes wrong, and what mxnet_gc says: each message names the field the user wrote and
what to use instead (a table of calls, no distributed job needed)."""
import os
import subprocess
import sys
import warnings

import mxnet as mx
import pytest
from mxnet import gluon

import mxnet_gc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def dense():
    net = gluon.nn.Dense(2)
    net.initialize()
    return net.collect_params()


def trainer(**kw):
    return mxnet_gc.gluon.Trainer(dense(), "sgd", {"learning_rate": 0.1}, **kw)


CASES = [  # (what the user wrote, the call, the exception, what the message must say)
    ("a typo in the store's name", lambda: trainer(kvstore="horovd", compression_params={"type": "4bit"}),
     ValueError, ["unknown kvstore 'horovd'", "did you mean 'horovod'?", "'dist_sync'"]),
    ("MXNet's device store", lambda: mxnet_gc.kvstore.create("dist_device_sync"),
     ValueError, ["kvstore 'dist_device_sync' is MXNet's", "'dist_sync' does what it does", "mx.kv.create"]),
    ("an unknown name to create", lambda: mxnet_gc.kvstore.create("zzz"), ValueError, ["unknown kvstore 'zzz'"]),
    ("2bit's key on 4bit", lambda: mxnet_gc.kvstore.Compression({"type": "4bit", "threshold": 0.5}),
     ValueError, ["unknown parameter(s) 'threshold'", "4bit takes 'thresholds'", "does not carry over"]),
    ("decreasing levels", lambda: mxnet_gc.codecs.create({"type": "4bit", "thresholds": [0.4, 0.2]}),
     ValueError, ["'thresholds' must be strictly increasing", "got [0.4, 0.2]", "level 1 (0.2) is not above level 0 "
                  "(0.4)"]),
    ("a misspelt parameter", lambda: mxnet_gc.codecs.create({"type": "4bit", "thresold": [0.4]}),
     ValueError, ["'thresold'", "did you mean 'thresholds'?"]),
    ("an lgc density above the ramp's default start", lambda: mxnet_gc.kvstore.Compression({"type": "lgc",
                                                                                           "density": 0.5}),
     ValueError, ["'density' 0.5", "default start, 'ramp_start' 0.25", "give a 'ramp_start' of at least 0.5"]),
    ("a ramp_start the user set too low", lambda: mxnet_gc.kvstore.Compression(
        {"type": "lgc", "density": 0.1, "ramp_start": 0.05}), ValueError, ["'ramp_start' must be at least density"]),
    ("dense_momentum without momentum", lambda: mxnet_gc.kvstore.Compression({"type": "lgc", "dense_momentum": True}),
     ValueError, ["'dense_momentum' must be False without 'momentum'", "got True"]),
    ("threshold_groups='yes'", lambda: trainer(kvstore="local", compression_params={"type": "4bit"},
                                               threshold_groups="yes"),
     ValueError, ["threshold_groups must be 'auto'", "got 'yes'"]),
    ("a dense warm-up for 'lgc'", lambda: trainer(kvstore="local", compression_params={"type": "lgc"},
                                                   dense_warmup_steps=10, update_on_kvstore=False),
     ValueError, ["'lgc' runs its own phases", "'dense_steps'", "dense_warmup_steps (other than 0) and merge do not apply"]),
    ("DGC's momentum correction beside the optimizer's momentum", lambda: mxnet_gc.gluon.Trainer(
        dense(), "sgd", {"learning_rate": 0.1, "momentum": 0.9}, kvstore="local", update_on_kvstore=False,
        compression_params={"type": "lgc", "momentum": 0.9}),
     ValueError, ["'momentum' 0.9 is DGC's momentum correction", "give the optimizer momentum 0, got 0.9"]),
    ("compression_params as a string", lambda: trainer(kvstore="local", compression_params="4bit"),
     ValueError, ["compression params must be a dict", "such as {'type': '4bit'}", "got '4bit'"]),
    ("an int32 gradient", lambda: mxnet_gc.codecs.create({"type": "4bit"}).encode(
        mx.nd.zeros(8, dtype="int32"), mx.nd.zeros(8)), TypeError, ["must be float32, got int32", ".astype('float32')"]),
    ("'auto' levels with no warm-up to fit them in", lambda: mxnet_gc.kvstore.Compression(
        {"type": "4bit", "thresholds": "auto", "warmup_steps": 0}), ValueError,
     ["'thresholds': 'auto' fits", "'warmup_steps' must be at least 1"]),
    ("'auto' for a codec alone", lambda: mxnet_gc.codecs.create({"type": "4bit", "thresholds": "auto"}), ValueError,
     ["fitted to each key's gradients by a store", "needs levels or a group name"]),
    ("'auto' for one key", lambda: mxnet_gc.kvstore.Compression({"type": "4bit", "per_key": {"w": "auto"}}),
     ValueError, ["'per_key'['w']", "applies to every key"]),
]


@pytest.mark.parametrize("what, call, kind, says", CASES, ids=[c[0] for c in CASES])
def test_message_names_the_field_and_the_fix(what, call, kind, says):
    with pytest.raises(kind) as err:
        call()
    for text in says:
        assert text in str(err.value), (what, str(err.value))
    assert "float16" not in str(err.value)


def test_compression_on_a_single_process_store_warns_and_the_names_agree():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer(kvstore="local", compression_params={"type": "4bit"})
    assert any("kvstore='local' trains in one process" in str(w.message) and "are not used" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    # 'gc_2bit' is mxnet_gc's 2bit kernels on a store, and the same encoding here
    assert mxnet_gc.codecs.create({"type": "gc_2bit", "threshold": 0.5}).config() == \
        mxnet_gc.codecs.create({"type": "2bit", "threshold": 0.5}).config()


def test_the_documented_launcher_command_prints_no_warning():
    proc = subprocess.run([sys.executable, "-m", "mxnet_gc.launch", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and "usage: python -m mxnet_gc.launch" in proc.stdout
    assert proc.stderr == "", proc.stderr
