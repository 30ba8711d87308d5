"""The merge planner: its dynamic program is optimal (checked against every partition of small random
instances), its baselines, the cost-model fit, and its errors."""
import itertools

import numpy as np
import pytest

from mxnet_gc import merge_planner as mp


def random_layers(rng, n):
    ready = np.cumsum(rng.exponential(1e-3, n))
    return [mp.Layer("l%d" % i, int(rng.integers(4, 400000)), float(ready[i]), float(rng.exponential(2e-4)))
            for i in range(n)]


def every_partition(n):
    """Every way to cut n layers into consecutive groups, as end indices."""
    for k in range(n):
        for cuts in itertools.combinations(range(1, n), k):
            yield list(cuts) + [n]


@pytest.mark.parametrize("seed", range(40))
def test_dp_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    layers = random_layers(rng, int(rng.integers(1, 10)))
    cost = mp.CostModel(alpha=float(rng.choice([1e-5, 1e-4, 1e-3, 5e-3])), beta=float(rng.choice([8e-10, 8e-9, 8e-8])),
                        host=float(rng.choice([0.0, 1e-4, 1e-3])), contention=float(rng.choice([0.0, 0.5, 1.0])))
    best = min(mp.finish_time(layers, bounds, cost) for bounds in every_partition(len(layers)))
    plan = mp.plan_optimal(layers, cost)
    assert plan.finish == pytest.approx(best, rel=1e-9)
    bounds = np.cumsum([len(g) for g in plan.groups]).tolist()
    assert mp.finish_time(layers, bounds, cost) == pytest.approx(plan.finish, rel=1e-12)
    assert [n for g in plan.groups for n in g] == [layer.name for layer in layers]
    for other in (mp.plan_layerwise, mp.plan_one_bucket):
        assert plan.finish <= other(layers, cost).finish * (1 + 1e-12)


def test_extremes():
    """A huge per-message cost merges everything; a free message with slow bytes sends each layer alone."""
    layers = [mp.Layer("a", 1000, 0.001, 0), mp.Layer("b", 1000, 0.002, 0), mp.Layer("c", 1000, 0.003, 0)]
    assert mp.plan_optimal(layers, mp.CostModel(1.0, 1e-9)).groups == [["a", "b", "c"]]
    assert mp.plan_optimal(layers, mp.CostModel(0.0, 1e-6)).groups == [["a"], ["b"], ["c"]]


def test_host_cost_merges_messages_that_gain_nothing():
    """x1 is worth sending at once (10 ms on the link); x2, x3 and x4 are small and the link is busy
    with x1 until after x4 is ready: each message of them sent while backward runs would only delay the
    rest by its host time, so they go as one."""
    layers = [mp.Layer("x1", 10 ** 7, 0.001, 0), mp.Layer("x2", 10, 0.0011, 0), mp.Layer("x3", 10, 0.005, 0),
              mp.Layer("x4", 10, 0.0101, 0)]
    cost = mp.CostModel(1e-4, 1e-9, host=1e-4, contention=1.0)
    plan = mp.plan_optimal(layers, cost)
    assert plan.groups == [["x1"], ["x2", "x3", "x4"]]
    first = 0.001 + 1e-4 + 1e-4 + 1e-2
    assert plan.finish == pytest.approx(max(first, 0.0101 + 1e-4 + 1e-4) + 1e-4 + 30e-9)
    assert plan.finish < mp.plan_layerwise(layers, cost).finish


def test_baselines_and_description():
    layers = [mp.Layer("l%d" % i, 100, 0.001 * i, 0.0) for i in range(5)]
    cost = mp.CostModel(1e-4, 1e-8)
    assert mp.make_plan("layerwise", layers, cost).groups == [["l%d" % i] for i in range(5)]
    assert mp.make_plan("one", layers, cost).groups == [["l0", "l1", "l2", "l3", "l4"]]
    assert mp.make_plan("fixed", layers, cost, bucket_bytes=250).groups == [["l0", "l1", "l2"], ["l3", "l4"]]
    text = mp.make_plan("dp", layers, cost).describe(layers)
    assert text.startswith("merge plan (dp):") and "predicted communication end" in text


def test_cost_model_fit():
    sizes = [100, 1000, 10000, 100000, 1000000]
    fitted = mp.CostModel.fit(sizes, [2e-4 + 8e-9 * s for s in sizes])
    assert fitted.alpha == pytest.approx(2e-4) and fitted.beta == pytest.approx(8e-9)
    assert mp.CostModel.fit([1, 2, 3], [5, 4, 3]).beta == 0.0  # never a negative per-byte cost
    # large messages slower than their bytes: the line still starts at the smallest message's time
    curved = mp.CostModel.fit([4, 32768, 524288, 2097152], [1e-3, 1.2e-3, 6e-2, 3e-1])
    assert curved.alpha == pytest.approx(1e-3, rel=1e-3) and curved.beta > 0


def test_errors():
    cost = mp.CostModel(1e-4, 1e-9)
    with pytest.raises(ValueError, match="unknown merge strategy 'best'"):
        mp.make_plan("best", [mp.Layer("a", 1, 0, 0)], cost)
    with pytest.raises(ValueError, match="ready order"):
        mp.plan_optimal([mp.Layer("a", 1, 0.2, 0), mp.Layer("b", 1, 0.1, 0)], cost)
    with pytest.raises(ValueError, match="at least one layer"):
        mp.plan_optimal([], cost)
    with pytest.raises(ValueError, match="bucket_bytes must be > 0"):
        mp.make_plan("fixed", [mp.Layer("a", 1, 0, 0)], cost, bucket_bytes=0)
    with pytest.raises(ValueError, match="contention in \\[0, 1\\]"):
        mp.CostModel(1e-4, 1e-9, host=1e-4, contention=1.5)
    with pytest.raises(ValueError, match="must be >= 0"):
        mp.CostModel(1e-4, 1e-9, host=-1.0)
    with pytest.raises(ValueError, match="two or more message sizes"):
        mp.CostModel.fit([10, 10], [1, 2])
