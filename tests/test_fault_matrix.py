"""tools/fault_matrix.py's short form: each case a real job (keys initialized in different orders, workers
that disagree, a key one worker never pushes, a worker that leaves, an inf in every phase of 'lgc', a
compression changed after pushes, checkpoints resumed on another number of servers, a missing command)
must end in an exact result or a clear error on every worker within 60 s (the tool checks each with
numpy and the workers' output)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "fault_matrix.py")
CASES = subprocess.run([sys.executable, TOOL, "--short", "--list"], capture_output=True, text=True,
                       check=True).stdout.split()


def test_the_short_form_covers_every_case_of_the_issue():
    assert {"key-order-ps", "key-order-horovod", "init-calls-ps", "init-calls-horovod", "shapes-horovod",
            "shapes-horovod-same-size", "missing-key-horovod-4bit", "missing-key-horovod-none", "worker-leaves",
            "worker-ends",
            "inf-lgc-ps", "inf-lgc-horovod", "compression-switch-ps", "compression-switch-horovod",
            "checkpoint-servers", "checkpoint-servers-lgc", "missing-command"} <= set(CASES)


@pytest.mark.system  # the fault matrix harness: real jobs per case
@pytest.mark.parametrize("case", CASES)
def test_case_ends_exactly_or_with_a_clear_error(case, tmp_path):
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, TOOL, "--short", "--case", case, "--json", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    rows = json.loads(out.read_text())
    assert [r["case"] for r in rows] == [case]
    assert rows[0]["verdict"] == "ok" and proc.returncode == 0, rows[0]["seen"] + proc.stdout[-2000:] + proc.stderr[-2000:]
    assert rows[0]["seconds"] < 90
