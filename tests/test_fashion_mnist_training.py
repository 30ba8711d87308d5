"""The Fashion-MNIST example on real jobs: per-layer groups are chosen identically everywhere, and a run
resumed from a checkpoint ends exactly where an uninterrupted run ends."""
import json
import os
import subprocess
import sys

import numpy as np
import mxnet as mx

from dist.job import LAUNCH, ROOT

EXAMPLE = os.path.join(ROOT, "examples", "train_fashion_mnist.py")
QUICK = ["--limit", "1280", "--batch-size", "64", "--groups", "--calibration-steps", "5"]


def train(tmp_path, *args):
    argv = [sys.executable, LAUNCH, "-n", "2", "-s", "1", "--timeout", "300", sys.executable, EXAMPLE] + QUICK + list(args)
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=360)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_resumed_run_equals_uninterrupted_run(tmp_path):
    whole, first, resumed = (str(tmp_path / n) for n in ("whole", "first", "resumed"))
    log = str(tmp_path / "log.json")
    proc = train(tmp_path, "--epochs", "2", "--checkpoint", whole, "--log", log)
    assert "threshold groups after 5 calibration steps" in proc.stdout
    train(tmp_path, "--epochs", "1", "--checkpoint", first)
    train(tmp_path, "--epochs", "2", "--resume", first, "--checkpoint", resumed)
    a, b = mx.nd.load(whole + ".params"), mx.nd.load(resumed + ".params")
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name].asnumpy(), b[name].asnumpy(), err_msg=name)
    for rank in range(2):
        with np.load("%s.rank%d.residuals" % (whole, rank)) as x, np.load("%s.rank%d.residuals" % (resumed, rank)) as y:
            assert sorted(x.files) == sorted(y.files)
            for k in x.files:
                np.testing.assert_array_equal(x[k], y[k])
    with open(whole + ".trainer.json") as f:
        table = json.load(f)["group_table"]
    assert {row["group"] for row in table} <= {"small", "medium", "large"}
    with open(log) as f:
        epochs = json.load(f)["epochs"]
    assert len(epochs) == 2 and all(0 < e["bytes_sent"] < e["dense_push_bytes"] for e in epochs)


def test_gluoncv_resnet20_runs_with_per_layer_groups(tmp_path):
    log = str(tmp_path / "log.json")
    proc = train(tmp_path, "--model", "resnet20", "--epochs", "1", "--log", log)
    assert "== report ==" in proc.stdout and "compression ratio of the sent traffic" in proc.stdout
    with open(log) as f:
        run = json.load(f)
    assert len(run["groups"]) == 65  # every parameter with a gradient got a group
    assert run["epochs"][0]["test_accuracy"] > 0.1  # better than chance after 10 steps
