"""tools/netns_cluster.py: a job across network namespaces with shaped links; nothing left behind."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dist.job import HERE, ROOT, output_of
from tools import host_cpu

pytestmark = [pytest.mark.system, pytest.mark.root]  # network namespaces (ip netns, tc)

CLUSTER = ["-m", "tools.netns_cluster"]  # (run from ROOT)
NAME = os.environ.get("MXNET_GC_NETNS", "mxgc")  # the clusters' namespace prefix (as in netns_cluster.py)


def namespaces():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()


@pytest.mark.host_cpu  # (the cluster's default: hosts under time dilation)
def test_job_across_shaped_hosts(tmp_path):
    """6 MB of dense pushes through a 20 Mbit/s server link cannot take less than 2.4 s."""
    out = tmp_path / "out"
    out.mkdir()
    spec = {"keys": [["big", [250000]]], "steps": 3, "scale": 1.0, "seed": 1, "lists": True,
            "compression": {"type": "none"}, "out": str(out)}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    start = time.time()
    proc = subprocess.run([sys.executable, *CLUSTER, "--hosts", "4", "--rate", "20mbit", "--", "-n", "2", "-s", "1",
                           "--timeout", "120", sys.executable, os.path.join(HERE, "worker.py"),
                           str(tmp_path / "spec.json")], cwd=ROOT, capture_output=True, text=True, timeout=200)
    elapsed = time.time() - start
    assert proc.returncode == 0, output_of(proc)
    assert sorted(os.listdir(out)) == ["rank0.npz", "rank1.npz"]
    assert not [n for n in namespaces() if n.startswith(NAME + "-")]
    counters = {line.split()[0]: tuple(int(v) for v in line.split()[1:4])
                for line in proc.stdout.splitlines() if line.startswith("198.18.0.")}
    throttled = [float(line.split()[4]) for line in proc.stdout.splitlines() if line.startswith("198.18.0.")]
    assert sorted(counters) == ["198.18.0.1", "198.18.0.2", "198.18.0.3", "198.18.0.4"]
    assert all(len(c) == 3 and c[2] >= 0 for c in counters.values())  # (bytes sent, received, packets dropped)
    d = host_cpu.smallest_dilation(4)  # (3 on 2 cores)
    assert "dilation %g: each host 1/%g of a core, links at 20mbit / %g" % (d, d, d) in proc.stdout
    assert len(throttled) == 4 and max(throttled) > 0  # (seconds each host's quota held it back)
    server_received = counters["198.18.0.2"][1]  # the scheduler is .1, the server .2
    assert server_received >= 2 * 3 * 250000 * 4
    assert elapsed >= server_received * 8 / 20e6


@pytest.mark.host_cpu
def test_refuses_hosts_that_do_not_fit_the_cores():
    """Hosts of 1/2 core: one a core fits (a core's 90% for the hosts); one more is refused, with what
    would fit, before any namespace or cgroup is made."""
    cores = len(host_cpu.cores())
    proc = subprocess.run([sys.executable, *CLUSTER, "--hosts", str(cores + 1), "--dilation", "2", "--", "-n", "1",
                           "true"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "%d hosts of 1/2 core each do not fit %d cores" % (cores + 1, cores) in proc.stderr, output_of(proc)
    assert "at most %d fit" % cores in proc.stderr and "--dilation" in proc.stderr
    assert not [n for n in namespaces() if n.startswith(NAME + "-")] and host_cpu.leftovers(NAME + "-h") == []


def test_refuses_when_namespaces_of_an_earlier_run_exist():
    subprocess.run(["ip", "netns", "add", NAME + "-h0"], check=True)
    try:
        proc = subprocess.run([sys.executable, *CLUSTER, "--hosts", "2", "--", "-n", "1", "true"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0 and "exist from an earlier run" in proc.stderr
    finally:
        subprocess.run(["ip", "netns", "del", NAME + "-h0"])


@pytest.mark.host_cpu
def test_ctrl_c_removes_namespaces_and_processes():
    """Interrupted while its job runs, the cluster kills what runs on its hosts and deletes every namespace."""
    from mxnet_gc.launch_processes import processes_with_env

    tag = "MXGC_TEST_TAG=%d" % os.getpid()
    env = dict(os.environ, MXNET_GC_NETNS=NAME + "t")
    proc = subprocess.Popen([sys.executable, *CLUSTER, "--hosts", "3", "--rate", "100mbit", "--", "-n", "1", "-s", "1",
                             "--env", tag, sys.executable, "-c", "import time; time.sleep(600)"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and len(processes_with_env(tag)) < 3:  # scheduler, server, worker
            time.sleep(0.2)
        assert len(processes_with_env(tag)) >= 3
        assert sorted(n for n in namespaces() if n.startswith(NAME + "t-")) == \
            [NAME + "t-h0", NAME + "t-h1", NAME + "t-h2", NAME + "t-sw"]
        assert sorted(os.path.basename(p) for p in host_cpu.leftovers(NAME + "t-h")) == \
            sorted(2 * [NAME + "t-h0", NAME + "t-h1", NAME + "t-h2"])  # (each host in cpu and cpuset)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        assert proc.returncode != 0
        assert not [n for n in namespaces() if n.startswith(NAME + "t-")]
        assert host_cpu.leftovers(NAME + "t-h") == []
        deadline = time.time() + 10
        while time.time() < deadline and processes_with_env(tag):
            time.sleep(0.2)
        assert processes_with_env(tag) == []
    finally:
        proc.kill()
        for n in namespaces():
            if n.startswith(NAME + "t-"):
                subprocess.run(["ip", "netns", "del", n])
