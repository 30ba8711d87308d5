"""Merged, pipelined 'layerwise_topk' training on real jobs: the plan the trainer makes at its first step,
and every pulled sum equal to a numpy simulation of each worker's per-layer sparsifier."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import topk_reference as ref
from dist.job import HERE, LAUNCH, ROOT, output_of
from dist.merge_worker import COMPRESSION
from mxnet_gc.profiling import PROBE_MESSAGES, PROBE_REPEATS, PROBE_SIZES

WORKER = os.path.join(HERE, "merge_worker.py")


def run(tmp_path, merge, pipeline=True, workers=2, store="dist_sync", warmup=0):
    argv = [sys.executable, LAUNCH, "-n", str(workers), "-s", "1", "--timeout", "180", "-v", sys.executable, WORKER,
            str(tmp_path), str(merge), "1" if pipeline else "0", store, str(warmup)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, output_of(proc)
    with open(tmp_path / "plan.json") as f:
        plan = json.load(f)
    saved = [dict(np.load(tmp_path / ("rank%d.npz" % r))) for r in range(workers)]
    return proc, plan, saved


def check_sums(saved, workers, steps=5, dense_steps=0):
    """Every pulled sum: of the dense gradients for the first ``dense_steps``, then of each worker's
    per-layer sparsifier (its state starting when the compression starts)."""
    n_params = len({k.split("/")[2] for k in saved[0] if k.startswith("local/")})
    for i in range(n_params):
        states = [ref.new_state(saved[0]["local/0/%d" % i].size) for _ in range(workers)]
        for step in range(dense_steps + steps):
            total = np.zeros(saved[0]["local/0/%d" % i].size, np.float32)
            for r in range(workers):
                local = saved[r]["local/%d/%d" % (step, i)]
                if step < dense_steps:
                    total += local.ravel()
                    continue
                idx, vals, _ = ref.step(local, states[r], density=0.05, reset_every=4)
                total[idx] += vals
            for r in range(workers):
                np.testing.assert_array_equal(saved[r]["pulled/%d/%d" % (step, i)].ravel(), total,
                                              err_msg="param %d step %d rank %d" % (i, step, r))


def check_updates(saved, steps=5, dense_steps=0, lr=0.1, batch=16):
    """Every step's weights: the last step's less SGD's step of the pulled sum (float32, as MXNet's
    sgd_update computes it), on every worker, after ``step`` and after ``allreduce_grads`` and ``update``."""
    n_params = len({k.split("/")[2] for k in saved[0] if k.startswith("local/")})
    for s in saved:
        for i in range(n_params):
            weights = s["weights/init/%d" % i]
            for step in range(dense_steps + steps):
                expected = weights - np.float32(lr) * (np.float32(1.0 / batch) * s["pulled/%d/%d" % (step, i)])
                weights = s["weights/%d/%d" % (step, i)]
                np.testing.assert_allclose(weights, expected, rtol=1e-6, atol=1e-7,
                                           err_msg="param %d step %d" % (i, step))


@pytest.mark.job  # a real job (tools/launch.py); the last two tests run in-process
@pytest.mark.parametrize("merge, pipeline", [("dp", True), ("layerwise", False), ("one", True), (2000, True)])
def test_merged_training_sums_match_the_reference(tmp_path, merge, pipeline):
    proc, plan, saved = run(tmp_path, merge, pipeline)
    check_sums(saved, 2)
    check_updates(saved)
    # pipelined: each message pulled after its own barrier, as soon as every worker's push of it is summed
    assert plan["pull_each_message"] is pipeline
    names = plan["names"]
    # the plan covers every parameter once, in gradient-ready order (last layer first, whatever the names'
    # text order: gluon.Trainer sorts them by name)
    planned = [n for g in plan["groups"] for n in g]
    assert sorted(planned) == sorted(names)
    layers = [int(re.match(r"dense(\d+)_", n).group(1)) for n in planned]
    assert layers == sorted(layers, reverse=True)
    if merge == "layerwise":
        assert len(plan["groups"]) == len(names)
    if merge == "one":
        assert len(plan["groups"]) == 1
    assert re.search(r"merge plan \((dp|layerwise|one|fixed)\): %d messages" % len(plan["groups"]), proc.stdout)
    assert "transport cost" in proc.stdout
    pushes = [int(n) for n in re.findall(r"mxnet_gc server \d: (\d+) pushes", proc.stdout)]
    # 2 workers: 2 profiling steps with one message per parameter, then 3 steps with one per group, plus
    # the planner's transport probes (each size: a warm-up round and the timed ones, of a few messages each)
    # and its statistics (1)
    probes = len(PROBE_SIZES) * (PROBE_REPEATS + 1) * PROBE_MESSAGES
    assert pushes == [2 * (2 * len(names) + 3 * len(plan["groups"]) + probes + 1)]


@pytest.mark.job
def test_plan_is_made_after_the_warm_up_with_the_codec_that_runs(tmp_path):
    """With a dense warm-up, the profile phase starts with the compression: the plan's message sizes are
    the codec's payloads (not the warm-up's dense gradients); every worker is in the same phase at every
    step; the trainer takes the store by its other name."""
    import mxnet_gc

    proc, plan, saved = run(tmp_path, "dp", store="gc_dist_sync", warmup=3)
    check_sums(saved, 2, dense_steps=3)
    expected_phases = ["dense"] * 3 + ["profile"] * 2 + ["compressed"] * 3
    for s in saved:
        assert list(s["phases"]) == expected_phases
    assert plan["type"] == "gc_dist_sync"
    assert "mxnet_gc: step 3: phase dense -> profile (compressed)" in proc.stdout
    assert "mxnet_gc: step 5: phase profile -> compressed (compressed)" in proc.stdout
    codec = mxnet_gc.codecs.create({k: v for k, v in COMPRESSION.items() if k != "compressed_pull"})
    wire = {name: 4 * (codec.payload_size(n) + codec.pull_codec(2).payload_size(n))
            for name, n in zip(plan["names"], plan["sizes"])}
    printed = [int(b) for b in re.findall(r"^\[worker \d\]\s+(\d+) bytes  ready", proc.stdout, re.M)]
    assert printed == [sum(wire[n] for n in g) for g in plan["groups"]]
    assert sum(printed) < 0.5 * sum(8 * n for n in plan["sizes"])  # far below what dense sizes would give


def test_bad_merge_option():
    import mxnet as mx
    from mxnet import gluon
    import mxnet_gc

    net = gluon.nn.Dense(2)
    net.initialize()
    with pytest.raises(ValueError, match="merge must be 'dp', 'layerwise', 'one' or a bucket size"):
        mxnet_gc.gluon.Trainer(net.collect_params(), "sgd", kvstore=mx.kv.create("local"), merge="best")
    with pytest.raises(ValueError, match="merge needs one of mxnet_gc's stores"):
        mxnet_gc.gluon.Trainer(net.collect_params(), "sgd", kvstore=mx.kv.create("local"), merge="dp")


def test_pipelining_environment():
    """The trainer names each MXNet setting that would keep a pipelined plan from overlapping backward."""
    from mxnet_gc.config import Settings

    def problems(environ):
        return Settings.from_environ(environ).pipelining_problems()

    assert problems({"MXNET_EXEC_BULK_EXEC_TRAIN": "0"}) == []
    found = problems({})
    assert len(found) == 1 and "MXNET_EXEC_BULK_EXEC_TRAIN=0" in found[0]
    assert problems({"MXNET_CPU_TEMP_COPY": "4", "MXNET_EXEC_BULK_EXEC_TRAIN": "0"}) == []  # no longer matters
