"""'layerwise_topk' on the parameter server: real jobs (tools/launch.py), every pulled value compared
exactly with a numpy simulation in which each worker sparsifies each chunk with its own state
(tests/topk_reference.py) and the servers sum the scattered values."""
import re

import numpy as np
import pytest

import topk_reference as ref
from dist.job import gradient, run_job
from mxnet_gc.kvstore import protocol

pytestmark = pytest.mark.job  # every test a real job (run_job)

PARAMS = {"density": 0.05, "adapt_rate": 0.1, "tolerance": 0.2, "reset_every": 3}


def simulate(spec, workers, servers, bound):
    """{(key, step): expected pulled value}: per chunk and worker, the reference sparsifier; summed."""
    comp = {k: v for k, v in spec["compression"].items() if k != "type"}
    expected = {}
    for i, (key, shape) in enumerate(spec["keys"]):
        n = int(np.prod(shape))
        # a key of at least the bound: parts of at most the bound, as many on every server
        sizes = protocol.split_sizes(n, servers * max(1, -(-n // (bound * servers)))) if n >= bound else [n]
        edges = np.cumsum([0] + sizes)
        states = [[ref.new_state(s) for s in sizes] for _ in range(workers)]
        for step in range(spec["steps"]):
            total = np.zeros(n, np.float32)
            for rank in range(workers):
                g = gradient(spec["seed"], rank, step, i, shape, spec["scale"]).ravel()
                for c, (b, e) in enumerate(zip(edges[:-1], edges[1:])):
                    idx, vals, _ = ref.step(g[b:e], states[rank][c], **comp)
                    total[b + idx] += vals
            expected[key, step] = total.reshape(shape)
    return expected


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_two_workers_two_servers_split_and_shared_messages(tmp_path, momentum):
    keys = [["big", [3000]], ["w1", [20, 10]], ["b1", [20]], ["tiny", [1]], ["w2", [7, 3]]]
    spec = {"keys": keys, "steps": 6, "scale": 1.0, "seed": 5, "lists": True,
            "groups": [["big"], ["w1", "b1"], ["tiny", "w2"]],
            "compression": dict(PARAMS, type="layerwise_topk", momentum=momentum)}
    proc, results = run_job(tmp_path, spec, workers=2, servers=2, env=["MXNET_GC_BIGARRAY_BOUND=1000"])
    expected = simulate(spec, 2, 2, bound=1000)
    assert sorted(results) == [0, 1]
    for rank, saved in results.items():
        for (key, step), want in expected.items():
            np.testing.assert_array_equal(saved["%s/%d" % (key, step)], want, err_msg="rank %d %s %d" % (rank, key, step))
    # one push per message and worker and step: 'big' in 4 parts, 2 shared messages
    pushes = [int(n) for n in re.findall(r"mxnet_gc server \d: (\d+) pushes", proc.stdout)]
    assert len(pushes) == 2 and sum(pushes) == (4 + 2) * 2 * 6


def test_sparse_pull_three_workers(tmp_path):
    """With compressed_pull the servers send the sum back as one sparse payload (every nonzero); sums of
    3 workers' values may round differently by order of arrival, so to float32 precision."""
    keys = [["w", [400]], ["b", [30]]]
    comp = dict(PARAMS, type="layerwise_topk")
    spec = {"keys": keys, "steps": 5, "scale": 1.0, "seed": 6, "lists": True,
            "compression": dict(comp, compressed_pull=True)}
    _, results = run_job(tmp_path, spec, workers=3, servers=1)
    expected = simulate(dict(spec, compression=comp), 3, 1, bound=10 ** 9)
    for rank, saved in results.items():
        for (key, step), want in expected.items():
            np.testing.assert_allclose(saved["%s/%d" % (key, step)], want, rtol=1e-6, atol=1e-6)
            assert np.count_nonzero(saved["%s/%d" % (key, step)]) == np.count_nonzero(want)
