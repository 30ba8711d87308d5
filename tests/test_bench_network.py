"""tools/bench_network.py: one small run of the network benchmark; its measurements and its outputs."""
import csv
import json
import os
import subprocess
import sys

import pytest

from dist.job import ROOT, output_of
from tools import host_cpu

BURST_BYTES = 256e3 / 8  # tools/netns_cluster.py shapes each link with tbf, burst 256 kbit


def check_wire_bounds(r, rate_bits=100e6):
    """Step times that respect the link rate: each of rank 0's steps needs its own received bytes;
    the timed steps together need the busiest link's bytes, bar one step's that the other workers
    may send before rank 0's window opens or after it closes."""
    burst_ms = 1e3 * 8 * BURST_BYTES / rate_bits
    own_ms = 1e3 * 8 * float(r["worker0_received_mb_per_step"]) * 1e6 / rate_bits
    assert float(r["step_ms_min"]) >= own_ms - burst_ms and own_ms > 0
    steps = int(r["timed_steps"])
    assert float(r["timed_window_ms"]) >= (steps - 1) * float(r["wire_bound_ms"]) - burst_ms
    assert float(r["wire_bound_ms"]) > 0


def check_emulated_row(r, dilation, asked, hosts):
    """A row of emulated hosts: each host 2 ms of CPU per 2 D ms, links at the rate / D, its measurements
    consistent with each other."""
    assert (float(r["dilation"]), r["emulated"], r["dilation_asked"]) == (dilation, "True", asked)
    assert float(r["cpu_quota_us"]) == 2000 and float(r["cpu_period_us"]) == 2000 * dilation
    assert float(r["rate_nominal_bits"]) == 100e6 and float(r["rate_applied_bits"]) == 100e6 / dilation
    throttled = [float(t) for t in r["throttled_s_per_host"].split()]
    assert len(throttled) == hosts and max(throttled) > 0
    assert r["tcp_congestion"] == "cubic"
    check_wire_bounds(r)
    assert float(r["step_ms_min"]) <= float(r["step_ms"]) <= float(r["step_ms_max"])
    assert float(r["worker_cpu_ms_per_step"]) > 0
    # the machine was busy at least with a worker's own CPU time (ticks are 10 ms: half of it, safely)
    busy = float(r["machine_cpu_busy"])
    assert 0 < busy <= 1
    machine_ms = busy * os.cpu_count() * float(r["timed_window_ms"]) * float(r["dilation"])  # (wall time)
    assert machine_ms >= 0.5 * float(r["worker_cpu_ms_per_step"]) * int(r["timed_steps"])


def check_server_row(r, bytes_per_value):
    """A parameter-server row (1 server, 2 workers): the server found, and both workers' pushes on its link."""
    assert int(r["servers"]) == 1 and float(r["cpu_s_server"]) > 0
    assert float(r["server_cpu_ms_per_step"]) >= 0  # (found the server; 10 ms ticks over short steps)
    assert float(r["server_in_mb_per_step"]) * 1e6 >= 2 * bytes_per_value * int(r["parameters"])


@pytest.mark.system  # the benchmark on network namespaces with shaped links
@pytest.mark.root
@pytest.mark.host_cpu
def test_small_benchmark_run(tmp_path):
    """Training steps of the Fashion-MNIST CNN at 100 Mbit/s, 2 workers, in one run of the harness: on the
    parameter server (1 server) merged+pipelined top-k; horovodrun across the same namespaced hosts, the
    dense allreduce (Horovod's sparse path is tests/test_horovod.py's; the dense parameter server's row is
    test_a_row_agrees_at_two_dilations's)."""
    doc = tmp_path / "doc.md"
    doc.write_text("# before\n<!-- bench_network:begin -->\nold\n<!-- bench_network:end -->\nafter\n")
    proc = subprocess.run([sys.executable, "-m", "tools.bench_network", "--models", "fmnist-cnn",
                           "--modes", "topk-pipelined", "hvd-gc-none",
                           "--rates", "100mbit", "--workers", "2", "--servers", "1",
                           "--steps", "3", "--warmup", "1", "--csv", str(tmp_path / "r.csv"), "--plot", str(tmp_path / "r.png"),
                           "--scaling-plot", str(tmp_path / "s.png"),
                           "--markdown", str(doc)], cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, output_of(proc)
    assert "left behind: 0 processes, namespaces none" in proc.stdout
    assert not os.path.exists("/etc/netns/%s-h0" % os.environ.get("MXNET_GC_NETNS", "mxgc"))
    rows = {r["mode"]: r for r in csv.DictReader(open(tmp_path / "r.csv"))}
    assert sorted(rows) == ["hvd-gc-none", "topk-pipelined"]
    for r in rows.values():  # emulated hosts ('auto'): 4 hosts (2 workers, a server, a scheduler) on 2 cores,
        # 2 a core, at 1/3 core each; Horovod's 2 hosts, one a core, at 1/2 each; links at rate / D
        hosts = 2 if r["mode"].startswith("hvd-") else 4
        check_emulated_row(r, float(host_cpu.smallest_dilation(hosts)), "auto", hosts)  # (2 cores: 2, 3)
        assert int(r["timed_steps"]) == 3
    r = rows["topk-pipelined"]
    check_server_row(r, 0.01 * 8)  # top-k: 1%, index + value
    # sparse pulls too: both directions of the server's link well below dense float32 (2 workers' each way)
    for direction in ("server_in_mb_per_step", "server_out_mb_per_step"):
        assert float(r[direction]) * 1e6 < 2 * 4 * int(r["parameters"]) / 10
    assert float(r["codec_ms"]) > 0
    # Horovod: no servers; a ring allreduce moves about the whole model through each worker's link, each way
    dense = rows["hvd-gc-none"]
    assert dense["cpu_s_server"] == "" == dense["server_cpu_ms_per_step"]
    assert float(dense["server_in_mb_per_step"]) * 1e6 >= 4 * int(dense["parameters"]) * 0.9
    text = doc.read_text()
    assert text.startswith("# before\n<!-- bench_network:begin -->\nCommand: `python -m tools.bench_network --models")
    assert text.endswith("<!-- bench_network:end -->\nafter\n") and "old" not in text
    # no target ratio is defined for this model at 100 Mbit/s (tools/netbench/report.py): no empty table
    assert "| fmnist-cnn | 2 | 1 | 100mbit | 3 | topk-pipelined |" in text and "Targets" not in text  # (D = 3)
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG" == (tmp_path / "s.png").read_bytes()[:4]


@pytest.mark.system  # the benchmark on emulated hosts, twice
@pytest.mark.root
@pytest.mark.host_cpu
def test_a_row_agrees_at_two_dilations(tmp_path):
    """The emulation's validation in small: MXNet's dist_sync step of the CNN at 100 Mbit/s (2 workers, a
    server) at D = 3 and D = 6 (links at 33 and 17 Mbit/s, hosts of 1/3 and 1/6 core) agrees within 20%
    once divided by D (a time not divided by D, or a host without its quota, is 1.5 to 2 times off), and
    the page gives the ratio and its verdict against 10%; each row's measurements as
    test_small_benchmark_run's.  (The 10% target, and the CPU-bound rows' agreement, are the benchmark's
    `make bench-emulation-check`, run alone: beside the other pytest process, which takes the cores' time,
    one run in several misses 10%.)"""
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- bench_network:begin -->\n<!-- bench_network:end -->\n")
    proc = subprocess.run([sys.executable, "-m", "tools.bench_network", "--models", "fmnist-cnn", "--modes", "none",
                           "--rates", "100mbit", "--workers", "2", "--steps", "6", "--dilation", "3", "6",
                           "--csv", str(tmp_path / "r.csv"), "--markdown", str(doc)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, output_of(proc)
    rows = sorted(csv.DictReader(open(tmp_path / "r.csv")), key=lambda r: float(r["dilation"]))
    assert [float(r["dilation"]) for r in rows] == [3.0, 6.0]
    assert [float(r["rate_applied_bits"]) for r in rows] == [100e6 / 3, 100e6 / 6]
    for r in rows:  # (times in the emulated cluster's: the nominal 100 Mbit/s)
        check_emulated_row(r, float(r["dilation"]), r["dilation_asked"], 4)
        check_server_row(r, 4.0)  # uncompressed: 32 bits per parameter from each worker
        assert r["codec_ms"] == "" and int(r["timed_steps"]) == 6
    slower, faster = max(float(r["step_ms"]) for r in rows), min(float(r["step_ms"]) for r in rows)
    assert slower / faster <= 1.20, [r["step_ms"] for r in rows]
    line = next(line for line in doc.read_text().splitlines() if line.startswith("| fmnist-cnn | 2 | 1 | 100mbit | none | 3 / 6 |"))
    assert "| %.2f |" % (slower / faster) in line
    assert ("| yes (step) |" in line) == (slower / faster <= 1.10), line


def test_agreement_table_compares_dilations_and_runs():
    """Rows of one job at two dilations: their step ratio against 10% (a CPU-bound row's step per worker
    CPU millisecond); its runs against their median (5%)."""
    from tools.netbench import report

    def row(dilation, ms, cpu=10.0, runs=(20.0, 22.0, 21.0)):
        return {"model": "fmnist-cnn", "workers": 2, "servers": 1, "rate": "100mbit", "mode": "lgc",
                "dilation": dilation, "emulated": True, "step_ms": ms, "worker_cpu_ms_per_step": cpu,
                "run_step_ms": list(runs)}

    pooled = [row(3.0, 21.0), row(6.0, 23.0, runs=(21.0, 23.0, 25.0))]
    text = report.agreement(pooled)
    assert "| fmnist-cnn | 2 | 1 | 100mbit | lgc | 3 / 6 | 21.0 / 23.0 | 10.0 / 10.0 | 1.10 | 1.10 | yes (step) | " \
           "20.0 22.0 21.0 | 4.8% | yes |" in text
    assert "| 20.0 22.0 30.0 | 36.4% | **no** |" in report.agreement([row(3.0, 21.0, runs=(20.0, 22.0, 30.0)), pooled[1]])
    assert "| 1.43 | 1.43 | **no** (step) |" in report.agreement([row(3.0, 21.0), row(6.0, 30.0)])
    # CPU-bound (CPU time >= 80% of the step at both D): 20 ms of CPU in 21 ms, 28 in 30: the steps differ by
    # 43%, their CPU time with them; the step per CPU ms (1.05 and 1.07) by 2%
    text = report.agreement([row(3.0, 21.0, cpu=20.0), row(6.0, 30.0, cpu=28.0)])
    assert "| 1.43 | 1.02 | yes (CPU-bound: step per CPU ms) |" in text


def test_repeated_runs_are_pooled():
    """--repeats: a job's runs become one row, with step statistics over all their timed steps and the
    median of each other measurement."""
    from tools.netbench import jobs

    runs = [{"mode": "topk-one", "workers": 2, "step_ms": 10.0, "step_ms_min": 9.0, "step_ms_max": 11.0,
             "timed_steps": 3, "runs": 1, "steps_ms": steps, "comm_ms": comm, "cpu_s_server": None}
            for steps, comm in (([9.0, 10.0, 11.0], 4.0), ([30.0, 1.0, 2.0], 6.0), ([5.0, 6.0, 40.0], 50.0))]
    row = jobs.pool(runs)
    every = [9.0, 10.0, 11.0, 30.0, 1.0, 2.0, 5.0, 6.0, 40.0]
    assert (row["step_ms"], row["step_ms_min"], row["step_ms_max"]) == (9.0, 1.0, 40.0)
    assert row["timed_steps"] == 9 and row["runs"] == 3 and sorted(row["steps_ms"]) == sorted(every)
    assert row["run_step_ms"] == [10.0, 2.0, 6.0]  # (each run's median step)
    assert row["comm_ms"] == 6.0 and row["cpu_s_server"] is None
    assert (row["mode"], row["workers"]) == ("topk-one", 2)


def test_summary_has_a_targets_table_only_when_a_target_applies():
    """A run whose rows define a target ratio gets its table (pooled ratio, each run's, met or not); a run
    without one gets none (no empty table).  Ratios compare rows of the first number of servers."""
    from tools import bench_network

    def row(mode, runs, servers=1):
        ms = sorted(runs)[len(runs) // 2]
        return {"model": "fmnist-cnn", "workers": 2, "servers": servers, "rate": "1gbit", "mode": mode, "step_ms": ms,
                "step_ms_min": ms, "step_ms_max": ms, "steps_ms": list(runs), "run_step_ms": list(runs), "runs": len(runs),
                "compute_ms": 1.0, "comm_ms": 1.0, "server_in_mb_per_step": 0.5, "server_out_mb_per_step": 0.5,
                "wire_bound_ms": 1.0, "codec_ms": None, "worker_cpu_ms_per_step": 1.0, "cpu_s_server": 1.0,
                "machine_cpu_busy": 0.5, "machine_cpu_kernel": None, "dilation_asked": "auto", "dilation": 3.0,
                "emulated": True}

    rows = [row("mxnet-2bit", [10.0, 10.0]), row("gc_2bit", [8.0, 12.0]), row("gc_2bit", [100.0, 100.0], servers=2)]
    rows[1]["step_ms"] = 10.0  # (the median of all the runs' steps)
    text = "\n".join(bench_network.summary(rows, "Command: `x`"))
    assert "Targets, each a ratio of two rows above" in text
    # pooled: 10 against 10; each run: 0.80, then 1.20
    assert "| fmnist-cnn, 2 workers, 1gbit: our 2bit / MXNet's 2bit step time | 1.00 | 0.80 1.20 | <= 1 | yes |" in text
    rows = [row("none", [10.0, 10.0]), row("gc-none", [11.0, 10.2])]
    rows[1]["step_ms"] = 10.6
    text = "\n".join(bench_network.summary(rows, "Command: `x`"))
    assert ("| fmnist-cnn, 2 workers, 1gbit: mxnet_gc's uncompressed / MXNet's dist_sync step time | 1.06 | 1.10 1.02 "
            "| <= 1.05 | **no** |") in text
    assert "Targets" not in "\n".join(bench_network.summary([row("gc-none", [10.0, 11.0])], "Command: `x`"))


def test_pages_are_made_again_from_the_csv(tmp_path):
    """--from-csv: the rows read back with their types (each run's step from its own column); one value per
    cell, so that pandas loads the file as it is."""
    import pandas

    from tools import bench_network

    made = {"commit": "1234567", "date": "2026-12-06 04:48 UTC", "machine": "2 cores",
            "command": "python -m tools.bench_network"}
    rows = [{"model": "fmnist-cnn", "workers": 2, "servers": 1, "rate": "100mbit", "mode": "none", "step_ms": 10.0,
             "steps_ms": [9.0, 10.0, 11.0, 12.0], "run_step_ms": [9.5, 11.5], "runs": 2, "dilation_asked": "3.0",
             "dilation": 3.0, "emulated": True, "codec_ms": None}]
    path = str(tmp_path / "r.csv")
    bench_network.write_rows(path, rows, made)
    back = {k: v for k, v in rows[0].items() if k != "steps_ms"}  # (every timed step is not kept)
    assert bench_network.read_rows(path) == [dict(back, **made)]
    frame = pandas.read_csv(path)
    assert list(frame["run1_step_ms"]) == [9.5] and list(frame["run2_step_ms"]) == [11.5]
    assert all(frame[c].dtype != object for c in ("step_ms", "runs", "dilation", "run1_step_ms"))
    (tmp_path / "old.csv").write_text("model,step_ms\nfmnist-cnn,1.0\n")
    with pytest.raises(SystemExit, match="predates --from-csv"):
        bench_network.read_rows(str(tmp_path / "old.csv"))


@pytest.mark.system  # a job of the benchmark on emulated hosts, one step recorded
@pytest.mark.root
@pytest.mark.host_cpu
def test_the_step_profile_records_a_job_step_by_lane(tmp_path):
    """tools/profile_pipeline.py on one parameter-server job (the CNN, 4bit both ways): the recorded step's
    spans in their lanes, in order (a push after backward's first operations, a pull after the first
    push, all within the step), rank 0's threads' CPU per step, and the page and picture made from the CSV."""
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- profile_pipeline:t:begin -->\nold\n<!-- profile_pipeline:t:end -->\n")
    out = tmp_path / "p.csv"
    proc = subprocess.run([sys.executable, "-m", "tools.profile_pipeline", "--model", "fmnist-cnn", "--rate", "100mbit",
                           "--modes", "4bit-cpull", "--steps", "2", "--warmup", "1", "--csv", str(out),
                           "--plot", str(tmp_path / "p.png"), "--markdown", str(doc), "--section", "t"],
                          cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, output_of(proc)
    rows = list(csv.DictReader(open(out)))
    step = [r for r in rows if r["kind"] == "step"]
    spans = [r for r in rows if r["kind"] == "span"]
    assert [r["mode"] for r in step] == ["4bit-cpull"] and float(step[0]["dilation"]) == 3.0
    threads = json.loads(step[0]["threads"])
    assert [name for _, name in threads].count("main") == 1 and all(ms > 0 for ms, _ in threads)
    first = {}
    for r in spans:
        assert 0 <= float(r["start_ms"]) <= float(r["end_ms"]) <= float(step[0]["step_ms"]) + 1e-3
        first.setdefault(r["lane"], float(r["start_ms"]))
    assert {"compute", "encode", "push", "barrier", "pull", "decode", "update", "wait"} <= set(first)
    assert first["compute"] < first["encode"] <= first["push"] < first["pull"]
    assert all(r["commit"] and r["command"].startswith("python -m tools.profile_pipeline") for r in rows)
    text = doc.read_text()
    assert "old" not in text and "| 4bit-cpull | 2 | 3 | " in text, text
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
