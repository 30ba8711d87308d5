"""MXNet's kvstore API at its edges, on both of mxnet_gc's stores (real jobs: the parameter server
through tools/launch.py, Horovod through horovodrun): clear errors for bad calls, arrays per device
summed and written to every output, keys given twice, NaN gradients reported with the parameter's
name, and the stock gluon.Trainer on two contexts per worker against a numpy reference."""
import os
import subprocess
import sys

import numpy as np
import pytest

from dist.api_worker import data, initial_dense
from dist.job import HERE, LAUNCH, ROOT, output_of
from test_horovod import horovodrun

pytestmark = pytest.mark.job  # every test a real job (tools/launch.py, horovodrun)

WORKERS = 2
CONTEXTS = 2


def run(tmp_path, store, policy="warn"):
    script = os.path.join(HERE, "api_worker.py")
    if store == "dist_sync":
        argv = [sys.executable, LAUNCH, "-n", str(WORKERS), "-s", "1", "--timeout", "120", sys.executable, script,
                store, str(tmp_path), policy]
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180)
    else:
        proc = horovodrun("api_worker.py", store, tmp_path, policy, np_=WORKERS)
    assert proc.returncode == 0, output_of(proc)
    return [dict(np.load(tmp_path / ("rank%d.npz" % r))) for r in range(WORKERS)]


def reference_dense(steps=3, lr=0.1, batch=8):
    """The Dense(3) layer after SGD on the gradients summed over every worker and context (L2Loss)."""
    weight, bias = (a.astype(np.float64) for a in initial_dense())
    for step in range(steps):
        grad_w, grad_b = np.zeros_like(weight), np.zeros_like(bias)
        for rank in range(WORKERS):
            for c in range(CONTEXTS):
                x, y = (a.astype(np.float64) for a in data(rank, c, step))
                d = (x @ weight.T + bias - y) / y.shape[1]  # L2Loss: half the mean square over outputs
                grad_w += d.T @ x
                grad_b += d.sum(axis=0)
        weight -= lr / batch * grad_w
        bias -= lr / batch * grad_b
    return weight, bias


@pytest.mark.parametrize("store", ["dist_sync", "horovod"])
def test_api_edges(tmp_path, store):
    results = run(tmp_path, store)
    expected_errors = {
        "keys_and_values": "ValueError: push: 2 keys and 1 values",
        "pull_without_out": "ValueError: pull: out= is required",
        "bool_key": "ValueError: keys must be int or str, got True (bool)",
        "float_key": "ValueError: keys must be int or str, got 7.0 (float)",
        "empty_init": "ValueError: init: key 'z' has an empty array",
        "float16_push": "TypeError: push: key 'a': arrays must be float32, got float16",
        "wrong_shape_pull": "ValueError: pull: key 'a' has shape (3, 4), got an array of shape (12,)",
        "uninitialized": "ValueError: key 'nope' is not initialized",
        "duplicate_init": "ValueError: init: key 'y' is given twice",
        "residuals_of_4bit": "ValueError: %s holds residuals of gradient compression {\"compressed_pull\": false, "
                             "\"default\": {\"pull_bits\": 4, \"rounding\": \"nearest\", \"thresholds\": [0.25," % (tmp_path / "rank%d.residuals"),
    }
    weight, bias = reference_dense()
    for rank, saved in enumerate(results):
        for label, start in expected_errors.items():
            if "%d" in start:
                start = start % rank
            assert str(saved["error/" + label]).startswith(start), (label, saved["error/" + label])
        np.testing.assert_array_equal(saved["z"], np.ones(2))
        # per device: rank r pushes (1 + r) and 10 (1 + r); every output gets the sum over all
        want = sum((1 + r) * (1 + 10) for r in range(WORKERS))
        for c in range(CONTEXTS):
            np.testing.assert_array_equal(saved["devices/%d" % c], np.full((3, 4), want))
        np.testing.assert_array_equal(saved["duplicates/first"], np.full((3, 4), 3.0 * WORKERS))
        np.testing.assert_array_equal(saved["duplicates/second"], np.full((3, 4), 3.0 * WORKERS))
        np.testing.assert_array_equal(saved["duplicates/other"], np.full(5, float(sum(range(WORKERS)))))
        warned = list(saved["nonfinite/warnings"])
        if rank == 0:  # rank 0 pushed a NaN and an inf twice: one warning, naming the parameter
            assert len(warned) == 1 and "dense0_weight: 2 (dropped: not sent" in warned[0], warned
            assert int(saved["nonfinite/count"]) == 2
        else:
            assert warned == [] and int(saved["nonfinite/count"]) == 0
        for c in range(CONTEXTS):
            np.testing.assert_allclose(saved["gluon/weight/%d" % c], weight, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(saved["gluon/bias/%d" % c], bias, rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(saved["gluon/weight/%d" % c], results[0]["gluon/weight/0"])


def test_nonfinite_raise_policy(tmp_path):
    results = run(tmp_path, "dist_sync", policy="raise")
    for saved in results:
        error = str(saved["nonfinite/error"])
        assert error.startswith("step 1: mxnet_gc: push 3 had non-finite gradient values (NaN or inf): "
                                "dense0_weight: 2 (dropped: not sent, any residual unchanged there)"), error
        assert "dense0_weight: 2" in error


def run_transport(store, out, *args):
    script = os.path.join(HERE, "transport_worker.py")
    if store == "dist_sync":
        argv = [sys.executable, LAUNCH, "-n", str(WORKERS), "-s", "1", "--timeout", "120", sys.executable, script,
                store, str(out)] + [str(a) for a in args]
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180)
    else:
        proc = horovodrun("transport_worker.py", store, out, *args, np_=WORKERS)
    assert proc.returncode == 0, output_of(proc)


@pytest.mark.parametrize("first, second, kind", [("dist_sync", "horovod", "fixed"), ("horovod", "dist_sync", "auto"),
                                                 ("dist_sync", "horovod", "auto-gc_2bit")])
def test_residuals_move_between_transports(tmp_path, first, second, kind):
    """Residuals saved by one transport load on the other, into a fresh store: the next step's sum and the
    residuals after it are those of a numpy simulation of four steps on one transport.  With 'auto' the
    first two steps are the dense warm-up that fits the levels (gc_2bit: its one level), and the fresh store
    takes the saved fit."""
    import reference
    from dist.job import gradient
    from dist.transport_worker import COMPRESSIONS, KEYS, SAVED_STEPS, SCALE, SEED
    from mxnet_gc.level_fit import ladder, single

    compression = COMPRESSIONS[kind]
    warmup = compression["warmup_steps"]
    saved, resumed = tmp_path / "saved", tmp_path / "resumed"
    saved.mkdir()
    resumed.mkdir()
    run_transport(first, saved, kind, "save")
    run_transport(second, resumed, kind, "load", saved)
    for i, (key, shape) in enumerate(KEYS):
        grads = [[gradient(SEED, r, index, i, shape, SCALE) for r in range(WORKERS)] for index in range(SAVED_STEPS + 1)]
        if kind.startswith("auto"):  # the workers' mean largest |g| over the warm-up's steps
            largest = sum(np.float32(max(np.abs(g[r]).max() for g in grads[:warmup])) for r in range(WORKERS))
            levels = (single if kind == "auto-gc_2bit" else ladder)(float(largest / np.float32(WORKERS)))
        else:
            levels = compression["thresholds"]
        residuals = [np.zeros(shape, np.float32) for _ in range(WORKERS)]
        total = np.zeros(shape, np.float32)
        for index in range(warmup, SAVED_STEPS + 1):
            for r in range(WORKERS):
                q, residuals[r] = reference.quantize_array(grads[index][r], residuals[r], levels,
                                                           reference.rounding_of(compression))
                if index == SAVED_STEPS:
                    total += q
        for r in range(WORKERS):
            with np.load(resumed / ("rank%d.npz" % r)) as pulled:
                np.testing.assert_array_equal(pulled["%s/%d" % (key, SAVED_STEPS)], total)
            with np.load(resumed / ("rank%d.residuals" % r)) as after:
                np.testing.assert_array_equal(after["%r/0" % (key,)], residuals[r])


@pytest.mark.parametrize("first, second", [("horovod", "horovod"), ("dist_sync", "horovod"), ("horovod", "dist_sync")])
def test_residuals_of_the_compressed_pull_in_checkpoints(tmp_path, first, second):
    """With 'compressed_pull', the ring's owners' residuals are saved whole, per key, and a resume on the ring
    continues bit for bit; a parameter server does not save its servers' residuals, so a resume from or
    onto one starts them from zero (as a resumed parameter-server job does).  The next step's pull against
    a numpy simulation either way."""
    import reference
    from dist.job import gradient
    from dist.transport_worker import COMPRESSIONS, KEYS, SAVED_STEPS, SCALE, SEED

    compression = COMPRESSIONS["compressed-pull"]
    levels, rounding = compression["thresholds"], reference.rounding_of(compression)
    saved, resumed = tmp_path / "saved", tmp_path / "resumed"
    saved.mkdir()
    resumed.mkdir()
    run_transport(first, saved, "compressed-pull", "save")
    run_transport(second, resumed, "compressed-pull", "load", saved)
    pull_levels = [np.float32(t) * WORKERS for t in levels]
    differ = False
    for i, (key, shape) in enumerate(KEYS):
        residuals = [np.zeros(shape, np.float32) for _ in range(WORKERS)]
        owners = np.zeros(shape, np.float32)
        for index in range(SAVED_STEPS + 1):
            total = np.zeros(shape, np.float32)
            for r in range(WORKERS):
                q, residuals[r] = reference.quantize_array(gradient(SEED, r, index, i, shape, SCALE), residuals[r],
                                                           levels, rounding)
                total += q
            carried, owners = reference.quantize_array(total, owners, pull_levels, rounding)
        fresh, _ = reference.quantize_array(total, np.zeros(shape, np.float32), pull_levels, rounding)
        differ |= bool(np.any(carried != fresh))  # (the saved residuals show in the pull)
        # a parameter server's servers' residuals are not saved, nor restored onto it
        pulled = carried if (first, second) == ("horovod", "horovod") else fresh
        for r in range(WORKERS):
            with np.load(resumed / ("rank%d.npz" % r)) as got:
                np.testing.assert_array_equal(got["%s/%d" % (key, SAVED_STEPS)], pulled)
    assert differ
