"""MXNet 1.x's classic training APIs with the optimizer (SGD, momentum 0.9) on the servers: Module.fit and a
plain gluon.Trainer train with 4bit at its defaults (examples/classic_fashion_mnist.py, real 2-worker jobs).

Before 4bit rounded to the nearest level and fitted its levels ('thresholds': 'auto'), the 'medium' group
with floor rounding reached 0.635 here where uncompressed reaches 0.815 (tools/study_module.py --diagnose).
"""
import json
import math
import os
import subprocess
import sys

import pytest

from dist.job import LAUNCH, ROOT, output_of

pytestmark = pytest.mark.job  # every test a real job (tools/launch.py)

EXAMPLE = os.path.join(ROOT, "examples", "classic_fashion_mnist.py")


def train(tmp_path, *args):
    log = tmp_path / "log.json"
    proc = subprocess.run([sys.executable, LAUNCH, "-n", "2", "-s", "1", "--timeout", "240", sys.executable, EXAMPLE,
                           "--num-examples", "12000", "--num-epochs", "2", "--log", str(log)] + list(args),
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, output_of(proc)
    return json.loads(log.read_text()), proc.stdout


@pytest.mark.parametrize("api", ["module", "gluon"])
def test_4bit_defaults_train_with_momentum_on_the_servers(tmp_path, api):
    log, out = train(tmp_path, "--api", api)
    assert log["epochs"][-1]["test_accuracy"] >= 0.78
    assert "4bit levels fitted to each key's largest gradient values" in out
    # the store's own warm-up (Module.fit and a plain gluon.Trainer alike), announced once by rank 0, and its end
    assert out.count("mxnet_gc: dense float32 pushes for 50 steps (the warm-up: 'warmup_steps'), then 4bit") == 1, out
    assert out.count("mxnet_gc: step 50: the warm-up is over; pushes are now 4bit") == 1, out
    # the residual stays bounded against the gradient: no key's ratio keeps growing
    for key, rows in log["residuals"].items():
        assert len(rows) >= 5
        assert max(r / g for _, g, r in rows) < 4, key


def test_auto_levels_follow_the_gradients_scale(tmp_path):
    """Gradients 16x larger (the loss scaled, rescale_grad divided by it): every key's levels 16x larger."""
    levels = {}
    for scale in ("1", "16"):
        _, out = train(tmp_path, "--loss-scale", scale, "--num-epochs", "1")  # (60 steps: past the warm-up)
        rows = [line.split()[-4:] for line in out.splitlines() if line.startswith("[worker 0] fc")]
        levels[scale] = {name: (float(low), float(top)) for name, _, low, top in rows}
    assert sorted(levels["1"]) == ["fc1_bias", "fc1_weight", "fc2_bias", "fc2_weight", "fc3_bias", "fc3_weight"]
    for name, (low, top) in levels["1"].items():
        assert math.log2(top) == round(math.log2(top)) and top == 64 * low
        # (a power of two scales every gradient, sum, level and decoded value exactly: the same run, x16)
        assert levels["16"][name] == (16 * low, 16 * top), (name, levels["16"][name], (low, top))
