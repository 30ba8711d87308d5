"""The API reference (``make docs``) builds from the docstrings without a warning."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.system  # (a Sphinx build in its own process)
def test_api_reference_builds_without_warnings(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", os.path.join(ROOT, "docs", "api"),
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    page = (tmp_path / "index.html").read_text()
    for name in ("Trainer", "DistSyncStore", "HorovodStore", "set_gradient_compression", "dense_warmup_steps",
                 "ThresholdGroup", "Compression"):
        assert name in page, name
