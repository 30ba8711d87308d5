"""Gluon training on the compressed store (examples/synthetic_gluon.py under tools/launch.py): it trains,
and every worker ends with the same weights."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from dist.job import LAUNCH, ROOT, output_of

pytestmark = pytest.mark.job  # every test a real job (tools/launch.py)

HERE = os.path.dirname(os.path.abspath(__file__))
FOUR_BIT = {"type": "4bit", "thresholds": [0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032]}  # (warms up 50 steps)
FROM_THE_FIRST_STEP = dict(FOUR_BIT, warmup_steps=0)


def train(tmp_path, trainer, update_on_kvstore, compression, *extra):
    argv = [sys.executable, LAUNCH, "-n", "2", "-s", "1", "--timeout", "240", sys.executable,
            os.path.join(ROOT, "examples", "synthetic_gluon.py"), "--out", str(tmp_path), "--trainer", trainer,
            "--update-on-kvstore", str(int(update_on_kvstore)), "--compression", json.dumps(compression),
            "--steps", "40"] + list(extra)
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, output_of(proc)
    return proc, [dict(np.load(tmp_path / ("rank%d.npz" % r))) for r in range(2)]


@pytest.mark.parametrize("trainer,update_on_kvstore", [("gc", True), ("gc", False), ("gluon", True),
                                                       ("gluon", False)])
def test_two_worker_training_with_4bit(tmp_path, trainer, update_on_kvstore):
    proc, results = train(tmp_path, trainer, update_on_kvstore, FROM_THE_FIRST_STEP)
    assert re.search(r"step 0 loss [-\d.]+, pushing 4bit", proc.stdout), proc.stdout
    check_trained_and_equal(results)


@pytest.mark.parametrize("trainer, compression, options", [
    ("gc", FOUR_BIT, ["--dense-warmup-steps", "15"]),  # the trainer's schedule
    ("gluon", dict(FOUR_BIT, warmup_steps=15), []),  # gluon.Trainer: the store's own warm-up
    ("gc", FOUR_BIT, []),  # 50 steps by default: longer than the run
    ("gluon", FOUR_BIT, [])], ids=["trainer", "store", "default", "store-default"])
def test_dense_warmup_then_4bit(tmp_path, trainer, compression, options):
    proc, results = train(tmp_path, trainer, True, compression, *options)
    never = not options and "warmup_steps" not in compression
    assert re.search(r"step 10 loss [-\d.]+, pushing none", proc.stdout)  # within the warm-up: dense
    assert re.search(r"step 20 loss [-\d.]+, pushing %s" % ("none" if never else "4bit"), proc.stdout), proc.stdout
    # rank 0 warns at exit, once, when the compression never started (the default warm-up outlasted the run),
    # whichever trainer drives the store
    assert proc.stdout.count("UserWarning: mxnet_gc: the compression never started") == never, proc.stdout[-2000:]
    if trainer == "gluon":  # the store's own warm-up, announced by rank 0 at its first push and at its end
        assert proc.stdout.count("dense float32 pushes for %d steps" % (50 if never else 15)) == 1, proc.stdout
        assert ("step 15: the warm-up is over; pushes are now 4bit" in proc.stdout) != never, proc.stdout
    check_trained_and_equal(results)


def check_trained_and_equal(results):
    for r in results:
        first, last = r["losses"][:5].mean(), r["losses"][-5:].mean()
        assert last < 0.7 * first, (first, last)  # (from ln 10: ten overlapping classes)
    names = [n for n in results[0] if n != "losses"]
    assert names
    for name in names:  # every worker holds the same weights, bit for bit
        np.testing.assert_array_equal(results[0][name], results[1][name])
