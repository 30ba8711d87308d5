"""The compressed dist_async store on real jobs: the servers apply each worker's push with the optimizer
as soon as it arrives, and pulls do not wait for the other workers.

What a worker pulls is compared exactly with a numpy/MXNet replay that applies the pushes in the
servers' order: the workers take turns (rank 0, 1, 2 each step), so the order is known; with racing
workers only the final weights are order-free (plain SGD on power-of-two levels: every sum is exact).
"""
import re

import mxnet as mx
import numpy as np
import pytest

import reference
from dist.job import gradient, initial_value, run_job

pytestmark = pytest.mark.job  # every test a real job (run_job)

POW2 = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]


def replay(spec, workers, opt_params):
    """{(key, step, rank): the weight after rank's push of that step}, the pushes applied in turn."""
    opt = mx.optimizer.create("sgd", **opt_params)
    expected = {}
    for i, (key, shape) in enumerate(spec["keys"]):
        weight = mx.nd.zeros(shape) if spec.get("zero_init") else mx.nd.array(initial_value(spec["seed"], i, shape))
        state = opt.create_state(i, weight)
        residuals = [np.zeros(shape, np.float32) for _ in range(workers)]
        for step in range(spec["steps"]):
            for rank in range(workers):
                g = gradient(spec["seed"], rank, step, i, shape, spec["scale"])
                q, residuals[rank] = reference.quantize_array(g, residuals[rank], POW2, "nearest")
                opt.update(i, weight, mx.nd.array(q), state)
                expected[key, step, rank] = weight.asnumpy()
        expected[key, "final"] = weight.asnumpy()
    return expected


def test_each_push_applied_at_once_in_the_servers_order(tmp_path):
    """3 workers take turns; each pulls the weights right after its own push: exactly the replay's weights
    after that push (momentum and weight decay on the servers, a message of two keys, a key split over
    both servers)."""
    opt_params = {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01, "rescale_grad": 0.5}
    spec = {"store": "dist_async", "keys": [["big", [3000]], [0, [20]], ["w", [3, 4]]], "groups": [["big"], [0, "w"]],
            "steps": 3, "scale": 1.0, "seed": 11, "turns": True, "final_pull": True,
            "compression": {"type": "4bit", "thresholds": POW2}, "optimizer": ["sgd", opt_params]}
    proc, results = run_job(tmp_path, spec, workers=3, servers=2, env=["MXNET_GC_BIGARRAY_BOUND=1000"])
    expected = replay(spec, 3, opt_params)
    for rank in range(3):
        for key, _ in spec["keys"]:
            for step in range(spec["steps"]):
                np.testing.assert_array_equal(results[rank]["%s/%d" % (key, step)], expected[key, step, rank],
                                              err_msg="rank %d key %s step %d" % (rank, key, step))
            np.testing.assert_array_equal(results[rank]["%s/final" % key], expected[key, "final"])
    # one push per message and worker and step: 'big' in four parts (two per server), the shared message once
    pushes = [int(n) for n in re.findall(r"mxnet_gc server \d: (\d+) pushes", proc.stdout)]
    assert sum(pushes) == 5 * 3 * 3


def test_racing_workers_reach_the_order_free_final_weights(tmp_path):
    """Workers push and pull as fast as they can (no barrier); plain SGD on power-of-two levels gives the
    same final weights in any order (from zero weights, every partial sum is exact); and what dist_async
    refuses is refused with a reason."""
    opt_params = {"learning_rate": 0.5}
    spec = {"store": "dist_async", "keys": [[0, [40]], ["w", [5, 3]]], "steps": 6, "scale": 2.0, "seed": 12,
            "lists": True, "final_pull": True, "async_refusals": True, "zero_init": True,
            "compression": {"type": "4bit", "thresholds": POW2}, "optimizer": ["sgd", opt_params]}
    _, results = run_job(tmp_path, spec, workers=2, servers=1)
    expected = replay(spec, 2, opt_params)
    for rank in range(2):
        saved = results[rank]
        for key, _ in spec["keys"]:
            np.testing.assert_array_equal(saved["%s/final" % key], expected[key, "final"])
        assert "'compressed_pull' and 'lgc' need dist_sync" in str(saved["compressed_pull_error"])
        assert "call set_optimizer first" in str(saved["push_without_optimizer_error"])
