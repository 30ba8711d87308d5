"""tools/fault_matrix.py's short form: each case a real job (keys initialized in different orders, workers
that disagree, a key one worker never pushes, a worker that leaves, an inf in every phase of 'lgc', a
compression changed after pushes, checkpoints resumed on another number of servers, a missing command,
pickles planted in checkpoints, processes outside the job, double pushes and skipped steps)
must end in an exact result or a clear error on every worker within 60 s (the tool checks each with
numpy and the workers' output).  Recoverable cases that share a job (key orders, then a compression
switch, on one store) run in one call of the tool."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = ["-m", "tools.fault_matrix"]  # (run from ROOT)
CASES = subprocess.run([sys.executable, *TOOL, "--short", "--list"], cwd=ROOT, capture_output=True, text=True,
                       check=True).stdout.split()
SHARED = [("key-order-ps", "compression-switch-ps"), ("key-order-horovod", "compression-switch-horovod")]
GROUPS = SHARED + [(c,) for c in CASES if not any(c in g for g in SHARED)]
# cases the short form leaves to tests that check every value against a numpy reference
ELSEWHERE = {"inf-lgc-ps": "test_dist_lgc.py", "inf-lgc-horovod": "test_horovod_lgc.py"}


def test_the_short_form_covers_every_case_of_the_issue():
    assert {"key-order-ps", "key-order-horovod", "init-calls-ps", "init-calls-horovod", "shapes-horovod",
            "shapes-horovod-same-size", "missing-key-horovod-4bit", "missing-key-horovod-none", "worker-leaves",
            "worker-ends", "compression-switch-ps", "compression-switch-horovod",
            "checkpoint-servers", "checkpoint-servers-lgc", "missing-command", "pickle-in-checkpoint",
            "pickle-in-checkpoint-lgc", "stranger-worker", "stranger-server", "missing-key-once-ps", "double-push-ps",
            "double-push-horovod", "skipped-step-ps", "skipped-step-horovod", "compression-one-worker-ps"} <= set(CASES)
    assert sorted(c for g in GROUPS for c in g) == sorted(CASES)
    here = os.path.dirname(os.path.abspath(__file__))
    for case, test_file in ELSEWHERE.items():
        with open(os.path.join(here, test_file)) as f:
            assert "def test_an_inf_in_any_phase_is_dropped_and_poisons_nothing" in f.read(), case


@pytest.mark.system  # the fault matrix harness: real jobs per case (a group shares one)
@pytest.mark.parametrize("cases", GROUPS, ids="+".join)
def test_case_ends_exactly_or_with_a_clear_error(cases, tmp_path):
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, *TOOL, "--short", "--case", *cases, "--json", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    made = json.loads(out.read_text())
    rows = made["rows"]
    assert made["provenance"]["command"].startswith("python -m tools.fault_matrix --short --case")
    assert sorted(r["case"] for r in rows) == sorted(cases)
    for row in rows:
        assert row["verdict"] == "ok" and proc.returncode == 0, row["seen"] + proc.stdout[-2000:] + proc.stderr[-2000:]
    assert sum(r["seconds"] for r in rows) < 90
