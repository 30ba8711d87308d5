"""The accuracy study's statistics (tools/study_accuracy.py): paired differences, t intervals, verdicts,
and its runs file (an interrupted study resumes without training again)."""
import json
import math
import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from tools import study_accuracy as study, study_runs


def log(*accuracies):
    return {"epochs": [{"epoch": i + 1, "test_accuracy": a, "bytes_sent": 1e6, "bytes_received": 2e6}
                       for i, a in enumerate(accuracies)]}


def test_t_interval_matches_the_textbook_formula():
    """Mean 0.02, sample std 0.01, 3 values: half-width t(0.975, 2) * 0.01 / sqrt(3), t = 4.302653."""
    mean, low, high = study.t_interval([0.01, 0.03, 0.02])
    half = 4.302653 * 0.01 / math.sqrt(3)
    assert mean == pytest.approx(0.02)
    assert (low, high) == (pytest.approx(0.02 - half, abs=1e-6), pytest.approx(0.02 + half, abs=1e-6))
    mean, low, high = study.t_interval([0.5])
    assert mean == 0.5 and math.isnan(low) and math.isnan(high)


def test_verdicts():
    assert study.verdict(-0.001, 0.004, -0.002) == "supported"
    assert study.verdict(-0.009, -0.003, -0.002) == "refuted"
    assert study.verdict(-0.004, 0.001, -0.002) == "cannot tell"
    assert study.verdict(math.nan, math.nan, 0.0) == "cannot tell"
    assert study.difference_text(-0.0031, -0.0064, 0.0002) == "-0.31 [-0.64, +0.02] points"
    assert study.difference_text(-0.0015, math.nan, math.nan) == "-0.15 points (one seed: no interval)"


def test_differences_are_paired_by_seed_and_claims_follow_them():
    """Only seeds both configurations ran count; 4bit groups 0.1 points below uncompressed on each of 3
    seeds (no spread) is within 0.2 points; above a 2bit that is 5 points lower; compressed pulls with one
    seed cannot be judged."""
    results = {
        "uncompressed": {1: log(0.5, 0.90), 2: log(0.5, 0.91), 3: log(0.5, 0.92), 4: log(0.5, 0.93)},
        "MXNet 2bit": {1: log(0.5, 0.85), 2: log(0.5, 0.86), 3: log(0.5, 0.87)},
        "4bit, per-layer groups": {1: log(0.5, 0.899), 2: log(0.5, 0.909), 3: log(0.5, 0.919)},
        "4bit, per-layer groups, compressed pull": {2: log(0.5, 0.90)},
    }
    assert study.paired(results["MXNet 2bit"], results["uncompressed"]) == pytest.approx([-0.05] * 3)
    said = {text.split(" (")[0]: (mean, says) for text, mean, _, _, says in study.claims(results)}
    assert said["4bit with per-layer groups within 0.2 points of uncompressed"] == (pytest.approx(-0.001),
                                                                                    "supported")
    assert said["4bit with per-layer groups above the tuned MXNet 2bit"] == (pytest.approx(0.049), "supported")
    assert said["compressed pulls cost at most 0.2 points"] == (pytest.approx(-0.009), "cannot tell")
    assert "per-layer groups above one group" not in said  # no one-group runs: no claim
    table = study.table(results).splitlines()
    assert len(table) == 2 + len(results)
    row = next(r for r in table if r.startswith("| MXNet 2bit |"))
    assert "| 1,2,3 | 0.8600 | 0.0100 | 0.8500 | 0.8700 | -5.00 [-5.00, -5.00] points | 1.0 / 2.0 |" in row


def test_runs_are_fresh_unless_reused_from_the_same_code(tmp_path, monkeypatch):
    """A study trains what it reports: a second study with the same file trains again; with --reuse of it,
    the runs of the same code (its hash) are reused and labelled stored with their commit and date; runs of
    other code, or of a file that does not say, run again; --report reads a file as it is, all stored."""
    from tools import provenance

    trained = []
    monkeypatch.setattr(study, "train", lambda argv, workers, pull_stats=0:
                        trained.append((argv, workers)) or log(0.3, 0.7))
    settings = {"model": "cnn", "epochs": 2, "lr_steps": "1", "seeds": [7], "workers": 2, "lr_warmup_epochs": 0,
                "pull_stats": 0}
    args = type("Args", (), settings)()
    path, again = str(tmp_path / "runs.json"), str(tmp_path / "again.json")
    runs = study.Runs(path, args)
    assert runs.get(["--compression", "none"], 7) == log(0.3, 0.7) and runs.label(["--compression", "none"], 7) == ""
    stored = study_runs.read(path)
    assert len(stored) == 1 and stored[0]["provenance"]["code"] == provenance.code_hash()
    assert stored[0]["key"] == {"argv": runs.argv(["--compression", "none"], 7), "workers": 2}
    study.Runs(path, args).get(["--compression", "none"], 7)  # fresh by default: trained again
    assert len(trained) == 2
    reused = study.Runs(again, args, reuse=[path])
    assert reused.get(["--compression", "none"], 7) == log(0.3, 0.7) and len(trained) == 2
    assert reused.label(["--compression", "none"], 7) == " (stored: commit %s, %s)" % (
        stored[0]["provenance"]["commit"], stored[0]["provenance"]["date"])
    reused.get(["--compression", "none"], 8)  # another seed: trained, by this invocation
    assert len(trained) == 3 and reused.label(["--compression", "none"], 8) == ""
    assert len(study_runs.read(again)) == 2  # the new file: the reused run and the new one, each with its own provenance
    four = type("Args", (), {**settings, "workers": 4, "lr_warmup_epochs": 1})()
    study.Runs(None, four, reuse=[path]).get(["--compression", "none"], 7)  # other workers, a warm-up: another run
    assert [(a[a.index("--seed") + 1], w) for a, w in trained] == [("7", 2), ("7", 2), ("8", 2), ("7", 4)]
    assert trained[-1][0][trained[-1][0].index("--lr-warmup-epochs") + 1] == "1"
    # runs of other code, and runs written before provenance: not reused, trained again
    other = tmp_path / "other.jsonl"
    study_runs.write(str(other), [dict(stored[0], provenance=dict(stored[0]["provenance"], code="0" * 16)),
                                  {"key": {"argv": runs.argv(["--compression", "4bit"], 7), "workers": 2},
                                   "log": log(0.1, 0.2), "provenance": {}}])
    fresh = study.Runs(None, args, reuse=[str(other)])
    fresh.get(["--compression", "none"], 7)
    fresh.get(["--compression", "4bit"], 7)
    assert len(trained) == 6
    report = study.Runs(None, args, reuse=[str(other)], any_code=True)  # --report: as it is, labelled stored
    assert report.get(["--compression", "4bit"], 7, train_missing=False) == log(0.1, 0.2)
    assert report.label(["--compression", "4bit"], 7) == " (stored: commit unknown, date unknown)"
    assert report.get(["--compression", "2bit"], 7, train_missing=False) is None and len(trained) == 6


def test_one_group_levels_are_geometric():
    argv = study.one_group(2.0 ** -6)
    levels = [float(t) for t in argv[argv.index("--thresholds") + 1].split(",")]
    assert np.allclose(levels, [2.0 ** (k - 6) for k in range(7)])
