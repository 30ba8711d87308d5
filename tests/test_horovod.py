"""mxnet_gc's horovod store on real jobs started by horovodrun (Gloo, 2 processes on loopback): every
pulled value against the numpy references, merged training as on the parameter server, and errors; the
order of pushes and pulls in a step (also on the dist store, whose refusals must be the same)."""
import json
import os
import shlex
import subprocess
import sys

import numpy as np
import pytest

import reference
import topk_reference as ref
from mxnet_gc.kvstore.horovod.ring_scatter import PAIRWISE_WORDS
from mxnet_gc.kvstore.step_order import RULE
from dist.horovod_worker import label
from dist.job import HERE, LAUNCH, ROOT, gradient, initial_value, output_of, split_scenarios
from dist import step_worker
from tools import horovodrun as hvdrun
from test_dist_kvstore import fitted_levels, simulate
from test_dist_merge import check_sums, check_updates

pytestmark = pytest.mark.job  # every test a real job (horovodrun)

POW2 = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]


def horovodrun(script, *args, np_=2, timeout=180, env=None, rank_env=None):
    """Runs tests/dist/``script`` on ``np_`` ranks; ``rank_env``: {rank: {variable: value}} of one rank only."""
    command = [sys.executable, os.path.join(HERE, script)] + [str(a) for a in args]
    if rank_env:
        exports = "".join('[ "$HOROVOD_RANK" = %d ] && export %s; ' % (r, " ".join(
            "%s=%s" % (k, shlex.quote(v)) for k, v in e.items())) for r, e in rank_env.items())
        command = ["sh", "-c", exports + 'exec "$@"', "sh"] + command
    argv = hvdrun.ARGV + ["-np", str(np_), "-H", "localhost:%d" % np_, "--gloo", "--start-timeout", "60"] + command
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **env) if env else None)


def lines_of(proc, rank):
    """What ``rank`` printed in a horovodrun job (its lines are prefixed '[rank]<stdout>:' or '<stderr>:')."""
    return "\n".join(line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("[%d]<" % rank))


def run_spec(tmp_path, spec, workers=2, env=None):
    spec = dict(spec, out=str(tmp_path))
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = horovodrun("horovod_worker.py", tmp_path / "spec.json", np_=workers, env=env)
    results = [dict(np.load(tmp_path / ("rank%d.npz" % r))) for r in range(workers)] if proc.returncode == 0 else None
    return proc, results


def expected_sums(spec, workers):
    comp = spec["compression"]
    warmup = comp.get("warmup_steps", 0)
    auto = comp["type"] == "4bit" and comp.get("thresholds", "auto") == "auto"
    levels = fitted_levels(spec, workers, min(20, warmup)) if auto else {}
    out = {}
    for i, (key, shape) in enumerate(spec["keys"]):
        n = int(np.prod(shape))
        states = [ref.new_state(n) for _ in range(workers)]
        residuals = [np.zeros(shape, np.float32) for _ in range(workers)]
        for step in range(spec["steps"]):
            total = np.zeros(n, np.float32)
            for r in range(workers):
                g = gradient(spec["seed"], r, step, i, shape, spec["scale"])
                if step < warmup:
                    total += g.ravel()
                elif comp["type"] == "layerwise_topk":
                    idx, vals, _ = ref.step(g, states[r], **{k: v for k, v in comp.items() if k != "type"})
                    total[idx] += vals
                elif comp["type"] == "4bit":
                    q, residuals[r] = reference.quantize_array(g, residuals[r], levels.get(key) or comp["thresholds"],
                                                               reference.rounding_of(comp))
                    total += q.ravel()
                else:
                    total += g.ravel()
            out[key, step] = total.reshape(shape)
    return out


# Pulled sums of several codecs, each a scenario of one job on one store (horovod_worker.py's scenarios).
SUMS = {
    "topk": ({"type": "layerwise_topk", "density": 0.1, "reset_every": 3}, None, None),
    "topk-momentum-merged-regrouped": ({"type": "layerwise_topk", "density": 0.1, "momentum": 0.9}, [["b", "w"], ["c"]], 2),
    "4bit": ({"type": "4bit", "thresholds": POW2}, None, None),
    "4bit-auto-levels": ({"type": "4bit", "warmup_steps": 3}, None, None),
    "dense-merged": ({"type": "none"}, [["w", "b", "c"]], None),
}
SUMS = {name: {"keys": [["w", [30, 4]], ["b", [4]], ["c", [257]]], "steps": 5, "scale": 1.0, "seed": 9,
               "compression": compression, "groups": groups, "regroup_at": regroup_at}
        for name, (compression, groups, regroup_at) in SUMS.items()}


@pytest.fixture(scope="module")
def sums(tmp_path_factory):
    """{name: [saved arrays of each rank]} of SUMS' scenarios, from one job."""
    tmp = tmp_path_factory.mktemp("sums")
    proc, results = run_spec(tmp, {"scenarios": list(SUMS.values())})
    assert proc.returncode == 0, output_of(proc)
    per_scenario = split_scenarios(dict(enumerate(results)), len(SUMS))
    return {name: [r[rank] for rank in range(2)] for name, r in zip(SUMS, per_scenario)}


@pytest.mark.parametrize("name", list(SUMS))
def test_pulled_sums_match_the_reference(sums, name):
    spec, results = SUMS[name], sums[name]
    expected = expected_sums(spec, 2)
    for r, saved in enumerate(results):
        for i, (key, shape) in enumerate(spec["keys"]):  # init broadcasts rank 0's values
            np.testing.assert_array_equal(saved["%s/init" % key], initial_value(spec["seed"], i, tuple(shape)))
        for (key, step), want in expected.items():
            np.testing.assert_array_equal(saved["%s/%d" % (key, step)], want, err_msg="rank %d %s %d" % (r, key, step))


# The compressed allreduce ('compressed_pull': True with a threshold codec): messages of one key and merged,
# sizes not divisible by W, a key of fewer values than W payload words (parts of it empty), 4bit and 2bit,
# 4bit with 5-bit pulls (parts cut where a word starts in both payloads).
SMALL_KEYS = [["w", [30, 4]], ["b", [4]], ["c", [257]]]
# parts of at least ring_scatter.PAIRWISE_WORDS payload words with 4 and 6 workers: pairwise rounds (unless
# MXNET_GC_ALLTOALL=at_once)
LARGE_KEYS = [["big", [6 * 8 * PAIRWISE_WORDS + 1000]], ["b", [4]]]
SCATTER = {
    "4bit-one-message-per-key": ({"type": "4bit", "thresholds": POW2}, None, SMALL_KEYS),
    "4bit-merged": ({"type": "4bit", "thresholds": POW2}, [["w", "b"], ["c"]], SMALL_KEYS),
    "gc_2bit-merged": ({"type": "gc_2bit", "threshold": 0.5}, [["c", "w", "b"]], SMALL_KEYS),
    "4bit-regrouped": ({"type": "4bit", "thresholds": POW2}, None, SMALL_KEYS),  # (after step 2: one message)
    "4bit-large-parts": ({"type": "4bit", "thresholds": POW2}, [["big", "b"]], LARGE_KEYS),
    "4bit-5bit-pulls-merged": ({"type": "4bit", "thresholds": POW2, "pull_bits": 5}, [["w", "b"], ["c"]], SMALL_KEYS),
}
SCATTER = {name: {"keys": keys, "steps": 5, "scale": 1.0, "seed": 21,
                  "compression": dict(compression, compressed_pull=True), "groups": groups,
                  "regroup_at": 2 if name.endswith("regrouped") else None}
           for name, (compression, groups, keys) in SCATTER.items()}


@pytest.mark.parametrize("workers, alltoall, peers", [(2, "rounds", 1), (6, "rounds", 1), (4, "rounds", 2),
                                                     (4, "at_once", 1)])
def test_compressed_allreduce_pulls_the_owners_re_encoded_sum(tmp_path, workers, alltoall, peers):
    """Each worker's payload cut into W parts (alltoall, or rounds of 1 or 2 peers: with 4 workers and 2,
    rounds of ranks +1 and +2, then +3; with 6 workers and 1, round_schedule.py's rounds, in which no two
    workers send to each other), each part summed and re-encoded
    on the levels times W by the worker owning it with its own residual (allgather): every pulled value
    equals the numpy simulation of the parameter server's compressed pull (the servers' residual is the
    owners'), on every worker."""
    proc, results = run_spec(tmp_path, {"scenarios": list(SCATTER.values())}, workers=workers,
                             env={"MXNET_GC_ALLTOALL": alltoall, "MXNET_GC_ALLTOALL_PEERS": str(peers)})
    assert proc.returncode == 0, output_of(proc)
    for name, got in zip(SCATTER, split_scenarios(dict(enumerate(results)), len(SCATTER))):
        spec = SCATTER[name]
        expected = simulate(spec, workers)
        plain = simulate(dict(spec, compression=dict(spec["compression"], compressed_pull=False)), workers)
        assert any(np.any(expected[k] != plain[k]) for k in expected)  # the pull's own quantization shows
        for r in range(workers):
            for (key, step), want in expected.items():
                np.testing.assert_array_equal(got[r]["%s/%d" % (key, step)], want,
                                              err_msg="%s: rank %d %s %d" % (name, r, key, step))


def test_different_compression_on_the_workers_fails_on_all(tmp_path):
    spec = {"keys": [["w", [10]]], "steps": 1, "scale": 1.0, "seed": 1, "differ": True,
            "compression": {"type": "layerwise_topk", "density": 0.1}}
    proc, _ = run_spec(tmp_path, spec)
    assert proc.returncode != 0
    assert proc.stdout.count("the workers set different gradient compression parameters") + \
        proc.stderr.count("the workers set different gradient compression parameters") >= 2


@pytest.mark.parametrize("merge", ["dp", "one", "layerwise"])
def test_merged_training_on_horovod(tmp_path, merge):
    """The parameter server's merged-training job, unchanged but for the store: the same exact sums, and
    the SGD steps of them."""
    proc = horovodrun("merge_worker.py", tmp_path, merge, 1, "horovod")
    assert proc.returncode == 0, output_of(proc)
    with open(tmp_path / "plan.json") as f:
        plan = json.load(f)
    assert len(plan["groups"]) >= 1
    if merge != "dp":  # (one message for all, one per parameter)
        assert len(plan["groups"]) == (1 if merge == "one" else len(plan["names"]))
    saved = [dict(np.load(tmp_path / ("rank%d.npz" % r))) for r in range(2)]
    check_sums(saved, 2)
    check_updates(saved)
    assert "merge plan (%s)" % merge in proc.stdout


def test_default_messages_on_horovod_fill_message_bytes(tmp_path):
    """With the trainer's default merge, the horovod store's messages are consecutive parameters (in backward's
    order) filling MXNET_GC_HOROVOD_MESSAGE_BYTES of float32 (64 MiB by default, test_ring_scatter.py's
    test_horovod_settings: most models in one message);
    the sums and SGD steps are exact with them."""
    proc = horovodrun("merge_worker.py", tmp_path, "none", 1, "horovod",
                      env={"MXNET_GC_HOROVOD_MESSAGE_BYTES": "1024"})
    assert proc.returncode == 0, output_of(proc)
    with open(tmp_path / "plan.json") as f:
        plan = json.load(f)
    expected, size = [], 0
    for name, n in reversed(list(zip(plan["names"], plan["sizes"]))):  # backward's order
        if expected and size + 4 * n <= 1024:
            expected[-1].append(name)
            size += 4 * n
        else:
            expected.append([name])
            size = 4 * n
    assert 1 < len(expected) < len(plan["names"])  # (some parameters share messages, and not all)
    assert sorted(map(sorted, plan["messages"])) == sorted(map(sorted, expected))
    saved = [dict(np.load(tmp_path / ("rank%d.npz" % r))) for r in range(2)]
    check_sums(saved, 2)
    check_updates(saved)


def test_int_and_str_keys_of_the_same_digits_are_different_keys(tmp_path):
    """Int key 3 and str key '3' in one init call: their init broadcasts have names of their own, and each
    key's sums are its own."""
    spec = {"keys": [[3, [4]], ["3", [5]]], "steps": 2, "scale": 1.0, "seed": 3,
            "compression": {"type": "4bit", "thresholds": POW2}}
    proc, results = run_spec(tmp_path, spec)
    assert proc.returncode == 0, output_of(proc)
    expected = expected_sums(spec, 2)
    for r, saved in enumerate(results):
        for i, (key, shape) in enumerate(spec["keys"]):
            np.testing.assert_array_equal(saved["%s/init" % label(key)], initial_value(spec["seed"], i, tuple(shape)))
        for (key, step), want in expected.items():
            np.testing.assert_array_equal(saved["%s/%d" % (label(key), step)], want,
                                          err_msg="rank %d %r %d" % (r, key, step))


@pytest.mark.parametrize("variable, value, shown", [
    ("MXNET_GC_ALLTOALL", "at_once", '"rounds" / "at_once"'),
    ("MXNET_GC_HOROVOD_MESSAGE_BYTES", "4096", "67108864 / 4096")])
def test_workers_with_different_settings_fail_naming_it(tmp_path, variable, value, shown):
    """The settings that decide which collectives a worker makes (MXNET_GC_ALLTOALL, the default messages'
    size): the store compares them when it starts, and every worker names the variable and both values (not
    keys "not pushed")."""
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps({"keys": [["w", [10]]], "steps": 1, "scale": 1.0, "seed": 1, "out": str(tmp_path),
                                     "compression": {"type": "4bit", "thresholds": POW2, "compressed_pull": True}}))
    proc = horovodrun("horovod_worker.py", spec_path, rank_env={1: {variable: value}}, timeout=120)
    assert proc.returncode != 0
    for r in range(2):
        assert "the workers set different environment settings (rank 0 / rank 1): %s: %s" % (variable, shown) \
            in lines_of(proc, r), output_of(proc)
    assert "not pushed" not in proc.stdout + proc.stderr


def test_a_rank_that_exits_before_its_store_is_named_by_the_others(tmp_path):
    """Horovod's own init would abort rank 0 after HOROVOD_GLOO_TIMEOUT_SECONDS (gloo's IoException, uncaught
    in C++); the store's rendezvous first names the rank that never came, in a Python exception."""
    proc = horovodrun("step_worker.py", "horovod", tmp_path, "none", "leave", timeout=120,
                      env={"HOROVOD_GLOO_TIMEOUT_SECONDS": "5"})
    assert proc.returncode != 0
    assert "RuntimeError: mxnet_gc horovod store: rank(s) [1] of 2 did not start their store within 5 s " \
           "(HOROVOD_GLOO_TIMEOUT_SECONDS)" in lines_of(proc, 0), output_of(proc)
    assert "terminate called" not in proc.stdout + proc.stderr


def run_steps(tmp_path, store, compression, mistake):
    """tests/dist/step_worker.py's job on 2 workers of ``store``; returns (completed process, {rank: {name:
    array}} of what each pulled before it ended), after checking every pulled value: each step's exact sum."""
    if store == "horovod":
        proc = horovodrun("step_worker.py", store, tmp_path, compression, mistake, timeout=120,
                          env={"MXNET_GC_COLLECTIVE_TIMEOUT": "30"})
    else:
        proc = subprocess.run([sys.executable, LAUNCH, "-n", "2", "-s", "1", "--timeout", "60", sys.executable,
                               os.path.join(HERE, "step_worker.py"), store, tmp_path, compression, mistake],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
    saved = {r: dict(np.load(tmp_path / ("rank%d.npz" % r))) for r in range(2)
             if (tmp_path / ("rank%d.npz" % r)).exists()}
    for r, arrays in saved.items():
        for name, got in arrays.items():
            key, step = name.split("/")
            np.testing.assert_array_equal(got, 2 * step_worker.gradient(int(step), key),
                                          err_msg="rank %d %s" % (r, name))
    assert "did not complete within" not in proc.stdout + proc.stderr  # (no worker waited for the collective timeout)
    return proc, saved


def test_the_step_worker_pulls_every_exact_sum_without_a_mistake(tmp_path):
    proc, saved = run_steps(tmp_path, "horovod", "4bit-cpull", "none")
    assert proc.returncode == 0, output_of(proc)
    names = sorted("%s/%d" % (k, s) for k in step_worker.SHAPES for s in range(step_worker.STEPS))
    assert [sorted(saved[r]) for r in range(2)] == [names, names]


STEP_MISTAKES = {  # mistake: (the rank that makes it, its error)
    "double_push": (0, "ValueError: push of key 'w' twice before its pull: " + RULE),
    "skip_step": (1, "ValueError: pull of key 'w' without a push since its last pull: " + RULE),
    "regroup": (0, "ValueError: regroup while key 'w' is pushed and not pulled yet: call it between steps, after "
                   "the pull"),
}


@pytest.mark.parametrize("mistake, compression", [("double_push", "none"), ("double_push", "4bit"),
                                                  ("double_push", "4bit-cpull"), ("skip_step", "none"),
                                                  ("skip_step", "4bit-cpull"), ("regroup", "4bit")])
def test_a_step_mistake_is_refused_by_the_worker_that_makes_it(tmp_path, mistake, compression):
    """A second push of a key before its pull, a pull without a push (a skipped step), or a regroup between a
    push and its pull: refused at once on the worker that makes it, naming the key and the rule; the other
    worker's collective then fails (Horovod shuts down) or horovodrun ends it: the job fails at once, and no
    worker pulled a wrong sum."""
    proc, saved = run_steps(tmp_path, "horovod", compression, mistake)
    offender, error = STEP_MISTAKES[mistake]
    assert proc.returncode != 0
    assert error in lines_of(proc, offender), output_of(proc)
    assert "Process name: %d" % offender in proc.stdout + proc.stderr  # (the first to fail)
    assert "another worker failed or ended before it" in lines_of(proc, 1 - offender) or \
        "Terminating remaining workers after failure of Process %d" % offender in proc.stdout, output_of(proc)
    assert sorted(saved[offender]) == ["b/0", "w/0"]  # (nothing pulled in the step of the mistake)


def test_a_key_skipped_in_a_step_fails_the_job_naming_the_steps(tmp_path):
    """Rank 1 pushes and pulls only 'b' in step 1 (in order, as far as it can tell): the next collective of 'w'
    pairs rank 0's step 1 with rank 1's step 2, which the step words show; the job fails, and no worker
    pulled a wrong sum."""
    proc, saved = run_steps(tmp_path, "horovod", "none", "skip_key")
    assert proc.returncode != 0
    assert "the collective of key(s) ['w'] paired different steps of the workers (rank 0: step 1, rank 1: step 2)" \
        in proc.stdout + proc.stderr, output_of(proc)
    assert "b/1" in saved[1] and "w/1" not in saved[0]


@pytest.mark.parametrize("mistake", ["double_push", "skip_step"])
def test_the_parameter_server_refuses_the_same_mistakes(tmp_path, mistake):
    """The dist store (no optimizer on its servers) refuses them at once too, with the same words: its servers
    would count a second push as another worker's (as MXNet's dist_sync does, without a word), and a
    skipped step would sum the others' pushes with the next step's."""
    proc, saved = run_steps(tmp_path, "dist_sync", "4bit", mistake)
    offender, error = STEP_MISTAKES[mistake]
    assert proc.returncode != 0
    assert "[worker %d] %s" % (offender, error) in proc.stdout, output_of(proc)
    assert "job failed: worker %d" % offender in proc.stderr, output_of(proc)
    assert sorted(saved[offender]) == ["b/0", "w/0"]

