"""Checkpoints of mxnet_gc.gluon.Trainer on a real job (tests/dist/checkpoint_worker.py): MXNet's numbering
in the file names, the newest ``keep`` kept and older files deleted, a chosen step loaded, and the
weights exported to a file ``net.load_parameters`` reads."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import mxnet_gc
from dist.checkpoint_worker import network
from dist.job import HERE, LAUNCH, ROOT, output_of

pytestmark = pytest.mark.job  # every test a real job (tools/launch.py)


def job(tmp_path, *args):
    argv = [sys.executable, LAUNCH, "-n", "2", "-s", "1", "--timeout", "120", sys.executable,
            os.path.join(HERE, "checkpoint_worker.py"), str(tmp_path)] + list(args)
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, output_of(proc)
    return [dict(np.load(tmp_path / ("%s.rank%d.npz" % (args[0], r)))) for r in range(2)]


def test_keep_the_newest_load_a_step_and_export(tmp_path):
    trained = job(tmp_path, "save")
    with open(tmp_path / "ckpt.trainer.json") as f:
        kept = json.load(f)["checkpoints"]
    assert [e["step"] for e in kept] == [6, 4]
    names = sorted(os.listdir(tmp_path))
    assert "ckpt-0006.params" in names and "ckpt-0004.params" in names and "ckpt-0004.rank1.residuals" in names
    assert not [n for n in names if n.startswith("ckpt-0002")]  # (older than the newest 2: deleted)
    loaded = job(tmp_path, "load", "4")
    for r in range(2):
        assert int(loaded[r]["after"]) == 4
        assert "has no step 2; it keeps steps [6, 4]" in str(loaded[r]["error/2"])
        for name in (n for n in trained[0] if n.startswith("4/")):
            np.testing.assert_array_equal(loaded[r]["loaded/" + name[2:]], trained[0][name])
    # the newest checkpoint's weights, for inference without mxnet_gc
    net = network()
    mxnet_gc.checkpoint.export(str(tmp_path / "ckpt"), net, str(tmp_path / "model.params"))
    fresh = network()
    fresh.load_parameters(str(tmp_path / "model.params"))
    for name, p in fresh.collect_params().items():
        np.testing.assert_array_equal(p.data().asnumpy(), trained[0]["6/" + name])
    with pytest.raises(ValueError, match="keep must be an int >= 1"):
        mxnet_gc.checkpoint.save(str(tmp_path / "x"), None, 0, {}, b"", {}, keep=0)
