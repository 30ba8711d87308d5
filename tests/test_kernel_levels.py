"""Every compiled copy of the kernels (baseline SSE2, AVX2, AVX-512) passes the exact-encoding tests
(quantizers and top-k sparsifier).

The library picks the best level the CPU has; MXNET_GC_ISA forces another, in a fresh process.
"""
import os
import subprocess
import sys

import pytest

import mxnet_gc

HERE = os.path.dirname(os.path.abspath(__file__))
LEVELS = ["baseline", "x86-64-v3", "x86-64-v4"]


def run_with_isa(isa, *args):
    env = dict(os.environ, MXNET_GC_ISA=isa)
    return subprocess.run([sys.executable, *args], cwd=HERE, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.system  # (the codec tests again in a nested pytest per level: not in-process)
@pytest.mark.parametrize("isa", [level for level in LEVELS if level != mxnet_gc.kernel_isa()])
def test_other_levels_encode_exactly(isa):
    probe = run_with_isa(isa, "-c", "import mxnet_gc; print(mxnet_gc.kernel_isa())")
    if probe.returncode != 0:
        assert "is not available on this CPU" in probe.stderr
        pytest.skip("%s: this CPU lacks it" % isa)
    assert probe.stdout.strip() == isa
    proc = run_with_isa(isa, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_threshold_codecs.py", "test_layerwise_topk.py",
                        "test_codec_properties.py", "test_mxnet_2bit_parity.py")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_unknown_level_is_refused():
    proc = run_with_isa("sse9", "-c", "import mxnet_gc")
    assert proc.returncode != 0
    assert "MXNET_GC_ISA must be one of baseline, x86-64-v3, x86-64-v4, got 'sse9'" in proc.stderr
