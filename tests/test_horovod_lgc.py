"""LGC on a ring (LGC-RAR) on real Horovod jobs (horovodrun --gloo, 2 and 3 processes on loopback): every
pulled update against tests/lgc_reference.py's simulation, bit-identical workers, checkpoints resumed
in each phase and moved between the parameter server and the ring, bad input and a dead worker."""
import json

import numpy as np
import pytest

import lgc_reference as ref
from dist.job import output_of
from mxnet_gc.lgc.options import DEFAULTS
from test_dist_lgc import (INFS, PARAMS, POINTS as PS_POINTS, STEPS, check_every_phase, check_infs_dropped,
                           check_resumed, copy_run, run as run_ps, uninterrupted_run)
from test_horovod import horovodrun

pytestmark = pytest.mark.job  # every test a real job (horovodrun, tools/launch.py)

HOROVOD = {"store": "horovod"}
# the steps the uninterrupted ring job saves a checkpoint after, with the phase of the step
POINTS = [(1, "dense"), (3, "sparse-2"), (5, "train"), (8, "lgc")]


def run(tmp_path, params, workers=2, extra=None, expect_success=True, timeout=240):
    proc = horovodrun("lgc_worker.py", tmp_path, json.dumps(params), STEPS, json.dumps(dict(HOROVOD, **(extra or {}))),
                      np_=workers, timeout=timeout)
    if expect_success:
        assert proc.returncode == 0, output_of(proc)
    return proc


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The ring job of 2 workers with PARAMS that saves a checkpoint after each step of POINTS, run once for
    every test that checks it: (its directory, its stdout).  Saving reads the state and changes nothing the
    job computes (Trainer.save_checkpoint), so it is also the every-phase run of its settings.  The
    directory is shared: a test that runs more jobs resumes in a copy of it (``copy_run``)."""
    out = tmp_path_factory.mktemp("lgc-ring")
    return out, run(out, PARAMS, extra={"save_at": [s for s, _ in POINTS]}).stdout


@pytest.fixture(scope="module")
def uninterrupted_ps(tmp_path_factory):
    """test_dist_lgc.py's uninterrupted parameter-server job of PARAMS (run once a session)."""
    return uninterrupted_run(tmp_path_factory, {}, PS_POINTS)


@pytest.mark.parametrize("workers, options", [
    (2, {}), (3, {}), (2, {"order": "magnitude", "error_feedback": "subtract", "leader": 1, "fine_tune_every": 2}),
    (3, {"index": "union", "error_feedback": "clip", "momentum": 0.9}), (2, {"index": "union", "fine_tune_every": 2})])
def test_every_phase_pulls_the_reference_update(request, tmp_path, workers, options):
    params = dict(PARAMS, **options)
    if (workers, options) == (2, {}):  # the uninterrupted job's settings: that job
        out, stdout = request.getfixturevalue("uninterrupted")
    else:
        out, stdout = tmp_path, run(tmp_path, params, workers).stdout
    check_every_phase(out, stdout, params, workers, 1, ring=True)


def test_an_inf_in_any_phase_is_dropped_and_poisons_nothing(tmp_path):
    proc = run(tmp_path, PARAMS, extra={"inf": INFS})
    check_infs_dropped(tmp_path, proc.stdout + proc.stderr, ring=True)


def test_checkpoints_resume_to_the_uninterrupted_run(uninterrupted, tmp_path):
    # as on the parameter server: each resumed job (in a copy of the uninterrupted job's directory) has
    # later updates, autoencoders and final weights equal to the uninterrupted job's, bit for bit (rank
    # 0's autoencoder state is in the checkpoint)
    copy_run(uninterrupted[0], tmp_path)
    for save_at, phase in POINTS:
        run(tmp_path, PARAMS, extra={"resume": save_at})
        check_resumed(tmp_path, save_at, phase)


@pytest.mark.parametrize("direction", ["ps-to-ring", "ring-to-ps"])
def test_a_checkpoint_moves_between_the_parameter_server_and_the_ring(request, tmp_path, direction):
    # saved in the lgc phase by one transport (its uninterrupted job, which saves after step 8 among
    # others), resumed by the other in a copy of its directory: the frozen autoencoder and the
    # accumulators carry over, and the next step's update is the resuming method's reference from them
    save_at = 8
    if direction == "ps-to-ring":
        copy_run(request.getfixturevalue("uninterrupted_ps")[0], tmp_path)
        run(tmp_path, PARAMS, extra={"resume": save_at})
    else:
        copy_run(request.getfixturevalue("uninterrupted")[0], tmp_path)
        run_ps(tmp_path, PARAMS, 2, 1, extra={"resume": save_at})
    saved = [np.load(tmp_path / ("rank%d.npz" % r)) for r in range(2)]
    resumed = [np.load(tmp_path / ("rank%d.resumed-%d.npz" % (r, save_at))) for r in range(2)]
    step = save_at + 1
    for r in range(2):
        np.testing.assert_array_equal(resumed[r]["autoencoder/%d/0" % step], saved[r]["autoencoder/%d/0" % save_at])
    names = [str(n) for n in saved[0]["names"]]
    coded = json.loads(str(saved[0]["groups"]))[0]
    accumulators = []
    for r in range(2):
        with np.load(tmp_path / ("ckpt-%d-%04d.rank%d.residuals" % (save_at, step, r))) as f:
            accumulators.append([f["lgc/0/v/%d" % c] for c in range(len(coded))])
    group = ref.GroupReference(dict(DEFAULTS, **PARAMS), 2, coded, lambda s: saved[0]["autoencoder/%d/0" % save_at],
                               ring=direction == "ps-to-ring")
    grads = [[resumed[r]["local/%d/%d" % (step, names.index(n))] for n in coded] for r in range(2)]
    ramp = [[{"residual": a, "velocity": np.zeros_like(a)} for a in acc] for acc in accumulators]  # (no momentum)
    want = group.step(step, "lgc", grads, ramp)
    for r in range(2):
        for n in coded:
            np.testing.assert_allclose(resumed[r]["pulled/%d/%d" % (step, names.index(n))].ravel(), want[n],
                                       rtol=1e-4, atol=1e-6, err_msg="rank %d %s" % (r, n))


def test_corrupt_candidates_fail_every_worker_on_a_ring(tmp_path):
    proc = run(tmp_path, dict(PARAMS, index="union"), extra={"fault": {"rank": 1, "corrupt": "CAND"}},
               expect_success=False)
    assert proc.returncode != 0
    assert (proc.stdout + proc.stderr).count("the workers' candidates: worker 1's message of step 4: not a CAND "
                                             "message") >= 2


def test_a_worker_with_other_options_fails_every_worker(tmp_path):
    proc = run(tmp_path, PARAMS, extra={"fault": {"rank": 1, "options": {"ae_steps": 4}}}, expect_success=False)
    assert proc.returncode != 0
    assert (proc.stdout + proc.stderr).count("the workers set different gradient compression parameters") >= 2


def test_own_codes_are_refused_on_a_ring(tmp_path):
    proc = run(tmp_path, dict(PARAMS, codes="own"), expect_success=False)
    assert proc.returncode != 0
    assert "'codes' 'own' is the parameter server's" in proc.stdout + proc.stderr


@pytest.mark.parametrize("kind, step", [("INNOV", 7), ("VECTOR", 4), ("INDEX", 5)])
def test_a_corrupt_message_fails_every_worker(tmp_path, kind, step):
    # rank 1's messages of that kind are damaged (rank 1 leads the odd steps: its first INDEX is step 5's)
    proc = run(tmp_path, PARAMS, extra={"fault": {"rank": 1, "corrupt": kind}}, expect_success=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    for r in (0, 1):  # (its lines alone: Horovod's own log may cut into a line of the traceback)
        mine = "\n".join(line for line in out.splitlines() if line.startswith("[%d]<stderr>:" % r))
        assert "RuntimeError" in mine and "mxnet_gc horovod store: lgc step %d" % step in mine, out[-3000:]
    assert "not a %s message" % kind in out


def test_a_worker_that_dies_mid_allreduce_ends_the_job(tmp_path):
    # rank 1 is killed (SIGKILL) in step 8 (the lgc phase) while rank 0 waits in the step's collectives:
    # horovodrun names it and ends the job (subprocess.run's timeout would fail the test on a hang)
    proc = run(tmp_path, PARAMS, extra={"fault": {"rank": 1, "die_at": 8}}, expect_success=False, timeout=120)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "one or more processes exited with non-zero status" in out and "Process name: 1\nExit code: 137" in out, \
        out[-3000:]  # (rank 0, failing because of it, waits a moment before it exits: horovodrun names rank 1)
    assert not (tmp_path / "rank0.npz").exists()  # rank 0 did not run on
