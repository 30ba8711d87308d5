"""docs/migration.md's edits, applied to a Horovod user's script in the shape of Horovod's own MXNet example
(examples/horovod_gluon.py: an optimizer object, compression=, gradient_predivide_factor=, --fp16-allreduce),
make an mxnet_gc job: uncompressed it gives Horovod's own losses bit for bit, and --fp16-allreduce selects
8bit, which starts after the warm-up and trains on (4bit's default path is the same code with another codec:
tests/test_horovod.py)."""
import json
import os
import re
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest

import mxnet_gc

from dist.job import ROOT, output_of

HOROVODRUN = os.path.join(os.path.dirname(sys.executable), "horovodrun")
STEPS = 60


def edits():
    """The (removed lines, added lines) of each diff block of the doc's "Coming from Horovod" section."""
    with open(os.path.join(ROOT, "docs", "migration.md")) as f:
        section = f.read().split("## Coming from Horovod", 1)[1]
    blocks = re.findall(r"```diff\n(.*?)```", section, re.S)
    assert len(blocks) == 3, blocks
    out = []
    for block in blocks:
        lines = block.splitlines()
        out.append(([l[1:] for l in lines if l.startswith("-")], [l[1:] for l in lines if l.startswith("+")]))
    return out


def edited(source):
    for removed, added in edits():
        old, new = "\n".join(removed) + "\n", "\n".join(added) + "\n"
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


def run(script, tmp_path, name, *args):
    path = tmp_path / ("job_%s.py" % name)  # (a script named horovod.py would hide the package)
    path.write_text(script)
    out = tmp_path / (name + ".json")
    proc = subprocess.run([HOROVODRUN, "-np", "2", "-H", "localhost:2", "--gloo", "--start-timeout", "60",
                           sys.executable, str(path), "--out", str(out)] + list(args),
                          cwd=os.path.join(ROOT, "examples"), capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "examples")))
    assert proc.returncode == 0, output_of(proc)
    return np.array(json.loads(out.read_text())), proc


@pytest.mark.job  # real jobs (horovodrun)
def test_the_documented_edits_turn_a_horovod_script_into_an_mxnet_gc_job(tmp_path):
    with open(os.path.join(ROOT, "examples", "horovod_gluon.py")) as f:
        original = f.read()
    ours = edited(original)
    assert "= hvd.DistributedTrainer(" not in ours and "= mxnet_gc.gluon.Trainer(" in ours
    horovod, _ = run(original, tmp_path, "horovod", "--steps", str(STEPS))
    four_bit = 'else {"type": "4bit"}'
    assert ours.count(four_bit) == 1
    uncompressed, _ = run(ours.replace(four_bit, 'else {"type": "none"}'), tmp_path, "uncompressed",
                          "--steps", str(STEPS))
    np.testing.assert_array_equal(uncompressed, horovod)  # (a sum at one worker's rate: Horovod's mean, bit for bit)
    # --fp16-allreduce now selects 8bit: dense for the warm-up's 50 steps (Horovod's losses), then 8bit's
    eight_bit, proc = run(ours, tmp_path, "eight_bit", "--steps", str(STEPS), "--fp16-allreduce")
    np.testing.assert_array_equal(eight_bit[:51], horovod[:51])
    assert not np.array_equal(eight_bit[51:], horovod[51:])
    assert "compression never started" not in proc.stdout + proc.stderr
    assert np.mean(eight_bit[-5:]) < 1.2 * np.mean(horovod[-5:]), (eight_bit, horovod)  # (it trains on)


def test_horovod_only_arguments_are_refused_with_what_to_use():
    net = mx.gluon.nn.Dense(2, in_units=3)
    net.initialize()
    opt = mx.optimizer.create("sgd", learning_rate=0.1)
    with pytest.raises(ValueError, match=re.escape("compression= is hvd.DistributedTrainer's: give mxnet_gc's codec "
                                                   "as compression_params instead; hvd.Compression.fp16 (half of "
                                                   "float32's bytes) maps to {'type': '8bit'}")):
        mxnet_gc.gluon.Trainer(net.collect_params(), opt, kvstore="local", compression="fp16")
    with pytest.raises(ValueError, match="gradient_predivide_factor= is hvd.DistributedTrainer's: drop it"):
        mxnet_gc.gluon.Trainer(net.collect_params(), opt, kvstore="local", gradient_predivide_factor=2.0)
    assert mxnet_gc.gluon.Trainer(net.collect_params(), opt, kvstore="local").optimizer is opt  # (an object, as gluon's)
