"""What a user writes wrong, and what mxnet_gc says: each message names the field the user wrote and
what to use instead (a table of calls, no distributed job needed)."""
import os
import subprocess
import sys
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

import mxnet_gc
from mxnet_gc.config import Settings
from mxnet_gc.kvstore import agreement
from mxnet_gc.kvstore.store_clock import StoreClock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def dense():
    net = gluon.nn.Dense(2)
    net.initialize()
    return net.collect_params()


def trainer(**kw):
    return mxnet_gc.gluon.Trainer(dense(), "sgd", {"learning_rate": 0.1}, **kw)


class SameOnEveryWorker:
    """A store's collective mean (StoreBase.average, in float32) over ``num_workers`` workers that all saw the
    same values."""

    def __init__(self, num_workers):
        self.num_workers = num_workers

    def average(self, name, values):
        return np.asarray(values, np.float32) * np.float32(self.num_workers) / self.num_workers


def auto_fit(params, largest, workers=1):
    """A store's fit of 'auto' levels (its step clock's) for a key 'w' whose gradients reach ``largest`` on
    each of ``workers``."""
    clock = StoreClock(mxnet_gc.kvstore.Compression(dict(params, warmup_steps=1), workers))
    clock.fitter.observe({"w": mx.nd.array([largest / 2, -largest])})
    return clock.fit(SameOnEveryWorker(workers), ["w"], ["w"])


def raise_disagreement(what, configs):
    """The message the servers give every worker when the workers' ``configs`` ({rank: settings}) differ
    (Aggregator.on_config; tests/test_dist_kvstore.py runs it in a job), raised."""
    raise ValueError(agreement.disagreement(what, configs))


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
    ("a scale for 8bit, on a store", lambda: mxnet_gc.kvstore.Compression({"type": "8bit", "scale": 3}), ValueError,
     ["8bit: unknown parameter(s) 'scale'; 8bit takes no parameters: its scale is each array's largest |value| "
      "/ 127; accepted: none of its own; a store's: compressed_pull (True or False", "warmup_steps (an int >= 0"]),
    ("a scale for the 8bit codec alone", lambda: mxnet_gc.codecs.create({"type": "8bit", "scale": 3}), ValueError,
     ["8bit: unknown parameter(s) 'scale'; 8bit takes no parameters: its scale is each array's largest |value| / "
      "127; accepted: none of its own"]),
    ("a store option misspelt", lambda: mxnet_gc.kvstore.Compression({"type": "4bit", "warmup_step": 5}), ValueError,
     ["unknown parameter(s) 'warmup_step'", "did you mean 'warmup_steps'?"]),
    ("a gc_2bit threshold whose compressed pull overflows", lambda: mxnet_gc.kvstore.Compression(
        {"type": "gc_2bit", "threshold": 3.4e38, "compressed_pull": True}, num_workers=2), ValueError,
     ["gc_2bit: 'compressed_pull' with 2 workers re-encodes the servers' sum on the levels times 2",
      "the threshold 3.4e+38 is too large for that in float32", "leave 'compressed_pull' off"]),
    ("a per-key top level whose 5bit pull overflows", lambda: mxnet_gc.kvstore.Compression(
        {"type": "4bit", "thresholds": [1.0], "pull_bits": 5, "compressed_pull": True, "per_key": {"w": [1.0, 2e38]}},
        num_workers=2), ValueError, ["'per_key'['w']: 4bit: 'compressed_pull' with 2 workers", "top level 2e+38"]),
    ("'auto' levels for gradients of 5e37", lambda: auto_fit({"type": "4bit"}, 5e37), ValueError,
     ["key 'w': the 'auto' fit of its levels failed: its gradients are too large to fit levels in float32",
      "largest |value| 5e+37", "gives levels 2^122 .. 2^128", "'thresholds'[6] must be positive and finite",
      "scale the loss down, or give the key fixed levels in 'per_key'"]),
    ("'auto' levels for denormal gradients", lambda: auto_fit({"type": "4bit"}, 1e-44), ValueError,
     ["key 'w': the 'auto' fit of its levels failed: its gradients are too small", "'thresholds'[0] must be positive",
      "scale the loss up"]),
    ("a gc_2bit 'auto' level that rounds every 0 up", lambda: auto_fit({"type": "gc_2bit", "threshold": "auto"}, 1e-45),
     ValueError, ["key 'w': the 'auto' fit", "too small", "half of it, its rounding bound, is 0"]),
    ("a gc_2bit 'auto' level whose compressed pull overflows", lambda: auto_fit(
        {"type": "gc_2bit", "threshold": "auto", "compressed_pull": True}, 1.5e38, workers=2), ValueError,
     ["key 'w': the 'auto' fit of its levels failed", "gives levels 2^127", "'compressed_pull' with 2 workers"]),
    ("more kernel threads than a system gives", lambda: Settings.from_environ({"MXNET_GC_NUM_THREADS": "100000"}),
     ValueError, ["MXNET_GC_NUM_THREADS must be at most 1024", "libgomp aborts the process", "got 100000"]),
    ("OpenMP's thread count as the kernels'", lambda: Settings.from_environ({"OMP_NUM_THREADS": "5000"}),
     ValueError, ["OMP_NUM_THREADS must be at most 1024"]),
    ("set_num_threads too high", lambda: mxnet_gc.set_num_threads(100000), ValueError,
     ["num_threads must be an int in 0..1024", "got 100000"]),
    ("a big-array bound below the servers", lambda: Settings.from_environ(
        {"MXNET_GC_BIGARRAY_BOUND": "1", "DMLC_NUM_SERVER": "2"}), ValueError,
     ["MXNET_GC_BIGARRAY_BOUND=1 is below the number of servers (DMLC_NUM_SERVER=2)", "set it to at least 2"]),
    ("workers with different big-array bounds", lambda: raise_disagreement("settings", {
        r: Settings.from_environ({"MXNET_GC_BIGARRAY_BOUND": b}).shared() for r, b in ((0, "1000"), (1, "2000"))}),
     ValueError,
     ["the workers set different environment settings (rank 0 / rank 1): MXNET_GC_BIGARRAY_BOUND: 1000 / 2000; "
      "every worker must give these variables the same value"]),
]


@pytest.mark.parametrize("what, call, kind, says", CASES, ids=[c[0] for c in CASES])
def test_message_names_the_field_and_the_fix(what, call, kind, says):
    with pytest.raises(kind) as err:
        call()
    for text in says:
        assert text in str(err.value), (what, str(err.value))
    assert "float16" not in str(err.value)


def test_the_limits_themselves_are_accepted():
    assert Settings.from_environ({"MXNET_GC_NUM_THREADS": "1024", "OMP_NUM_THREADS": "100000"}).num_threads == 1024
    assert Settings.from_environ({"MXNET_GC_BIGARRAY_BOUND": "2", "DMLC_NUM_SERVER": "2"}).bigarray_bound == 2
    assert auto_fit({"type": "4bit"}, 4e37)[0]["w"][-1] == 2.0 ** 127  # the largest top level float32 holds
    assert mxnet_gc.kvstore.Compression({"type": "gc_2bit", "threshold": 1.7e38, "compressed_pull": True}, 2)


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


def test_every_help_description_is_whole():
    """The examples' and tools' --help start with their docstring's first paragraph, a whole sentence (a
    first line alone was cut mid-sentence in seven of them)."""
    import ast
    checked = 0
    for folder in ("examples", "tools"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if not name.endswith(".py"):
                continue
            with open(os.path.join(ROOT, folder, name)) as f:
                source = f.read()
            if "ArgumentParser(" not in source or "__doc__" not in source:
                continue
            assert '__doc__.split("\\n")' not in source, "%s/%s: --help shows a line of its docstring" % (folder, name)
            first = ast.get_docstring(ast.parse(source), clean=False).split("\n\n")[0].strip()
            assert first.endswith((".", ")", ":")) and len(first) < 600, "%s/%s: %r" % (folder, name, first[-80:])
            checked += 1
    assert checked >= 19
