"""The tools' common report lines: a target missed is marked, progress counts runs with an ETA, and a
benchmark refuses what it does not know instead of running something else under its name."""
import sys

import pytest

from tools import progress, targets

pytestmark = pytest.mark.unit


def test_a_missed_target_is_marked_and_a_met_one_is_not():
    assert targets.line("4bit encode / copy bandwidth", 0.0, ">=", 0.5) == \
        "- 4bit encode / copy bandwidth: 0.00 (target >= 0.5)  **MISSED**"
    assert targets.line("x", 0.5, ">=", 0.5) == "- x: 0.50 (target >= 0.5)"
    assert targets.line("y", 1.06, "<=", 1.05).endswith("**MISSED**")
    assert targets.line("y", 1.05, "<=", 1.05) == "- y: 1.05 (target <= 1.05)"


def test_progress_counts_runs_and_estimates_the_rest_from_their_mean():
    now = [0.0]
    p = progress.Progress(4, clock=lambda: now[0])
    now[0] = 90.0
    assert p.step("first") == "[run 1 of 4, elapsed 1m30s, ETA 4m30s] first"
    now[0] = 7200.0
    assert p.step("second") == "[run 2 of 4, elapsed 2h00m, ETA 2h00m] second"


def test_the_kvstore_benchmark_refuses_an_unknown_model_or_mode(monkeypatch, capsys):
    from tools import bench_kvstore

    for flag, value in (("--models", "xyz"), ("--modes", "5bit")):
        monkeypatch.setattr(sys, "argv", ["bench_kvstore", flag, value])
        with pytest.raises(SystemExit) as e:
            bench_kvstore.main()
        assert e.value.code == 2 and "invalid choice: %r" % value in capsys.readouterr().err


def test_the_code_hash_follows_the_code_only(tmp_path):
    """Runs are reused only for the same code: the hash changes with a source file of the library, the C++
    kernels or the examples, and not with built files, caches or anything else."""
    from tools import provenance

    for folder in provenance.CODE_FOLDERS:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.py").write_text("x = 1\n")
    first = provenance.code_hash(str(tmp_path))
    (tmp_path / "mxnet_gc" / "libmxnet_gc.so").write_bytes(b"\0")
    (tmp_path / "mxnet_gc" / "__pycache__").mkdir()
    (tmp_path / "mxnet_gc" / "__pycache__" / "a.py").write_text("cached")
    (tmp_path / "docs.md").write_text("text")
    assert provenance.code_hash(str(tmp_path)) == first
    for folder in provenance.CODE_FOLDERS:
        (tmp_path / folder / "a.py").write_text("x = 2\n")
        assert provenance.code_hash(str(tmp_path)) != first
        (tmp_path / folder / "a.py").write_text("x = 1\n")
    (tmp_path / "src_cpp" / "k.cc").write_text("int k;")
    assert provenance.code_hash(str(tmp_path)) != first
