"""The compressed dist_sync store on real jobs (scheduler, servers, workers started by tools/launch.py).

Every pulled value is compared exactly with an independent numpy simulation of the protocol: each
worker quantizes its gradient with its own residual (tests/reference.py), the servers sum.  Levels are
powers of two so that sums of dequantized values are exact in any order of arrival.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import mxnet as mx

import mxnet_gc

import reference
from dist.job import LAUNCH, ROOT, gradient, initial_value, run_job, run_scenarios

pytestmark = pytest.mark.job  # every test a real job (run_job)

POW2 = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]

# Scenarios that need 2 workers and 1 server and leave the store usable: one job runs them one after the
# other on one store, each on keys of its own (worker.py's scenarios); the tests below check one each.
# MXNet's own 2bit comes last: once set, MXNet compresses every later push of the store with it.
SHARED = {
    "steps": {"keys": [[3, [5, 7]], ["fc_weight", [130]]], "steps": 5, "scale": 0.7, "seed": 1,
              "compression": {"type": "4bit", "thresholds": POW2}, "pull_first": True},
    **{"compressed-pull-" + name: {
        "keys": [["a", [30]], ["b", [3, 5]]], "steps": 4, "scale": 0.8, "seed": 13, "lists": True, "pull_first": True,
        "groups": groups, "compression": {"type": "4bit", "thresholds": POW2, "compressed_pull": True}}
       for name, groups in (("one-message-per-key", None), ("keys-share-a-message", [["a", "b"]]))},
    "compressed-pull-5bit": {  # 4bit pushes, 5bit pulls; "c" (40 values) is more than one 5-word unit of 32
        "keys": [["a", [30]], ["b", [3, 5]], ["c", [40]]], "steps": 4, "scale": 0.8, "seed": 14, "lists": True,
        "pull_first": True, "groups": [["a", "b"], ["c"]],
        "compression": {"type": "4bit", "thresholds": POW2, "compressed_pull": True, "pull_bits": 5}},
    "uncompressed": {"keys": [[1, [50]], [2, [2, 3]]], "steps": 2, "scale": 1.0, "seed": 5,
                     "compression": {"type": "none"}},
    "per-key": {"keys": [["a", [40]], ["b", [40]]], "steps": 3, "scale": 0.05, "seed": 6,
                "compression": {"type": "4bit", "thresholds": POW2, "per_key": {"b": [0.015625, 0.03125, 0.0625]}}},
    "partial-push": {"keys": [["a", [5]], ["b", [5]]], "steps": 2, "scale": 1.0, "seed": 12, "lists": True,
                     "partial_push": True, "groups": [["a", "b"]], "compression": {"type": "4bit", "thresholds": POW2}},
    "bad-compression": {"keys": [[0, [8]]], "steps": 2, "scale": 1.0, "seed": 8, "bad_compression": {"type": "3bit"},
                        "compression": {"type": "4bit", "thresholds": POW2}},
    "pull-beyond-float32": {"keys": [[0, [8]]], "steps": 1, "scale": 1.0, "seed": 8, "compression": {"type": "none"},
                            "bad_compression": {"type": "gc_2bit", "threshold": 3.4e38, "compressed_pull": True}},
    **{kind: {"keys": [[0, [33]], ["w", [6, 5]]], "steps": 4, "scale": 0.6, "seed": 4,
              "compression": {"type": kind, "threshold": 0.5}} for kind in ("gc_2bit", "2bit")},
}


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """{name: {rank: saved arrays}} of SHARED's scenarios, from one job."""
    return dict(zip(SHARED, run_scenarios(tmp_path_factory.mktemp("shared"), list(SHARED.values()), workers=2, servers=1)))


def simulate(spec, workers, levels_for_key=None):
    """{(key, step): expected pulled value} without an optimizer: the sum of dequantized gradients."""
    comp = spec.get("compression") or {"type": "none"}
    warmup = comp.get("warmup_steps", 0)  # (the test workers' default: see dist/job.py)
    expected, server_residuals = {}, {}
    rounding = reference.rounding_of(comp) if comp["type"] != "none" else None
    for i, (key, shape) in enumerate(spec["keys"]):
        residuals = [np.zeros(shape, np.float32) for _ in range(workers)]
        if comp["type"] in ("2bit", "gc_2bit"):
            levels = [comp.get("threshold", 0.5)]
        elif comp["type"] == "4bit":
            levels = (levels_for_key or {}).get(key, comp["thresholds"])
        for step in range(spec["steps"]):
            total = np.zeros(shape, np.float32)
            for rank in range(workers):
                g = gradient(spec["seed"], rank, step, i, shape, spec["scale"] * key_scale(spec, i))
                if comp["type"] == "none" or step < warmup:  # dense; the residual waits for the codec
                    q = g
                else:
                    q, residuals[rank] = reference.quantize_array(g, residuals[rank], levels, rounding)
                total += q
            if comp.get("compressed_pull") and step >= warmup:  # the servers re-encode the sum, own residual,
                server_residual = server_residuals.setdefault(key, np.zeros(shape, np.float32))  # levels x W
                total, server_residuals[key] = reference.quantize_array(
                    total, server_residual, reference.pull_levels(levels, workers, comp.get("pull_bits", 4)), rounding)
            expected[key, step] = total
    return expected


def key_scale(spec, i):
    return (spec.get("key_scales") or [1.0] * len(spec["keys"]))[i]


def fitted_levels(spec, workers, fit_steps):
    """{key: levels} 'thresholds': 'auto' must choose: top level the power of two at or above 4x the workers'
    mean of their largest |gradient value| over the warm-up's last ``fit_steps`` steps, 7 levels of ratio 2."""
    warmup = spec["compression"]["warmup_steps"]
    chosen = {}
    for i, (key, shape) in enumerate(spec["keys"]):
        largest = np.mean([max(np.abs(gradient(spec["seed"], rank, step, i, shape, spec["scale"] * key_scale(spec, i))).max()
                               for step in range(warmup - fit_steps, warmup)) for rank in range(workers)])
        top = 2.0 ** np.ceil(np.log2(4 * largest))
        chosen[key] = [float(top * 2.0 ** (k - 6)) for k in range(7)]
    return chosen


def check(results, expected, workers, spec):
    assert sorted(results) == list(range(workers))
    for rank, saved in results.items():
        for (key, step), want in expected.items():
            np.testing.assert_array_equal(saved["%s/%d" % (key, step)], want,
                                          err_msg="rank %d key %s step %d" % (rank, key, step))
        if spec.get("pull_first"):
            for i, (key, shape) in enumerate(spec["keys"]):
                np.testing.assert_array_equal(saved["%s/init" % key], initial_value(spec["seed"], i, shape))


def test_4bit_steps_two_workers_one_server(shared):
    """Residual carry-over over several steps, init, pull before any push, int and str keys."""
    spec, results = SHARED["steps"], shared["steps"]
    expected = simulate(spec, 2)
    assert any(np.count_nonzero(v) for v in expected.values())
    check(results, expected, 2, spec)


@pytest.mark.parametrize("lists", [False, True], ids=["a-call-per-key", "one-call-per-step"])
def test_the_store_warms_up_dense_then_starts_the_codec(tmp_path, lists):
    """'warmup_steps': the first steps push exact float32 gradients, then the codec starts with a fresh
    residual, whether the pushes come a key at a time (as gluon.Trainer's) or all keys in one call."""
    spec = {"keys": [[3, [5, 7]], ["fc_weight", [130]], ["b", [9]]], "steps": 5, "scale": 0.7, "seed": 4,
            "compression": {"type": "4bit", "thresholds": POW2, "warmup_steps": 2}, "lists": lists}
    _, results = run_job(tmp_path, spec, workers=2, servers=2)
    expected = simulate(spec, 2)
    dense = simulate(dict(spec, compression=None), 2)
    for key, _ in spec["keys"]:  # (what the reference says: dense sums first, then something else)
        assert all(np.array_equal(expected[key, s], dense[key, s]) for s in (0, 1))
        assert not any(np.array_equal(expected[key, s], dense[key, s]) for s in (2, 3, 4))
    check(results, expected, 2, spec)


def test_auto_levels_are_fitted_to_each_key_in_the_warmup(tmp_path):
    """'thresholds': 'auto': keys whose gradients differ in scale by 2^20 each get the ladder above their
    largest values (the same on every worker, as a numpy replay says), and the compressed steps after
    the warm-up sum exactly as with those levels given."""
    spec = {"keys": [["tiny", [40]], [5, [6, 7]], ["big", [300]]], "key_scales": [2.0 ** -12, 1.0, 2.0 ** 8],
            "steps": 7, "scale": 1.0, "seed": 5,
            "compression": {"type": "4bit", "thresholds": "auto", "warmup_steps": 4}}
    _, results = run_job(tmp_path, spec, workers=2, servers=1)
    levels = fitted_levels(spec, 2, fit_steps=4)
    bases = [levels[k][0] for k, _ in spec["keys"]]
    assert 2.0 ** 11 <= bases[1] / bases[0] <= 2.0 ** 13 and 2.0 ** 7 <= bases[2] / bases[1] <= 2.0 ** 9
    for saved in results.values():
        per_key = json.loads(str(saved["compression_config"]))["per_key"]
        assert {k: v["thresholds"] for k, v in per_key.items()} == {str(k): v for k, v in levels.items()}
    check(results, simulate(spec, 2, levels_for_key=levels), 2, spec)


@pytest.mark.parametrize("groups", [None, [list(range(6)), [6, 7], [8, 9, "bias"], ["conv"]]],
                         ids=["one-message-per-key", "small-keys-share-messages"])
def test_4bit_three_workers_two_servers_many_keys_lists(tmp_path, groups):
    keys = [[k, [1 + 17 * k]] for k in range(10)] + [["bias", [3]], ["conv", [4, 3, 3, 3]]]
    spec = {"keys": keys, "steps": 3, "scale": 1.5, "seed": 2, "lists": True, "groups": groups,
            "compression": {"type": "4bit", "thresholds": POW2, "per_key": {"bias": [0.5, 1.0]}}}
    proc, results = run_job(tmp_path, spec, workers=3, servers=2)
    pushes = [int(n) for n in re.findall(r"mxnet_gc server \d: (\d+) pushes", proc.stdout)]
    # one push per message and worker and step: 12 keys, or 4 groups
    assert sum(pushes) == (12 if groups is None else 4) * 3 * 3
    check(results, simulate(spec, 3, levels_for_key={"bias": [0.5, 1.0]}), 3, spec)
    assert len(pushes) == 2 and min(pushes) > 0  # both servers took part


def test_large_tensor_chunked_over_two_servers(tmp_path):
    """A tensor above the split bound is cut in parts of at most the bound, as many per server; each server
    gets half the bytes."""
    spec = {"keys": [["big", [4000]], ["small", [10]]], "steps": 3, "scale": 1.0, "seed": 3,
            "compression": {"type": "4bit", "thresholds": POW2}}
    proc, results = run_job(tmp_path, spec, workers=2, servers=2, env=["MXNET_GC_BIGARRAY_BOUND=1000"])
    check(results, simulate(spec, 2), 2, spec)
    received = [int(b) for b in re.findall(r"mxnet_gc server \d: \d+ pushes, (\d+) bytes", proc.stdout)]
    # exactly: 4 parts of 1000 values, 2 on each server; the small key whole on the first (both equal then);
    # 2 workers x 3 steps of 4bit payload words (4 bytes each)
    words = mxnet_gc.codecs.create(spec["compression"]).payload_size
    assert sorted(received) == sorted([2 * 3 * 4 * (2 * words(1000) + words(10)), 2 * 3 * 4 * 2 * words(1000)])


def test_a_layer_over_a_servers_fair_share_is_spread_over_two_servers(tmp_path):
    """A key under the split bound holding most of the values (20,000 of 23,000) is cut into parts that
    level the servers: the job inits 'conv' (3,000) first, whole on server 0, then 'dense' as 8,500 values
    there and 11,500 on server 1.  The pulled sums are the reference's; each server's bytes are exactly
    its parts' payloads."""
    spec = {"keys": [["dense", [20000]], ["conv", [3000]]], "steps": 3, "scale": 1.0, "seed": 4,
            "compression": {"type": "4bit", "thresholds": POW2}}
    proc, results = run_job(tmp_path, spec, workers=2, servers=2)
    check(results, simulate(spec, 2), 2, spec)
    received = {int(s): int(b) for s, b in re.findall(r"mxnet_gc server (\d): \d+ pushes, (\d+) bytes", proc.stdout)}
    words = mxnet_gc.codecs.create(spec["compression"]).payload_size
    assert received == {0: 2 * 3 * 4 * (words(3000) + words(8500)), 1: 2 * 3 * 4 * words(11500)}


def test_a_regroup_that_cuts_a_key_elsewhere_keeps_every_residual(tmp_path):
    """The job above regrouped after step 1 with 'dense' first: placed on empty servers, it is now cut
    10,000 / 10,000 (each server's bytes say so), so its parts' residuals go with its next push.  4bit
    encodes each value on its own, so every pulled sum is still the reference's: a residual lost, or put
    back at other values, changes them."""
    spec = {"keys": [["dense", [20000]], ["conv", [3000]]], "steps": 4, "scale": 1.0, "seed": 4, "lists": True,
            "compression": {"type": "4bit", "thresholds": POW2}, "regroup_at": [1, [["dense"], ["conv"]]]}
    proc, results = run_job(tmp_path, spec, workers=2, servers=2)
    check(results, simulate(spec, 2), 2, spec)
    received = {int(s): int(b) for s, b in re.findall(r"mxnet_gc server (\d): \d+ pushes, (\d+) bytes", proc.stdout)}
    words = mxnet_gc.codecs.create(spec["compression"]).payload_size
    assert received == {0: 2 * 2 * 4 * (words(3000) + words(8500) + words(10000) + words(3000)),
                        1: 2 * 2 * 4 * (words(11500) + words(10000))}


def test_gc_2bit_equals_mxnet_builtin_2bit(shared):
    """Our 2bit and MXNet's built-in 2bit (MXNet's kernels on workers and servers) pull the same values."""
    pulled = {}
    for kind in ("2bit", "gc_2bit"):
        pulled[kind] = shared[kind]
        check(pulled[kind], simulate(SHARED[kind], 2), 2, SHARED[kind])
    for rank in range(2):
        for name, value in pulled["2bit"][rank].items():
            if name != "compression_config":  # (the settings, which differ by name)
                np.testing.assert_array_equal(pulled["gc_2bit"][rank][name], value)


@pytest.mark.parametrize("groups", ["one-message-per-key", "keys-share-a-message"])
def test_compressed_pull(shared, groups):
    """Pulls return the servers' sum re-encoded with the servers' residual; init still pulls exactly."""
    spec, results = SHARED["compressed-pull-" + groups], shared["compressed-pull-" + groups]
    expected = simulate(spec, 2)
    plain = simulate(dict(spec, compression=dict(spec["compression"], compressed_pull=False)), 2)
    assert any(np.any(expected[k] != plain[k]) for k in expected)  # the pull's own quantization shows
    check(results, expected, 2, spec)


def test_compressed_pull_on_5_bits(shared):
    """With 'pull_bits' 5 the servers re-encode the sum on the finer ladder (the levels times W, their
    midpoints, half the first, 1.5 times the last); it differs from the 4-bit pull's."""
    spec, results = SHARED["compressed-pull-5bit"], shared["compressed-pull-5bit"]
    expected = simulate(spec, 2)
    four = simulate(dict(spec, compression=dict(spec["compression"], pull_bits=4)), 2)
    assert any(np.any(expected[k] != four[k]) for k in expected)
    check(results, expected, 2, spec)


def test_uncompressed_sum(shared):
    spec, results = SHARED["uncompressed"], shared["uncompressed"]
    check(results, simulate(spec, 2), 2, spec)


def test_per_key_threshold_groups(shared):
    spec, results = SHARED["per-key"], shared["per-key"]
    small = spec["compression"]["per_key"]["b"]
    expected = simulate(spec, 2, levels_for_key={"b": small})
    nonzero = {k: sum(np.count_nonzero(expected[k, step]) for step in range(3)) for k in "ab"}
    assert nonzero["b"] > 5 * max(1, nonzero["a"])  # the finer group sends far more values
    check(results, expected, 2, spec)


@pytest.mark.parametrize("groups", [None, [[0, "w"]]], ids=["one-message-per-key", "keys-share-a-message"])
@pytest.mark.parametrize("compression", [{"type": "4bit", "thresholds": POW2}, {"type": "2bit", "threshold": 0.5}],
                         ids=["4bit", "mxnet-2bit"])
def test_sgd_momentum_on_servers(tmp_path, groups, compression):
    """Pulls return weights updated on the servers; equal to MXNet's SGD applied here to the same sums."""
    opt_params = {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01, "rescale_grad": 0.5}
    spec = {"keys": [[0, [20]], ["w", [3, 4]]], "steps": 4, "scale": 1.0, "seed": 7, "lists": True,
            "compression": compression, "optimizer": ["sgd", opt_params], "groups": groups}
    _, results = run_job(tmp_path, spec, workers=2, servers=1 if groups else 2)
    check_server_sgd(results, spec, opt_params)


def check_server_sgd(results, spec, opt_params):
    """Replays MXNet's SGD here on the simulated sums (restoring the optimizer state saved after step
    spec['save_states_at'] after step spec['load_states_at']) and compares every pulled weight."""
    sums = simulate(spec, 2)
    opt = mx.optimizer.create("sgd", **opt_params)
    for i, (key, shape) in enumerate(spec["keys"]):
        weight = mx.nd.array(initial_value(spec["seed"], i, shape))
        state = opt.create_state(i, weight)
        for step in range(spec["steps"]):
            opt.update(i, weight, mx.nd.array(sums[key, step]), state)
            if step == spec.get("save_states_at"):
                saved_state = state.copy()
            if step == spec.get("load_states_at"):
                state = saved_state
            for rank in range(2):
                np.testing.assert_array_equal(results[rank]["%s/%d" % (key, step)], weight.asnumpy())


@pytest.mark.parametrize("groups", [None, [["conv", "split", 0]]], ids=["one-message-per-key", "keys-share-a-message"])
def test_weights_in_mkldnn_layout(tmp_path, groups):
    """Weights that an inference-mode forward left in MKL-DNN's blocked layout (a flat view cannot touch
    them) are pulled right: at init, and after every update on the servers, also when split over servers."""
    opt_params = {"learning_rate": 0.1, "momentum": 0.9}
    spec = {"keys": [["conv", [16, 8, 3, 3]], ["split", [32, 16, 3, 3]], [0, [20]]], "steps": 3, "scale": 1.0,
            "seed": 5, "lists": True, "pull_first": True, "mkldnn_layout": True,
            "compression": {"type": "4bit", "thresholds": POW2}, "optimizer": ["sgd", opt_params], "groups": groups}
    _, results = run_job(tmp_path, spec, workers=2, servers=2, env=["MXNET_GC_BIGARRAY_BOUND=4000"])
    for rank in range(2):
        assert results[rank]["mkldnn_layouts"] == 2 * (1 + spec["steps"])  # the condition did arise
        for i, (key, shape) in enumerate(spec["keys"]):
            np.testing.assert_array_equal(results[rank]["%s/init" % key], initial_value(spec["seed"], i, shape))
    check_server_sgd(results, spec, opt_params)


def test_optimizer_states_saved_and_loaded_on_the_servers(tmp_path):
    """Momentum saved after step 1 and loaded after step 2 drives step 3, as in a reference that does so."""
    opt_params = {"learning_rate": 0.1, "momentum": 0.9}
    spec = {"keys": [["w", [2000]], ["b", [7]]], "steps": 4, "scale": 1.0, "seed": 14, "lists": True,
            "compression": {"type": "4bit", "thresholds": POW2}, "optimizer": ["sgd", opt_params],
            "save_states_at": 1, "load_states_at": 2}
    _, results = run_job(tmp_path, spec, workers=2, servers=2, env=["MXNET_GC_BIGARRAY_BOUND=1000"])
    assert sorted(os.listdir(tmp_path / "out")).count("states.server0") == 1
    assert (tmp_path / "out" / "states.server1").exists()
    check_server_sgd(results, spec, opt_params)


# ---- bad input and faults ----

def test_keys_sharing_a_message_must_be_pushed_together(shared):
    spec, results = SHARED["partial-push"], shared["partial-push"]
    for saved in results.values():  # (the keys as the shared job's scenario named them)
        assert re.search(r"push: keys \['(s\d+\.)?b'\] share a message with \['(s\d+\.)?a'\]",
                         str(saved["partial_push_error"])), saved["partial_push_error"]
    check(results, simulate(spec, 2), 2, spec)  # the refused push changed nothing

def test_bad_compression_params_rejected_before_any_traffic(shared):
    """An unknown type raises on every worker, listing the supported types; the job then runs normally."""
    spec, results = SHARED["bad-compression"], shared["bad-compression"]
    for saved in results.values():
        message = str(saved["bad_compression_error"])
        assert "unknown gradient compression type '3bit'" in message
        assert "supported types: %s" % ", ".join(mxnet_gc.kvstore.supported_types()) in message
    check(results, simulate(spec, 2), 2, spec)


def test_a_threshold_the_compressed_pull_cannot_use_is_refused_at_once(shared):
    """gc_2bit's threshold 3.4e38 with 'compressed_pull': the servers' sum of 2 workers would be pulled on 6.8e38,
    beyond float32: set_gradient_compression refuses it on every worker (not the first compressed step, after
    the warm-up); the job then runs normally."""
    spec, results = SHARED["pull-beyond-float32"], shared["pull-beyond-float32"]
    for saved in results.values():
        message = str(saved["bad_compression_error"])
        assert "gc_2bit: 'compressed_pull' with 2 workers" in message and "the threshold 3.4e+38" in message, message
    check(results, simulate(spec, 2), 2, spec)


BOUND_WORKER = """import os, sys
try:  # the first worker to start: 1000, the other 2000
    os.close(os.open(sys.argv[1], os.O_CREAT | os.O_EXCL))
    os.environ["MXNET_GC_BIGARRAY_BOUND"] = "1000"
except FileExistsError:
    os.environ["MXNET_GC_BIGARRAY_BOUND"] = "2000"
import mxnet as mx
import mxnet_gc
mx.kv.create("gc_dist_sync")
print("store created")
"""


def test_workers_with_different_bigarray_bounds_all_stop(tmp_path):
    """MXNET_GC_BIGARRAY_BOUND places the keys: workers that read different ones stop when the store starts,
    each naming the variable and both values."""
    worker = tmp_path / "bound_worker.py"
    worker.write_text(BOUND_WORKER)
    proc = subprocess.run([sys.executable, LAUNCH, "-n", "2", "-s", "1", "--timeout", "60", sys.executable, str(worker),
                           str(tmp_path / "first")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "store created" not in proc.stdout, proc.stdout[-3000:]
    for rank in range(2):
        assert re.search(r"\[worker %d\] ValueError: mxnet_gc: the workers set different environment settings "
                         r"\(rank 0 / rank 1\): MXNET_GC_BIGARRAY_BOUND: (1000 / 2000|2000 / 1000); every worker must "
                         r"give these variables the same value" % rank, proc.stdout), proc.stdout[-3000:]


def test_workers_with_different_compression_all_stop(tmp_path):
    spec = {"keys": [[0, [8]]], "steps": 2, "scale": 1.0, "seed": 9,
            "compression": {"type": "4bit", "thresholds": POW2},
            "compression_by_rank": {"1": {"type": "4bit", "thresholds": [1.0, 2.0]}}}
    proc, _ = run_job(tmp_path, spec, workers=2, servers=1, expect_success=False, timeout=60)
    assert proc.returncode != 0
    for rank in range(2):  # launcher prefixes are launch order; both workers raised
        assert re.search(r"\[worker %d\] ValueError: mxnet_gc: the workers set different gradient compression"
                         % rank, proc.stdout), proc.stdout[-3000:]
    assert "job failed" in proc.stderr


def test_wrong_size_payload_rejected_value_untouched(tmp_path):
    spec = {"keys": [["w", [40]]], "steps": 3, "scale": 1.0, "seed": 10, "corrupt_at_step": 0,
            "compression": {"type": "4bit", "thresholds": POW2}}
    _, results = run_job(tmp_path, spec, workers=2, servers=1)
    for saved in results.values():
        assert "rejected a push of 8 float32 words to key" in str(saved["corrupt_error"])
        assert "expected 5" in str(saved["corrupt_error"])
        np.testing.assert_array_equal(saved["w/after_corrupt"], initial_value(spec["seed"], 0, (40,)))


def test_optimizer_the_servers_cannot_run_fails_on_every_worker(tmp_path):
    """An optimizer whose update raises (here a clip_gradient that is not a number) is tried when it
    reaches the servers: the workers raise, instead of the weights silently freezing.  (A worker still in
    the synchronisation before set_optimizer may meet the error there and stop; rank 0 then waits for it
    in the next barrier until the launcher ends the job: one worker or two say it.)"""
    spec = {"keys": [[0, [8]]], "steps": 2, "scale": 1.0, "seed": 7,
            "compression": {"type": "4bit", "thresholds": POW2}, "optimizer": ["sgd", {"clip_gradient": "abc"}]}
    proc, _ = run_job(tmp_path, spec, workers=2, servers=1, expect_success=False, timeout=60)
    assert proc.returncode != 0
    assert proc.stdout.count("RuntimeError: mxnet_gc server 0: command failed on server 0") >= 1, proc.stdout[-3000:]
    assert not re.search(r"worker rank \d saved", proc.stdout)  # no worker went on


def test_killed_worker_ends_the_job(tmp_path):
    import time

    spec = {"keys": [[0, [8]]], "steps": 50, "scale": 1.0, "seed": 11, "die_at_step": 2,
            "compression": {"type": "4bit", "thresholds": POW2}}
    start = time.time()
    proc, _ = run_job(tmp_path, spec, workers=3, servers=1, expect_success=False, timeout=120)
    elapsed = time.time() - start
    assert proc.returncode == 1
    assert re.search(r"worker \d \(pid \d+\) was killed by signal 9", proc.stderr), proc.stderr
    assert "ended all 5 processes" in proc.stderr
    assert elapsed < 60


@pytest.mark.parametrize("kind, compression", [
    ("topk_count", {"type": "layerwise_topk", "density": 1.0}),
    ("topk_index", {"type": "layerwise_topk", "density": 1.0}),
])
def test_corrupt_topk_payload_rejected_on_every_worker(tmp_path, kind, compression):
    """A top-k payload with a bad count or an index out of range: the server rejects it, every worker
    gets the error, the round's values stay, and the next round is exact (the push was counted)."""
    spec = {"keys": [["w", [40]]], "steps": 3, "scale": 1.0, "seed": 10, "corrupt_at_step": 0,
            "corrupt_kind": kind, "compression": compression}
    _, results = run_job(tmp_path, spec, workers=2, servers=1)
    assert sorted(results) == [0, 1]
    for saved in results.values():
        assert "rejected a push to key" in str(saved["corrupt_error"]), saved["corrupt_error"]
        assert "corrupt payload" in str(saved["corrupt_error"])
        np.testing.assert_array_equal(saved["w/after_corrupt"], initial_value(spec["seed"], 0, (40,)))
        np.testing.assert_array_equal(saved["w/next_round"], np.full(40, 3.0, np.float32))


@pytest.mark.parametrize("kind", ["float16", "float64"])
def test_push_of_another_dtype_never_goes_unnoticed(tmp_path, kind):
    """A raw push of float16/float64 words (a process bypassing the store): MXNet's server either hands
    it to mxnet_gc's updater, which rejects it by dtype, or stores it apart (an uninitialized flag in
    MXNet 1.9.1 decides), and the round counter then shows the lost push.  Either way every worker gets
    an error and the values are not touched.  The worker that checks first names the cause; the other
    may find that worker already gone, and says so."""
    spec = {"keys": [["w", [40]]], "steps": 3, "scale": 1.0, "seed": 10, "corrupt_at_step": 0,
            "corrupt_kind": kind, "compression": {"type": "4bit", "thresholds": POW2}}
    _, results = run_job(tmp_path, spec, workers=2, servers=1)
    assert sorted(results) == [0, 1]
    causes = 0
    for rank, saved in results.items():
        error = str(saved["corrupt_error"])
        cause = ("rejected a push of %s to key" % kind in error) or ("rounds of pushes where this worker" in error) \
            or ("pushed other rounds than server 0 completed" in error)
        assert cause or "worker %d ended its part of the job" % (1 - rank) in error, error
        causes += cause
        np.testing.assert_array_equal(saved["w/after_corrupt"], initial_value(spec["seed"], 0, (40,)))
    assert causes >= 1


def test_raw_int32_push_ends_the_job_at_once(tmp_path):
    """MXNet 1.9.1's server aborts on an int32 push before any updater runs (nothing mxnet_gc's server
    can intercept); the launcher then ends the whole job within seconds and names the server."""
    import time

    spec = {"keys": [["w", [40]]], "steps": 3, "scale": 1.0, "seed": 10, "corrupt_at_step": 0,
            "corrupt_kind": "int32", "compression": {"type": "4bit", "thresholds": POW2}}
    start = time.time()
    proc, _ = run_job(tmp_path, spec, workers=2, servers=1, expect_success=False, timeout=120)
    assert proc.returncode == 1
    assert re.search(r"job failed: server 0 \(pid \d+\) was killed by signal 6", proc.stderr), proc.stderr[-2000:]
    assert "ended all 4 processes" in proc.stderr
    assert time.time() - start < 60
