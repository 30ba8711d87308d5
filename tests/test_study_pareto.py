"""The accuracy-against-bytes study's reading of saved runs (tools/study_pareto.py): bytes per step of the last
epoch, the Pareto front, the table's paired differences and diverged seeds."""
from tools import study_pareto as pareto


def log(seed, accuracy, sent, steps=(100, 199)):
    return {"args": {"seed": seed}, "epochs": [{"test_accuracy": 0.5, "bytes_sent": 1, "phases": []},
                                               {"test_accuracy": accuracy, "bytes_sent": sent,
                                                "phases": [{"steps": [steps[0], 150]}, {"steps": [151, steps[1]]}]}]}


RESULTS = {
    "uncompressed": [log(1, 0.90, 100e6), log(2, 0.88, 100e6)],
    "4bit, per-layer groups": [log(1, 0.89, 12e6), log(2, 0.87, 14e6)],
    "top-k 1e-3, DGC momentum": [log(1, 0.85, 1e5), log(2, 0.1, 1e5)],  # one diverged
    "LGC-PS": [log(1, 0.40, 2e5), log(2, 0.45, 2e5)],  # more bytes than top-k and less accurate (on the mean)
    "not a method of the study": [log(1, 0.99, 1)],
}


def test_points_are_accuracy_and_bytes_per_step_of_the_last_epoch():
    pts = pareto.points(RESULTS)
    assert list(pts) == ["uncompressed", "4bit, per-layer groups", "top-k 1e-3, DGC momentum", "LGC-PS"]
    assert pts["4bit, per-layer groups"][2] == (0.87, 14e6 / 100)  # 100 steps in the last epoch's phases


def test_the_front_is_what_no_cheaper_method_beats():
    summary = {m: (sum(a for a, _ in s.values()) / 2, sum(b for _, b in s.values()) / 2)
               for m, s in pareto.points(RESULTS).items()}
    assert pareto.front(summary) == {"uncompressed", "4bit, per-layer groups", "top-k 1e-3, DGC momentum"}
    assert pareto.front({"a": (0.9, 10), "b": (0.9, 10)}) == {"a", "b"}  # ties beat nobody


def test_the_table_pairs_seeds_and_names_diverged_ones():
    rows = {line.split(" | ")[0].strip("| "): line for line in pareto.table("panel", pareto.points(RESULTS))
            .splitlines()[2:]}
    assert "| -1.00 |" in rows["4bit, per-layer groups"]  # seed by seed 0.89 - 0.90 and 0.87 - 0.88
    assert "| 130,000 | 8 |" in rows["4bit, per-layer groups"]  # 13 MB over 100 steps; 1 MB / 0.13 MB: 7.7x
    assert rows["top-k 1e-3, DGC momentum"].endswith("| yes (1 of its seeds diverged) |")
    assert rows["LGC-PS"].endswith("|  |")
