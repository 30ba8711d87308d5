"""Compressed weight pulls with the optimizer on the servers (mxnet_gc/kvstore/ps/weight_pulls.py) on real jobs,
against a simulation here: every worker's gradients encoded with its residual, the servers' sum, MXNet's
optimizer applied to it, and after the dense warm-up the servers' weights minus the weights the workers
hold encoded on levels fitted to the weights' changes, what the encoding leaves kept for the next step;
each worker's pulled weights must equal the simulated weights the workers hold, bit for bit."""
import json
import math
import os
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest

import reference
from dist.job import HERE, LAUNCH, ROOT, gradient, initial_value, output_of, run_job

pytestmark = pytest.mark.job  # every test a real job (tools/launch.py)

POW2 = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
SGD = ["sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01, "rescale_grad": 0.5}]
FIT_STEPS = 20  # the dense steps whose weights' changes the levels are fitted to (the last ones)


def push_levels(comp):
    return [comp["threshold"]] if comp["type"] == "gc_2bit" else comp["thresholds"]


def fitted(comp, largest):
    """The levels of a key whose weights changed by at most ``largest`` in a step: 4bit's ladder (top level the
    power of two at or above 4x, 7 levels of ratio 2), gc_2bit's one level (the power of two at or above)."""
    largest = largest if largest > 0 and math.isfinite(largest) else 1.0
    if comp["type"] == "gc_2bit":
        return [2.0 ** math.ceil(math.log2(largest))]
    top = 2.0 ** math.ceil(math.log2(4 * largest))
    return [top * 2.0 ** (k - 6) for k in range(7)]


def workers_mean(value, workers):
    """The mean over the workers of one float32 value every worker has: summed in float32, divided after."""
    total = np.float32(0)
    for _ in range(workers):
        total = np.float32(total + np.float32(value))
    return float(total) / workers


class Servers:
    """One key on the simulated servers: MXNet's optimizer applied to each step's sum; in the dense steps the
    workers pull the weights, then the weights' difference from what they hold, encoded on the levels fitted to
    the dense steps' changes, what the encoding leaves kept for the next step (the gap)."""

    def __init__(self, opt, weight, warmup, codec_type, rounding, workers):
        self.opt, self.weight, self.warmup, self.workers = opt, mx.nd.array(weight), warmup, workers
        self.state = opt.create_state(0, self.weight)
        self.codec_type, self.rounding = codec_type, rounding
        self.held = self.weight.asnumpy()  # (pulled first)
        self.changes, self.gap, self.levels = [], None, None

    def step(self, step, total):
        """The weights every worker holds after the step whose pushes summed to ``total``."""
        before = self.weight.asnumpy()
        if step >= self.warmup:
            self.gap = (np.zeros_like(before) if self.gap is None else self.gap) - before
        self.opt.update(0, self.weight, mx.nd.array(total), self.state)
        after = self.weight.asnumpy()
        if step < self.warmup:
            self.changes.append(np.abs(after - self.held).max())
            self.held = after
        else:
            if self.levels is None:
                self.levels = fitted({"type": self.codec_type},
                                     workers_mean(max(self.changes[-FIT_STEPS:]), self.workers))
            q, self.gap = reference.quantize_array(after, self.gap, self.levels, self.rounding)
            self.held = (self.held + q).astype(np.float32)
        return self.held


def simulate(spec, workers):
    """{(key, step): the weights every worker holds after the step's pull}."""
    comp = spec["compression"]
    warmup, rounding = comp["warmup_steps"], reference.rounding_of(comp)
    name, params = spec["optimizer"]
    expected = {}
    for i, (key, shape) in enumerate(spec["keys"]):
        servers = Servers(mx.optimizer.create(name, **params), initial_value(spec["seed"], i, shape), warmup,
                          comp["type"], rounding, workers)
        residuals = [np.zeros(shape, np.float32) for _ in range(workers)]
        for step in range(spec["steps"]):
            total = np.zeros(shape, np.float32)
            for rank in range(workers):
                g = gradient(spec["seed"], rank, step, i, shape, spec["scale"], spec.get("nonfinite"), spec.get("grid"))
                if step < warmup:  # dense: a non-finite value is sent as 0
                    q = np.where(np.isfinite(g), g, np.float32(0))
                else:
                    q, residuals[rank] = reference.quantize_array(g, residuals[rank], push_levels(comp), rounding)
                total = (total + q).astype(np.float32)
            expected[key, step] = servers.step(step, total)
    return expected


def check(results, expected, workers, steps=None):
    assert sorted(results) == list(range(workers))
    for rank, saved in results.items():
        for (key, step), want in expected.items():
            if steps is None or step in steps:
                np.testing.assert_array_equal(saved["%s/%d" % (key, step)], want,
                                              err_msg="rank %d key %s step %d" % (rank, key, step))


def spec_of(compression, **more):
    return dict({"keys": [["w", [2000]], [3, [4, 5]]], "steps": 9, "scale": 1.0, "seed": 11, "lists": True,
                 "pull_first": True, "optimizer": SGD,
                 "compression": dict(compression, compressed_pull=True, warmup_steps=3)}, **more)


def test_two_workers_two_servers_a_key_in_parts(tmp_path):
    """4bit both ways with momentum on the servers; key 'w' cut into 2 parts, one per server."""
    spec = spec_of({"type": "4bit", "thresholds": POW2})
    _, results = run_job(tmp_path, spec, workers=2, servers=2, env=["MXNET_GC_BIGARRAY_BOUND=1000"])
    expected = simulate(spec, 2)
    check(results, expected, 2)
    changed = [np.count_nonzero(expected["w", s] != expected["w", s - 1]) for s in range(4, 9)]
    assert min(changed) > 100  # (the compressed steps do move the weights)


def test_three_workers_one_server_gc_2bit_with_non_finite_gradients(tmp_path):
    """gc_2bit both ways; a NaN (dense warm-up: sent as 0) and an inf (compressed: dropped, the residual kept)
    in the gradients, as the push path treats them.  (Gradients on a grid of 2^-10: the servers add 3 dense
    pushes in the order they arrive.)"""
    spec = spec_of({"type": "gc_2bit", "threshold": 0.5}, nonfinite=[[1, 1, 0, 7, "nan"], [2, 5, 1, 3, "inf"]],
                   grid=1024)
    _, results = run_job(tmp_path, spec, workers=3, servers=1)
    check(results, simulate(spec, 3), 3)
    for saved in results.values():
        assert all(np.isfinite(saved["%s/%d" % (k, s)]).all() for k in ("w", 3) for s in range(9))


def test_a_resumed_job_pulls_what_the_uninterrupted_one_does(tmp_path):
    """A checkpoint after step 5 (each worker's residuals, the servers' optimizer states and the differences
    they have not sent, rank 0's weights), resumed by a new job: steps 6 - 8 pull the same weights, bit for
    bit, as the job that went on."""
    spec = spec_of({"type": "4bit", "thresholds": POW2}, checkpoint_at=5)
    env = ["MXNET_GC_BIGARRAY_BOUND=1000"]
    _, whole = run_job(tmp_path, spec, workers=2, servers=2, env=env)
    check(whole, simulate(spec, 2), 2)
    out = str(tmp_path / "out")
    resumed_path = tmp_path / "resumed"
    resumed_path.mkdir()
    _, resumed = run_job(resumed_path, dict(spec, checkpoint_at=None, resume_from=[out, 5]), workers=2, servers=2,
                         env=env)
    for rank in range(2):
        for key in ("w", 3):
            for step in (6, 7, 8):
                np.testing.assert_array_equal(resumed[rank]["%s/%d" % (key, step)], whole[rank]["%s/%d" % (key, step)],
                                              err_msg="rank %d key %s step %d" % (rank, key, step))


def replay(results, workers):
    """{key: [the weights every worker holds after each step]} simulated from what the workers pushed (the
    gradients their backward made) and the optimizer they sent, from rank 0's first pull (the weights it
    initialized); the push levels are those the store fitted ('thresholds': 'auto')."""
    first = results[0]
    compression = json.loads(str(first["compression"]))
    params = json.loads(str(first["optimizer"]))
    warmup = params.pop("dense_steps", compression["warmup_steps"])  # (mxnet_gc's trainer: its schedule's)
    expected = {}
    for key in json.loads(str(first["keys"])):
        push = compression["per_key"][str(key)]
        pulled = first["pulled/%s" % key]
        servers = Servers(mx.optimizer.create("sgd", **params), pulled[0], warmup, "4bit", "nearest", workers)
        residuals, steps = [np.zeros_like(pulled[0]) for _ in range(workers)], []
        for step in range(len(first["pushed/%s" % key])):
            total = np.zeros_like(pulled[0])
            for rank in range(workers):
                g = results[rank]["pushed/%s" % key][step]
                if step >= warmup:
                    g, residuals[rank] = reference.quantize_array(g, residuals[rank], push["thresholds"], "nearest")
                total = (total + g).astype(np.float32)
            steps.append(servers.step(step, total))
        expected[key] = steps
    return expected


@pytest.mark.parametrize("api", ["module", "gluon", "gc"])
def test_module_fit_and_a_plain_gluon_trainer_with_momentum_on_the_servers(tmp_path, api):
    """MXNet's classic APIs (tests/dist/classic_worker.py: a small MLP, SGD with momentum 0.9 on the servers),
    and mxnet_gc's trainer with update_on_kvstore=True, 4bit both ways at its defaults after a warm-up of 4
    steps: every weight pulled equals the replay."""
    compression = {"type": "4bit", "compressed_pull": True, "warmup_steps": 4}
    argv = [sys.executable, LAUNCH, "-n", "2", "-s", "1", "--timeout", "120", sys.executable,
            os.path.join(HERE, "classic_worker.py"), str(tmp_path), api, json.dumps(compression)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, output_of(proc)
    results = {r: dict(np.load(tmp_path / ("rank%d.npz" % r))) for r in range(2)}
    expected = replay(results, 2)
    assert len(expected) == 4  # (2 layers: weights and biases)
    for key, steps in expected.items():
        for rank in range(2):
            pulled = results[rank]["pulled/%s" % key]
            assert len(pulled) == len(steps) + 1 == 13  # (the first: the initial weights)
            for step, want in enumerate(steps):
                np.testing.assert_array_equal(pulled[step + 1], want, err_msg="%s rank %d key %s step %d"
                                              % (api, rank, key, step))
        assert not np.array_equal(steps[-1], steps[4])  # (the compressed steps move the weights)
