"""docs/migration.md's edits, applied to a Horovod user's script (examples/horovod_gluon.py), make an
mxnet_gc job: uncompressed it gives Horovod's own losses step by step, and with 4bit it trains."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from dist.job import ROOT, output_of

pytestmark = pytest.mark.job  # a real job (horovodrun)
HOROVODRUN = os.path.join(os.path.dirname(sys.executable), "horovodrun")
STEPS = 60


def edits():
    """The (removed lines, added lines) of each diff block of the doc's "Coming from Horovod" section."""
    with open(os.path.join(ROOT, "docs", "migration.md")) as f:
        section = f.read().split("## Coming from Horovod", 1)[1]
    blocks = re.findall(r"```diff\n(.*?)```", section, re.S)
    assert len(blocks) == 2, blocks
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


def run(script, tmp_path, name):
    path = tmp_path / ("job_%s.py" % name)  # (a script named horovod.py would hide the package)
    path.write_text(script)
    out = tmp_path / (name + ".json")
    proc = subprocess.run([HOROVODRUN, "-np", "2", "-H", "localhost:2", "--gloo", "--start-timeout", "60",
                           sys.executable, str(path), "--steps", str(STEPS), "--out", str(out)],
                          cwd=os.path.join(ROOT, "examples"), capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "examples")))
    assert proc.returncode == 0, output_of(proc)
    return np.array(json.loads(out.read_text()))


def test_the_documented_edits_turn_a_horovod_script_into_an_mxnet_gc_job(tmp_path):
    with open(os.path.join(ROOT, "examples", "horovod_gluon.py")) as f:
        original = f.read()
    ours = edited(original)
    assert "= hvd.DistributedTrainer(" not in ours and "= mxnet_gc.gluon.Trainer(" in ours
    horovod = run(original, tmp_path, "horovod")
    four_bit_params = '{"type": "4bit", "thresholds": "medium"}'
    assert ours.count(four_bit_params) == 1
    uncompressed = run(ours.replace(four_bit_params, '{"type": "none"}'), tmp_path, "uncompressed")
    np.testing.assert_allclose(uncompressed, horovod, rtol=2e-4, atol=1e-5)  # (sum x lr / W against a mean)
    four_bit = run(ours, tmp_path, "four_bit")
    assert np.mean(four_bit[-10:]) < 0.5 * np.mean(four_bit[:5]), four_bit
