"""tools/bench_collectives.py: Horovod's collectives alone on two emulated hosts, against their wire time."""
import csv
import subprocess
import sys

import pytest

from dist.job import ROOT, output_of
from tools import bench_collectives


def test_wire_bytes_of_each_collective():
    """A worker's link carries (W - 1) n for an allgather, (W - 1) / W n for an alltoall, twice that for a
    ring allreduce, n between pairs (one way or both; with W even only)."""
    assert bench_collectives.wire_bytes("allgather", 4, 100) == 300
    assert bench_collectives.wire_bytes("alltoall", 4, 100) == 75
    assert bench_collectives.wire_bytes("allreduce", 4, 100) == 150
    assert [bench_collectives.wire_bytes(c, 4, 100) for c in ("pairs one way", "pairs both ways")] == [100, 100]
    assert "pairs both ways" in bench_collectives.collectives(4)
    assert "pairs one way" not in bench_collectives.collectives(3)


def test_pairs_send_to_the_other_worker_of_their_pair():
    """Both ways every worker sends its n bytes to rank ^ 1; one way the even workers do, the odd ones keep them."""
    assert [bench_collectives.pair_splits(r, 4, 9, True) for r in range(4)] == [[0, 9, 0, 0], [9, 0, 0, 0],
                                                                               [0, 0, 0, 9], [0, 0, 9, 0]]
    assert [bench_collectives.pair_splits(r, 4, 9, False) for r in range(4)] == [[0, 9, 0, 0], [0, 9, 0, 0],
                                                                                [0, 0, 0, 9], [0, 0, 0, 9]]


@pytest.mark.system  # horovodrun across network namespaces with shaped links and CPU shares
@pytest.mark.root
@pytest.mark.host_cpu
def test_collectives_on_two_hosts_take_at_least_their_wire_time(tmp_path):
    """Each collective of 0.5 MB a worker at 100 Mbit/s takes at least its wire time (less the link's burst);
    every row names its commit and command, and the table comes back the same from the CSV."""
    path = tmp_path / "collectives.csv"
    proc = subprocess.run([sys.executable, "-m", "tools.bench_collectives", "--workers", "2", "--megabytes", "0.5",
                           "--repeats", "2", "--csv", str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, output_of(proc)
    assert "left behind: 0 processes, namespaces none" in proc.stdout
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["collective"] for r in rows] == list(bench_collectives.COLLECTIVES)
    burst_ms = 1e3 * 256e3 / 100e6  # (tools/netns_cluster.py's tbf burst, 256 kbit)
    for r in rows:
        wire_ms = 1e3 * 8 * bench_collectives.wire_bytes(r["collective"], 2, 0.5e6) / 100e6
        assert float(r["wire_ms"]) == pytest.approx(wire_ms)
        assert float(r["ms_min"]) >= wire_ms - burst_ms, r
        assert len(r["repeats_ms"].split()) == 2 and r["tcp_congestion"] == "cubic"
        assert r["commit"] and "tools.bench_collectives" in r["command"]
    again = subprocess.run([sys.executable, "-m", "tools.bench_collectives", "--from-csv", str(path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, output_of(again)
    table = lambda text: text[text.index("| collective"):].strip()  # noqa: E731
    assert table(again.stdout) == table(proc.stdout)
