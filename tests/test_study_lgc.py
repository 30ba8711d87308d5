"""The LGC study's runs (tools/study_lgc.py): fresh by default, written as each ends in the one layout of
every study (tools/study_runs.py: key, config, log, provenance); with --reuse, the runs of the same code are
reused and printed as stored, runs of other code run again, and the file keeps the stored runs of the same
code that this invocation did not ask for."""
import pandas
import pytest

from tools import study_lgc, study_runs

pytestmark = pytest.mark.unit


def log(seed, accuracy):
    return {"args": {"seed": seed}, "workers": 2,
            "epochs": [{"epoch": 1, "test_accuracy": accuracy, "bytes_sent": 1000, "phases": []}]}


@pytest.fixture
def trained(monkeypatch):
    calls = []

    def train(argv, workers):
        calls.append(argv)
        return log(int(argv[argv.index("--seed") + 1]), 0.5 + 0.01 * len(calls))
    monkeypatch.setattr(study_lgc, "train", train)
    monkeypatch.setattr(study_lgc, "plot", lambda *args: None)
    return calls


def study(tmp_path, *more):
    study_lgc.main(["--results", str(tmp_path), "--seeds", "1", "2", "--configs", "uncompressed"] + list(more))
    return study_runs.read(str(tmp_path / "lgc_study_w2.jsonl"))


def test_a_study_runs_fresh_and_reuses_only_the_same_codes_runs(tmp_path, trained, capsys):
    first = study(tmp_path)
    assert len(trained) == 2 and [r["config"] for r in first] == ["uncompressed"] * 2
    assert all(set(r) == {"key", "config", "log", "provenance"} and r["provenance"]["code"] for r in first)
    frame = pandas.read_json(tmp_path / "lgc_study_w2.jsonl", lines=True)  # (the one row format, as it is)
    assert list(frame.columns) == list(study_runs.ROW + study_runs.PROVENANCE) + ["key", "log"]
    assert list(frame["seed"]) == [1, 2] and list(frame["config"]) == ["uncompressed"] * 2
    assert "stored" not in capsys.readouterr().out
    study(tmp_path)  # fresh by default: both trained again
    assert len(trained) == 4
    again = study(tmp_path, "--reuse")  # the same code: nothing trained, both printed as stored
    assert len(trained) == 4 and len(again) == 2
    assert capsys.readouterr().out.count("(stored: commit ") == 2
    # a stored run of other code is not reused; another configuration's run of the same code is kept
    path = tmp_path / "lgc_study_w2.jsonl"
    runs = study_runs.read(str(path))
    runs[0]["provenance"]["code"] = "0" * 16
    runs.append(dict(runs[1], key={"argv": ["another"], "workers": 2}, config="top-k (error feedback)"))
    study_runs.write(str(path), runs)
    kept = study(tmp_path, "--reuse")
    assert len(trained) == 5  # seed 1 again (its stored run ran other code), seed 2 reused
    assert sorted(study_runs.by_config(study_runs.read(str(path)))) == ["top-k (error feedback)", "uncompressed"]
    assert [r["provenance"]["code"] for r in kept].count("0" * 16) == 0
