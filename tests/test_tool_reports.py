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


def test_the_step_profile_sorts_a_recorded_step_into_lanes(tmp_path):
    """A step recorded by MXNet's profiler as the benchmark's worker records it (worker.record_trace):
    its operators and the Python thread's waits land in their lanes, times from the step's start divided
    by the dilation; nothing outside the step counts."""
    import mxnet as mx

    from tools import profile_pipeline
    from tools.netbench import worker

    trace = str(tmp_path / "trace.json")
    x = mx.nd.ones((64, 64))

    def step(i):
        y = mx.nd.dot(x, x) + i
        y.wait_to_read()

    worker.record_trace(step, 0, trace, steps=2)
    found, step_ms = profile_pipeline.spans(trace, 2.0)
    lanes = {lane for lane, *_ in found}
    assert "compute" in lanes and "wait" in lanes, found
    assert all(0 <= s <= e <= step_ms + 1e-6 for *_, s, e in found)
    assert {name for lane, name, *_ in found if lane == "compute"} >= {"dot"}
    assert abs(profile_pipeline.spans(trace, 1.0)[1] - 2 * step_ms) < 1e-6  # undilated: twice as long


def test_the_step_profile_knows_each_lane_and_counts_overlaps_once():
    from tools import profile_pipeline

    main = 7
    cases = {("Convolution", "operator", 3): "compute", ("ImperativeBulk", "operator", 3): "compute",
             ("mxgc_message_encode", "operator", 3): "encode", ("mxgc_message_decode", "operator", 3): "decode",
             ("KVStoreDistDefaultPush", "operator", 9): "push", ("horovod_allreduce", "operator", 9): "push",
             ("KVStoreDistDefaultStoragePull", "operator", 9): "pull", ("multi_sgd_mom_update", "operator", 3): "update",
             ("CopyCPU2CPU", "operator", 3): "copy", ("MXKVStoreBarrier", "MXNET_C_API", main): "barrier",
             ("MXNDArrayWaitToRead", "MXNET_C_API", main): "wait", ("MXNDArrayWaitToRead", "MXNET_C_API", 3): None,
             ("DeleteVariable", "operator", 3): None, ("MXNDArrayFree", "MXNET_C_API", main): None,
             ("LeakyReLU,Convolution,LeakyReLU", "operator", 3): "autoencoder"}
    for (name, category, thread), lane in cases.items():
        assert profile_pipeline.lane_of({"name": name, "cat": category, "tid": thread}, main) == lane, name
    row = lambda name, start, end: {"name": name, "start_ms": str(start), "end_ms": str(end)}
    assert profile_pipeline.is_backward(row("_backward_Convolution", 1, 1.1))
    assert profile_pipeline.is_backward(row("ImperativeBulk", 1, 12))
    assert not profile_pipeline.is_backward(row("ImperativeBulk", 40, 40.1))  # (the stores' small bulked operations)
    assert not profile_pipeline.is_backward(row("Convolution", 1, 9))
    assert profile_pipeline.busy([(0, 2), (1, 3), (5, 6)]) == 4
    assert profile_pipeline.busy([]) == 0
