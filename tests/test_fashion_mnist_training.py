"""The Fashion-MNIST example on real jobs: per-layer groups are chosen identically everywhere, and a run
resumed from a checkpoint ends exactly where an uninterrupted run ends."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import mxnet as mx
import pytest

from dist.job import LAUNCH, ROOT, output_of
from tools import horovodrun as hvdrun

EXAMPLE = os.path.join(ROOT, "examples", "train_fashion_mnist.py")
# 10 steps an epoch, no warm-up, 1000 test images (10k would take rank 0 longer than the epoch's training)
QUICK = ["--limit", "1280", "--test-limit", "1000", "--batch-size", "64", "--dense-warmup-steps", "0"]
GROUPS = ["--groups", "--calibration-steps", "5"]


def train(tmp_path, *args):
    argv = [sys.executable, LAUNCH, "-n", "2", "-s", "1", "--timeout", "300", sys.executable, EXAMPLE] + QUICK + list(args)
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=360)
    assert proc.returncode == 0, output_of(proc)
    return proc


def checkpoint_file(prefix, suffix):
    """The file of the checkpoint ``prefix`` (its manifest lists them) whose name ends with ``suffix``."""
    with open(prefix + ".trainer.json") as f:
        (name,) = [n for n in json.load(f)["checkpoints"][0]["files"] if n.endswith(suffix)]
    return os.path.join(os.path.dirname(prefix), name)


def resume_and_compare(tmp_path, *args):
    """Trains 2 epochs at once, saving a checkpoint after each, then epoch 2 again resumed from the first
    epoch's checkpoint; the weights and every worker's residuals (codec state) must end equal.  Returns the
    uninterrupted and the resumed run's output, the uninterrupted run's last checkpoint and its epoch log."""
    whole, resumed = str(tmp_path / "whole-{epoch}"), str(tmp_path / "resumed")
    log = str(tmp_path / "log.json")
    proc = train(tmp_path, "--epochs", "2", "--checkpoint", whole, "--log", log, *args)
    again = train(tmp_path, "--epochs", "2", "--resume", whole.format(epoch=1), "--checkpoint", resumed, *args)
    same_state(whole.format(epoch=2), resumed)
    with open(log) as f:
        epochs = json.load(f)["epochs"]
    assert len(epochs) == 2
    return proc, again, whole.format(epoch=2), epochs


@pytest.fixture(scope="module")
def grouped_run(tmp_path_factory):
    """4bit with per-layer groups after 2 dense steps, 2 epochs of 10 steps, resumed from epoch 1
    (resume_and_compare); also the checkpoint of epoch 1 that test_resume_refuses_other_settings_and_corrupt_files
    resumes from, and the log that test_phases_in_the_log_and_the_report reads (log.json, log.png)."""
    tmp = tmp_path_factory.mktemp("grouped")
    return resume_and_compare(tmp, "--dense-warmup-steps", "2", *GROUPS) + (str(tmp / "whole-1"), tmp)


@pytest.mark.job  # the example on real jobs (tools/launch.py, horovodrun); the last three tests run in-process
def test_resumed_run_equals_uninterrupted_run(grouped_run):
    proc, _, whole, epochs, _, _ = grouped_run
    assert "threshold groups after 5 calibration steps" in proc.stdout
    assert all(0 < e["bytes_sent"] < e["dense_push_bytes"] for e in epochs)
    with open(whole + ".trainer.json") as f:
        table = json.load(f)["checkpoints"][0]["groups"]["table"]
    assert {row["group"] for row in table} <= {"small", "medium", "large"}


TOPK = ["--compression", "layerwise_topk", "--density", "0.05", "--merge", "dp"]


@pytest.fixture(scope="module")
def topk_run(tmp_path_factory):
    """Merged and pipelined top-k, 2 epochs, resumed from epoch 1 (resume_and_compare); its checkpoints
    are also test_checkpoint_moves_between_transports's (whole-1, whole-2)."""
    tmp = tmp_path_factory.mktemp("topk")
    return resume_and_compare(tmp, *TOPK) + (tmp,)


@pytest.mark.job
def test_resumed_merged_pipelined_topk_run_equals_uninterrupted_run(topk_run):
    """The merge plan is in the checkpoint: the resumed run sends the same messages without profiling."""
    proc, resumed, whole, epochs, _ = topk_run
    assert 0 < epochs[1]["bytes_sent"] < 0.5 * epochs[1]["dense_push_bytes"]  # (the first has the probes)
    with open(whole + ".trainer.json") as f:
        plan = json.load(f)["checkpoints"][0]["merge"]["plan"]
    assert plan["strategy"] == "dp" and plan["groups"] and "merge plan (dp)" in proc.stdout
    assert "merge plan" not in resumed.stdout  # no new profiling: the saved plan is used


@pytest.mark.job
def test_gluoncv_resnet20_runs_with_per_layer_groups(tmp_path):
    log = str(tmp_path / "log.json")
    proc = train(tmp_path, "--model", "resnet20", "--epochs", "1", "--log", log, *GROUPS)
    assert "== report ==" in proc.stdout and "compression ratio of the sent traffic" in proc.stdout
    with open(log) as f:
        run = json.load(f)
    assert len(run["groups"]) == 65  # every parameter with a gradient got a group
    assert run["epochs"][0]["test_accuracy"] > 0.1  # better than chance after 10 steps


@pytest.mark.job
def test_resume_refuses_other_settings_and_corrupt_files(tmp_path, grouped_run):
    """A checkpoint names the settings of the job that saved it; a job with other workers or another codec,
    or a checkpoint file with a flipped bit, is refused on every worker with what differs."""
    first = grouped_run[4]  # (a copy: its files are damaged below)
    for name in os.listdir(os.path.dirname(first)):
        if name.startswith(os.path.basename(first)) and name[len(os.path.basename(first))] in ".-":
            shutil.copy(os.path.join(os.path.dirname(first), name), tmp_path / name)
    saved = str(tmp_path / os.path.basename(first))

    def refused(*args, workers=2):
        argv = [sys.executable, LAUNCH, "-n", str(workers), "-s", "1", "--timeout", "120", sys.executable, EXAMPLE] + \
            QUICK + ["--dense-warmup-steps", "2", "--epochs", "2", "--resume", saved] + list(args)
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180)
        assert proc.returncode != 0
        return proc.stdout + proc.stderr

    out = refused("--compression", "layerwise_topk")
    assert "was saved by a job with other settings; compression: {" in out and "layerwise_topk" in out
    assert "num_workers: 2 in the checkpoint, 3 in this job" in refused(*GROUPS, workers=3)
    params = checkpoint_file(saved, ".params")
    with open(params, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0x10
    with open(params, "wb") as f:
        f.write(bytes(data))
    assert "checkpoint file %s is corrupt" % params in refused(*GROUPS)
    data[len(data) // 2] ^= 0x10
    with open(params, "wb") as f:
        f.write(bytes(data))
    mine, other = checkpoint_file(saved, ".rank1.residuals"), checkpoint_file(saved, ".rank0.residuals")
    for suffix in ("", ".sha256"):  # a whole, valid file, but not the one this checkpoint wrote
        shutil.copy(other + suffix, mine + suffix)
    assert "checkpoint file %s is not the one its manifest lists" % mine in refused(*GROUPS)


@pytest.mark.job
def test_phases_in_the_log_and_the_report(tmp_path, grouped_run):
    """The JSON log says which phases each epoch ran in; a run whose compression never started says so."""
    proc, run_dir = grouped_run[0], grouped_run[-1]
    with open(run_dir / "log.json") as f:
        run = json.load(f)
    assert run["schedule"] == "dense 0-1 (dense), calibrate 2-6 (dense), compressed 7- (compressed)"
    times = [[p.pop("ms_per_step") for p in e["phases"]] for e in run["epochs"]]
    assert all(t > 0 for epoch in times for t in epoch)
    assert [e["phases"] for e in run["epochs"]] == [
        [{"phase": "dense", "sends": "dense", "steps": [0, 1]}, {"phase": "calibrate", "sends": "dense", "steps": [2, 6]},
         {"phase": "compressed", "sends": "compressed", "steps": [7, 9]}],
        [{"phase": "compressed", "sends": "compressed", "steps": [10, 19]}]]
    assert "mxnet_gc: step 2: phase dense -> calibrate (dense)" in proc.stdout
    assert "mxnet_gc: step 7: phase calibrate -> compressed (compressed)" in proc.stdout
    assert ("epoch 1 ran in: dense (steps 0-1, %.1f ms per step), calibrate (steps 2-6, %.1f ms per step), "
            "compressed (steps 7-9, %.1f ms per step)" % tuple(times[0])) in proc.stdout
    assert "compression ratio of the sent traffic" in proc.stdout
    assert re.search(r"^\[worker 0\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ epoch 2: ", proc.stdout, re.M)  # timestamps
    assert (run_dir / "log.png").stat().st_size > 1000  # the training curve, next to the log
    never = train(tmp_path, "--epochs", "1", "--groups", "--calibration-steps", "50")
    assert "compression never started: every step pushed dense gradients" in never.stdout
    assert "compression ratio" not in never.stdout


def same_state(a, b):
    """Weights and both workers' residuals of two checkpoints, bit for bit."""
    x, y = mx.nd.load(checkpoint_file(a, ".params")), mx.nd.load(checkpoint_file(b, ".params"))
    assert sorted(x) == sorted(y)
    for name in x:
        np.testing.assert_array_equal(x[name].asnumpy(), y[name].asnumpy(), err_msg=name)
    for rank in range(2):
        suffix = ".rank%d.residuals" % rank
        with np.load(checkpoint_file(a, suffix)) as p, np.load(checkpoint_file(b, suffix)) as q:
            assert sorted(p.files) == sorted(q.files)
            for k in p.files:
                if k == "__meta__":  # (the number of servers differs between transports)
                    assert json.loads(str(p[k]))["compression"] == json.loads(str(q[k]))["compression"]
                else:
                    np.testing.assert_array_equal(p[k], q[k], err_msg=k)


@pytest.mark.job
def test_checkpoint_moves_between_transports(tmp_path, topk_run):
    """A checkpoint saved on the parameter server resumes on Horovod, and Horovod's back on the parameter
    server.  With 2 workers both transports add the same two sparse payloads (lossless sparse pulls), so
    the moved runs must end bit for bit where the runs that stayed end (the merge plan moves with them)."""
    sparse = TOPK
    moved, stay3, back3 = (str(tmp_path / n) for n in ("moved", "stay3", "back3"))
    first, stay = (str(topk_run[-1] / ("whole-%d" % e)) for e in (1, 2))  # epoch 1's checkpoint, epoch 2's
    proc = subprocess.run(hvdrun.ARGV + ["-np", "2", "-H", "localhost:2", "--gloo", "--start-timeout", "60",
                           sys.executable, EXAMPLE, "--kvstore", "horovod"] + QUICK +
                          ["--epochs", "2", "--resume", first, "--checkpoint", moved] + sparse,
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, output_of(proc)
    same_state(stay, moved)
    train(tmp_path, "--epochs", "3", "--resume", stay, "--checkpoint", stay3, *sparse)
    train(tmp_path, "--epochs", "3", "--resume", moved, "--checkpoint", back3, *sparse)
    same_state(stay3, back3)


@pytest.mark.job
def test_lgc_example_runs_every_phase_and_resumes_exactly(tmp_path):
    # 10 steps an epoch: dense 0-2, sparse ramp 3-4, the autoencoder's training 5-7, coded from step 8; the
    # checkpoint after epoch 1 is in the lgc phase (the servers' autoencoders are part of it)
    lgc = ["--compression", "lgc", "--density", "0.01", "--innovation-density", "0.001", "--lgc-dense-steps", "3",
           "--ramp-steps", "2", "--ae-steps", "3", "--lgc-options", json.dumps({"ramp_stages": 2})]
    proc, _, whole, epochs = resume_and_compare(tmp_path, *lgc)
    for line in ("step 3: phase dense -> sparse-1", "step 5: phase sparse-2 -> train", "step 8: phase train -> lgc",
                 "autoencoder weights through rank 0's link"):
        assert line in proc.stdout
    assert [p["phase"] for p in epochs[1]["phases"]] == ["lgc"]
    assert os.path.exists(checkpoint_file(whole, ".rank0.residuals.lgc0"))


def load_example(monkeypatch):
    """The example as a module (its folder on sys.path, as when it runs as a script)."""
    import importlib.util

    monkeypatch.syspath_prepend(os.path.dirname(EXAMPLE))
    spec = importlib.util.spec_from_file_location("train_fashion_mnist", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def test_mxnet_and_gluoncv_argument_names(monkeypatch):
    args = load_example(monkeypatch).parse_args(["--num-epochs", "7", "--kv-store", "horovod", "--gc-type", "2bit",
                                      "--gc-threshold", "0.25", "--lr-step-epochs", "4,6"])
    assert (args.epochs, args.kvstore, args.compression, args.threshold, args.lr_steps) == \
        (7, "horovod", "2bit", 0.25, "4,6")


def test_learning_rate_warms_up_from_one_workers_share(monkeypatch):
    """--lr-warmup-epochs: the rate rises linearly from lr / W to lr over the epochs, then --lr-steps apply."""
    example = load_example(monkeypatch)
    args = example.parse_args(["--lr", "0.08", "--lr-warmup-epochs", "1", "--lr-steps", "2", "--epochs", "3"])
    schedule = example.learning_rate_schedule(args, 4, 100)
    assert [schedule(n) for n in (0, 50, 100, 150, 201)] == pytest.approx([0.02, 0.05, 0.08, 0.08, 0.008])
    warm_only = example.learning_rate_schedule(example.parse_args(["--lr-warmup-epochs", "0.5", "--epochs", "2"]),
                                               2, 100)
    assert [warm_only(n) for n in (0, 50, 199)] == pytest.approx([0.025, 0.05, 0.05])
    assert example.learning_rate_schedule(example.parse_args([]), 4, 100) is None


def test_a_loss_at_a_uniform_guess_or_not_finite_is_reported(monkeypatch):
    """The example warns when an epoch's loss is ln(10): a network that stopped learning (as one whose
    units died in the first coarse 4bit steps does) or is not finite (a diverged run: not a uniform guess's),
    and stays quiet otherwise."""
    example = load_example(monkeypatch)
    four_bit = example.parse_args(["--compression", "4bit"])
    assert "not learning (try a smaller threshold group" in example.not_learning(2.3026, four_bit)
    two_bit = example.parse_args(["--compression", "2bit", "--threshold", "0.5"])
    assert "try a smaller --threshold than 0.5 (the best of lab/accuracy/findings.md's sweep on this CNN: 0.005)" in \
        example.not_learning(2.3026, two_bit)
    assert example.parse_args([]).threshold == 0.005
    assert example.not_learning(2.28, four_bit) is None and example.not_learning(0.45, four_bit) is None
    assert example.not_learning(float("nan"), four_bit) == ("warning: the training loss is nan: training "
                                                               "diverged (try a smaller --lr or a longer "
                                                               "--dense-warmup-steps)")
    log = {"args": {"compression": "4bit"}, "workers": 2, "compression": {"type": "4bit"}, "schedule": "",
           "epochs": [{"epoch": 1, "test_accuracy": 0.1, "phases": [], "bytes_sent": 10, "dense_push_bytes": 80,
                       "warning": example.not_learning(2.3026, four_bit)}]}
    assert "epoch 1: warning: the training loss 2.3026 is ln(10)" in example.report(log)


def test_compressed_pull_option(monkeypatch):
    """--compressed-pull sets 'compressed_pull' of mxnet_gc's threshold codecs (False without it: the stores'
    default compresses 4bit's pulls) and is refused elsewhere."""
    example = load_example(monkeypatch)
    params = example.compression_params(example.parse_args(["--compression", "4bit", "--compressed-pull"]))
    assert params == {"type": "4bit", "thresholds": "medium", "compressed_pull": True}
    params = example.compression_params(example.parse_args(["--compression", "gc_2bit", "--compressed-pull"]))
    assert params == {"type": "gc_2bit", "threshold": 0.005, "compressed_pull": True}
    assert example.compression_params(example.parse_args(["--compression", "4bit"]))["compressed_pull"] is False
    assert "compressed_pull" not in example.compression_params(example.parse_args(["--compression", "2bit"]))
    with pytest.raises(SystemExit, match="--compressed-pull needs"):
        example.compression_params(example.parse_args(["--compression", "2bit", "--compressed-pull"]))
    params = example.compression_params(example.parse_args(["--compression", "4bit", "--compressed-pull",
                                                            "--pull-bits", "5"]))
    assert params == {"type": "4bit", "thresholds": "medium", "compressed_pull": True, "pull_bits": 5}
    with pytest.raises(SystemExit, match="--pull-bits needs"):
        example.compression_params(example.parse_args(["--compression", "4bit", "--pull-bits", "5"]))
