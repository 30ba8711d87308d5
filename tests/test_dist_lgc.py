"""Learned gradient compression on real parameter-server jobs (scheduler, servers, workers through
tools/launch.py): the phases, and every pulled update equal to tests/lgc_reference.py's simulation."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import lgc_reference as ref
from dist.job import HERE, LAUNCH, ROOT, output_of

pytestmark = pytest.mark.job  # every test a real job (tools/launch.py)

WORKER = os.path.join(HERE, "lgc_worker.py")
PARAMS = {"type": "lgc", "density": 0.05, "innovation_density": 0.01, "dense_steps": 2, "ramp_steps": 2,
          "ramp_stages": 2, "ae_steps": 3}
STEPS = 10
# The uninterrupted jobs test_checkpoints_resume_to_the_uninterrupted_run resumes (2 workers, 1 server), by
# their options: the steps each saves a checkpoint after, with the phase of the step (every phase in one of
# them: the dense phase and the ramp's second stage with momentum's velocities too)
POINTS = [(2, "sparse-1"), (5, "train"), (8, "lgc")]
FINE_TUNED, FINE_TUNED_POINTS = {"fine_tune_every": 2}, [(8, "lgc")]  # (after a fine-tuning step)
# with DGC's momentum correction: the dense velocities saved at the dense phase's end go on in the ramp
MOMENTUM = {"momentum": 0.9, "dense_momentum": True}
MOMENTUM_POINTS = [(1, "dense"), (3, "sparse-2"), (8, "lgc")]


def run(tmp_path, params, workers, servers, steps=STEPS, extra=None, expect_success=True, env=()):
    argv = [sys.executable, LAUNCH, "-n", str(workers), "-s", str(servers), "--timeout", "200"]
    for item in env:
        argv += ["--env", item]
    argv += [sys.executable, WORKER, str(tmp_path), json.dumps(params), str(steps), json.dumps(extra or {})]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=260)
    if expect_success:
        assert proc.returncode == 0, output_of(proc)
    return proc


def load(tmp_path, workers, steps):
    saved = [dict(np.load(tmp_path / ("rank%d.npz" % r))) for r in range(workers)]
    names = [str(n) for n in saved[0]["names"]]
    locals_ = [[{n: saved[r]["local/%d/%d" % (s, i)] for i, n in enumerate(names)} for s in range(steps)]
               for r in range(workers)]
    return saved, names, locals_


_RUNS = {}  # the uninterrupted jobs run so far this session: (options, steps saved) -> (directory, stdout)


def uninterrupted_run(tmp_path_factory, options, points):
    """The job of 2 workers and 1 server with PARAMS and ``options`` that saves a checkpoint after each step
    of ``points``, run once a session for every test that checks it (here and in test_horovod_lgc.py):
    (its directory, its stdout).  Saving reads the state and changes nothing the job computes
    (Trainer.save_checkpoint), so it is also the every-phase run of its settings.  The directory is
    shared: a test that runs more jobs resumes in a copy of it (``copy_run``)."""
    save_at = [s for s, _ in points]
    key = json.dumps([options, save_at], sort_keys=True)
    if key not in _RUNS:
        out = tmp_path_factory.mktemp("lgc-ps")
        _RUNS[key] = out, run(out, dict(PARAMS, **options), 2, 1, extra={"save_at": save_at}).stdout
    return _RUNS[key]


def copy_run(directory, tmp_path):
    """A shared run's files (its rank<r>.npz and checkpoints) into a test's own directory."""
    shutil.copytree(directory, tmp_path, dirs_exist_ok=True)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    return uninterrupted_run(tmp_path_factory, {}, POINTS)


@pytest.fixture(scope="module")
def uninterrupted_fine_tuned(tmp_path_factory):
    return uninterrupted_run(tmp_path_factory, FINE_TUNED, FINE_TUNED_POINTS)


@pytest.mark.parametrize("workers, servers, options", [
    (2, 1, {}), (3, 2, {}), (2, 1, {"order": "magnitude", "error_feedback": "subtract", "leader": 1}),
    (2, 1, {"autoencoder": False}), (2, 1, FINE_TUNED), (3, 1, {"codes": "own", "error_feedback": "clip", **MOMENTUM}),
    (2, 1, {"codes": "own", "fine_tune_every": 2}), (3, 1, {"codes": "own", "index": "union"}),
    (3, 2, {"codes": "own", "index": "union", "error_feedback": "subtract", "leader": 2, "signs": True}),
    (2, 1, {"codes": "own", "index": "union", "fine_tune_every": 2})])
def test_every_phase_pulls_the_reference_update(request, tmp_path, workers, servers, options):
    params = dict(PARAMS, **options)
    if (workers, servers) == (2, 1) and options in ({}, FINE_TUNED):  # an uninterrupted job's settings: that job
        out, stdout = request.getfixturevalue("uninterrupted_fine_tuned" if options else "uninterrupted")
    else:
        out, stdout = tmp_path, run(tmp_path, params, workers, servers).stdout
    check_every_phase(out, stdout, params, workers, servers)


def test_coded_tensors_cut_over_the_servers_pull_the_reference_update(tmp_path):
    """Coded tensors larger than MXNET_GC_BIGARRAY_BOUND are cut into parts on both servers (3072 and 1536
    values in parts of 768): each server's group codes its parts, every phase still pulls the reference's
    update."""
    stdout = run(tmp_path, PARAMS, 2, 2, env=["MXNET_GC_BIGARRAY_BOUND=1000"]).stdout
    parts = json.loads(str(np.load(tmp_path / "rank0.npz")["parts"]))
    assert [len(g) for g in parts] == [3, 3] and {e - b for g in parts for _, b, e in g} == {768}
    check_every_phase(tmp_path, stdout, PARAMS, 2, 2)


def simulate_parts(full, locals_, parts, weights, ring):
    """The reference's pulled updates when each group codes ``parts`` ((name, first, end) of a tensor's flat
    values; a tensor cut over several servers is coded as its parts, each with its own top-k, scales and
    accumulators): the reference runs on the parts as tensors of their own, and the parts are joined."""
    def label(part):
        return "%s[%d:%d]" % part
    split = {n for g in parts for n, _, _ in g}
    cut = [[{**{n: x for n, x in step.items() if n not in split},
             **{label(p): step[p[0]].ravel()[p[1]:p[2]] for g in parts for p in g}} for step in worker]
           for worker in locals_]
    pulled = ref.simulate(full, cut, [([label(p) for p in g], w) for g, w in zip(parts, weights)], STEPS, ring=ring)
    for step in pulled:
        for n in split:
            pieces = sorted(p for g in parts for p in g if p[0] == n)
            step[n] = np.concatenate([step.pop(label(p)) for p in pieces])
    return pulled


def check_every_phase(tmp_path, stdout, params, workers, groups_wanted, ring=False):
    """A run of STEPS steps: the phases, the groups, the autoencoders, every pulled update against the
    reference, identical final weights on every worker."""
    saved, names, locals_ = load(tmp_path, workers, STEPS)
    full = dict(__import__("mxnet_gc.lgc.options", fromlist=["DEFAULTS"]).DEFAULTS, **params)
    # the phases switch at the configured steps, on every worker, printed by rank 0
    if params.get("autoencoder", True):
        expected = ["dense"] * 2 + ["sparse-1", "sparse-2"] + ["train"] * 3 + ["lgc"] * 3
        switches = ("step 2: phase dense -> sparse-1", "step 4: phase sparse-2 -> train", "step 7: phase train -> lgc")
    else:  # the ramp's last stage to the end
        expected = ["dense"] * 2 + ["sparse-1"] + ["sparse-2"] * 7
        switches = ("step 2: phase dense -> sparse-1", "step 3: phase sparse-1 -> sparse-2")
    for r in range(workers):
        assert list(saved[r]["phases"]) == expected
    for line in switches:
        assert line in stdout
    coded = [str(n) for n in saved[0]["coded"]]
    assert len(coded) == 2 and all(n.endswith("weight") for n in coded)  # the middle layers' weights
    groups = json.loads(str(saved[0]["groups"]))
    parts = [[tuple(part) for part in g] for g in json.loads(str(saved[0]["parts"]))]
    if params.get("autoencoder", True):
        assert sorted(set(n for g in groups for n in g)) == sorted(coded)
        assert len(groups) == groups_wanted  # (one per server holding coded tensors; one on a ring)
        for n in coded:  # a coded tensor's parts cover it once
            covered = sorted((b, e) for g in parts for m, b, e in g if m == n)
            assert [b for b, _ in covered] == [0] + [e for _, e in covered[:-1]]
            assert covered[-1][1] == locals_[0][0][n].size
    else:
        assert groups == []  # no autoencoder: no groups, every coded tensor stays in the ramp's codec
        parts = [[(n, 0, locals_[0][0][n].size) for n in coded]]
    for g in range(len(groups) if params.get("autoencoder", True) else 0):  # every worker: the same autoencoders
        for step in range(7, STEPS):
            for r in range(1, workers):
                np.testing.assert_array_equal(saved[r]["autoencoder/%d/%d" % (step, g)],
                                              saved[0]["autoencoder/%d/%d" % (step, g)])
        after = [saved[0]["autoencoder/%d/%d" % (step, g)] for step in range(7, STEPS)]
        if params.get("fine_tune_every"):  # step 8 (the 2nd of the lgc phase) trained: new weights from then on
            assert np.any(after[1] != after[0]) and np.array_equal(after[2], after[1])
        else:  # frozen
            assert all(np.array_equal(w, after[0]) for w in after)
    pulled = simulate_parts(full, locals_, parts, [lambda step, g=g: saved[0]["autoencoder/%d/%d" % (step, g)]
                                                   for g in range(len(parts))], ring)
    for step in range(STEPS):
        # float32 sums in the servers' arrival order (1 ulp apart); in the lgc phase the networks also run
        # in other processes
        tol = dict(rtol=1e-4, atol=1e-6) if expected[step] == "lgc" else dict(rtol=1e-6, atol=3e-7)
        for i, n in enumerate(names):
            for r in range(workers):
                np.testing.assert_allclose(saved[r]["pulled/%d/%d" % (step, i)].ravel(), pulled[step][n], **tol,
                                           err_msg="step %d (%s) %s rank %d" % (step, expected[step], n, r))
                if ring:  # every worker combined the same gathered messages in rank order
                    np.testing.assert_array_equal(saved[r]["pulled/%d/%d" % (step, i)],
                                                  saved[0]["pulled/%d/%d" % (step, i)])
    for i in range(len(names)):  # all workers end with identical weights
        for r in range(1, workers):
            np.testing.assert_array_equal(saved[r]["weight/%d" % i], saved[0]["weight/%d" % i])


def test_a_worker_with_other_options_fails_every_worker(tmp_path):
    fault = {"rank": 1, "options": {"ae_steps": 4}}  # its train phase would end a step later
    proc = run_fault(tmp_path, fault)
    assert proc.returncode != 0
    for r in (0, 1):
        assert "[worker %d]" % r in proc.stdout and "different gradient compression parameters" in proc.stdout
    assert "(rank 0 / rank 1): ae_steps: 3 / 4" in proc.stdout  # the server names what differs


@pytest.mark.parametrize("kind, options", [("LEAD", {}), ("INNOV", {}), ("CODED", {"codes": "own"})])
def test_a_corrupt_code_is_rejected_and_every_worker_told(tmp_path, kind, options):
    proc = run(tmp_path, dict(PARAMS, **options), 2, 1, extra={"fault": {"rank": 1, "corrupt": kind}},
               expect_success=False)
    assert proc.returncode != 0
    for r in (0, 1):  # every worker raises the server's error after the first lgc step
        assert "[worker %d] RuntimeError: mxnet_gc server 0: rejected step 7 of the coded tensors" % r in proc.stdout
    assert "not a %s message" % kind in proc.stdout


def test_corrupt_candidates_are_rejected_and_every_worker_told(tmp_path):
    """With index 'union' a worker's corrupt CAND: the server refuses the step's index set (the first train
    step's), every worker raises its error."""
    proc = run(tmp_path, dict(PARAMS, codes="own", index="union"), 2, 1,
               extra={"fault": {"rank": 1, "corrupt": "CAND"}}, expect_success=False)
    assert proc.returncode != 0
    for r in (0, 1):
        assert "[worker %d] RuntimeError: mxnet_gc server 0: rejected the workers' candidate indices: worker 1's " \
               "message of step 4: not a CAND message" % r in proc.stdout


def test_candidates_without_own_codes_are_refused_on_the_parameter_server(tmp_path):
    proc = run(tmp_path, dict(PARAMS, index="union"), 2, 1, expect_success=False)
    assert proc.returncode != 0
    assert "'index' 'union' needs 'codes' 'own' on the parameter server" in proc.stdout + proc.stderr


def run_fault(tmp_path, fault):
    return run(tmp_path, PARAMS, 2, 1, extra={"fault": fault}, expect_success=False)


@pytest.mark.parametrize("options, points", [({}, POINTS), (FINE_TUNED, FINE_TUNED_POINTS),
                                             (MOMENTUM, MOMENTUM_POINTS)])
def test_checkpoints_resume_to_the_uninterrupted_run(tmp_path, tmp_path_factory, options, points):
    # one job runs all the steps and saves after each step of ``points`` (uninterrupted_run's, shared with
    # test_every_phase_pulls_the_reference_update); a job per checkpoint resumes from it (in a copy of its
    # directory) and runs the rest: every later pulled update and the final weights are the same, bit for
    # bit (the servers' autoencoders, their Adam states and replay buffers, and the workers'
    # accumulators are in the checkpoint)
    params = dict(PARAMS, **options)
    copy_run(uninterrupted_run(tmp_path_factory, options, points)[0], tmp_path)
    for save_at, phase in points:
        run(tmp_path, params, 2, 1, extra={"resume": save_at})
        check_resumed(tmp_path, save_at, phase)


def check_resumed(tmp_path, save_at, phase):
    """The resumed job's (2 workers) updates, autoencoders and final weights equal the whole job's."""
    for r in range(2):
        whole = np.load(tmp_path / ("rank%d.npz" % r))
        resumed = np.load(tmp_path / ("rank%d.resumed-%d.npz" % (r, save_at)))
        assert list(whole["phases"])[save_at] == phase and len(resumed["phases"]) == STEPS - save_at - 1
        for name in resumed.files:
            if name.startswith(("pulled/", "weight/", "autoencoder/")):
                np.testing.assert_array_equal(resumed[name], whole[name], err_msg="rank %d %s" % (r, name))


# An inf in a coded tensor's gradient in every phase: dense (step 1), sparse ramp (3), train (4: the
# leader's, 5: not), lgc (7: the leader's, 9: not).  The leader rotates (step % 2).
INFS = [[1, 1, 2, 7], [0, 3, 2, 7], [0, 4, 2, 7], [0, 5, 4, 3], [1, 7, 2, 7], [0, 9, 4, 3]]


def check_infs_dropped(tmp_path, stdout, ring=False, params=PARAMS):
    """Every step equals the reference with each inf dropped (as 0, in the dense phase too) and every
    pulled value is finite; each worker counted its infs, in every phase (a push's counts are read at
    the next push: the last step's are not)."""
    check_every_phase(tmp_path, stdout, params, 2, 1, ring=ring)
    saved, names, _ = load(tmp_path, 2, STEPS)
    for r in range(2):
        counted = {}
        for rank, step, i, _ in INFS:
            if rank == r and step < STEPS - 1:
                counted[names[i]] = counted.get(names[i], 0) + 1
        assert json.loads(str(saved[r]["nonfinite"])) == counted
    for r in range(2):
        for step in range(STEPS):
            for i in range(len(names)):
                assert np.isfinite(saved[r]["pulled/%d/%d" % (step, i)]).all(), (r, step, names[i])
    assert "dense1_weight: 1 (dropped: not sent, any residual unchanged there)" in stdout


@pytest.mark.parametrize("options", [{}, MOMENTUM], ids=["", "momentum"])
def test_an_inf_in_any_phase_is_dropped_and_poisons_nothing(tmp_path, options):
    proc = run(tmp_path, dict(PARAMS, **options), 2, 1, extra={"inf": INFS})
    check_infs_dropped(tmp_path, proc.stdout + proc.stderr, params=dict(PARAMS, **options))
