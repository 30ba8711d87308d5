"""`pip install .` in a fresh virtual environment that holds only mxnet and numpy, then a job through the
installed launcher (`python -m mxnet_gc.launch`) running the synthetic Gluon example: no source tree on
the path, nothing from the development .venv."""
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.system  # builds a venv, pip installs, then a job

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(argv, **kw):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, **kw)
    assert proc.returncode == 0, "%s failed:\n%s\n%s" % (argv, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def test_pip_install_in_a_fresh_venv_then_a_job(tmp_path):
    source = tmp_path / "source"  # a copy: the build writes next to the sources
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.so", "__pycache__",
                                                                 "*.egg-info", ".pytest_cache", ".hypothesis"))
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    # (--no-compile: no .pyc files written at install, which pip does not check; the imports below compile
    # what they use)
    run([python, "-m", "pip", "install", "--quiet", "--no-compile", "-c", os.path.join(ROOT, "constraints.txt"),
         "mxnet==1.9.1", "numpy<1.24"])
    run([python, "-m", "pip", "install", "--quiet", "--no-compile", str(source)])
    elsewhere = tmp_path / "run"
    elsewhere.mkdir()
    where = run([python, "-c", "import mxnet_gc, sys; print(mxnet_gc.__file__)"], cwd=elsewhere).stdout
    assert str(venv) in where
    assert os.path.exists(venv / "bin" / "mxnet-gc-launch")
    job = run([python, "-m", "mxnet_gc.launch", "-n", "2", "-s", "1", "--timeout", "300", python,
               str(source / "examples" / "synthetic_gluon.py"), "--compression", '{"type": "4bit"}', "--steps", "20"],
              cwd=elsewhere)
    losses = {}  # rank -> the losses it printed (steps 0, 10, 19), labelled by its rank
    for line in job.stdout.splitlines():
        if " loss " in line:
            label, words = line.split("] ")[0], line.split("] ")[1].split()
            assert label == "[worker %s" % words[1]
            losses.setdefault(int(words[1]), []).append(float(words[5].rstrip(",")))
    assert sorted(losses) == [0, 1] and all(len(v) == 3 and v[-1] < v[0] for v in losses.values()), losses
