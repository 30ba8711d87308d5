"""tools/host_cpu.py: emulated hosts with a CPU share of their own (time dilation), and the refusals."""
import json
import os
import re
import subprocess
import sys

import pytest

from dist.job import ROOT, output_of
from tools import host_cpu


def test_smallest_dilation_fits_every_core_within_its_usable_part():
    # 4 hosts on 2 cores: 2 a core, 1/3 core each (2/3 <= 0.9); 1/2 each would leave no headroom
    assert host_cpu.smallest_dilation(4, ncores=2) == 3
    assert host_cpu.fits(4, 3, ncores=2) is None
    assert host_cpu.smallest_dilation(1, ncores=2) == 2  # (a whole core leaves the kernel nothing)
    assert host_cpu.smallest_dilation(25, ncores=2) == 15
    for hosts in range(1, 40):
        d = host_cpu.smallest_dilation(hosts, ncores=2)
        assert host_cpu.fits(hosts, d, ncores=2) is None and host_cpu.fits(hosts, d - 1, ncores=2) is not None


def test_a_request_that_does_not_fit_says_how_many_hosts_would():
    message = host_cpu.fits(5, 2, ncores=2)
    assert "5 hosts of 1/2 core each do not fit 2 cores" in message
    assert "at most 2 fit" in message and "--dilation 4 or more" in message


def test_the_quota_is_the_same_at_every_dilation():
    """The same slices of CPU in emulated time at every D: the period grows with D, the quota does not."""
    assert host_cpu.period_us(3) == 3 * host_cpu.QUOTA_US
    assert host_cpu.period_us(15) == 15 * host_cpu.QUOTA_US
    assert host_cpu.QUOTA_US >= 1000  # (CFS refuses less)


def test_dilation_values():
    from tools import netns_cluster

    assert netns_cluster.dilation_value("auto") == "auto" and netns_cluster.dilation_value("4") == 4.0
    for bad in ("0.5", "x", "-2"):
        with pytest.raises(Exception, match="a dilation is 'auto', 'none' or a number >= 1"):
            netns_cluster.dilation_value(bad)
    assert netns_cluster.rate_bits("100mbit") == 100e6 and netns_cluster.rate_bits("1gbit") == 1e9
    assert netns_cluster.rate_bits("unlimited") is None
    with pytest.raises(SystemExit, match="is not a rate"):
        netns_cluster.rate_bits("fast")


BUSY = """
import json, os, sys, time
cpu0, wall0 = time.process_time(), time.perf_counter()
while time.process_time() - cpu0 < 0.3:
    pass
print(json.dumps({"wall": time.perf_counter() - wall0, "cpu": time.process_time() - cpu0,
                  "cgroups": open("/proc/self/cgroup").read(), "cores": sorted(os.sched_getaffinity(0)),
                  "tcp": open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip()}))
"""

RUN_ON_HOST = """
import json, sys
from tools import netns_cluster
code, traffic, throttled = netns_cluster.run_command(2, "100mbit", [sys.executable, "-c", sys.argv[1]], on_host=1,
                                                     dilation=4)
print(json.dumps({"code": code, "throttled": throttled}))
"""


@pytest.mark.system  # cgroups and network namespaces
@pytest.mark.root
@pytest.mark.host_cpu
def test_a_process_on_a_dilated_host_gets_its_quota_and_one_core():
    """0.3 s of CPU on a host of 1/4 core takes at least 4 x 0.3 s, less a period's slice; the process
    is in the host's cgroups, on one core, its TCP is cubic; the cgroups are gone afterwards, and the
    machine's allowed congestion controls as they were."""
    allowed = open("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read()
    proc = subprocess.run([sys.executable, "-c", RUN_ON_HOST, BUSY], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, output_of(proc)
    busy, outcome = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert outcome["code"] == 0
    prefix = os.environ.get("MXNET_GC_NETNS", "mxgc") + "-h1"
    assert ":cpu:/%s\n" % prefix in busy["cgroups"] and ":cpuset:/%s\n" % prefix in busy["cgroups"]
    assert len(busy["cores"]) == 1 and busy["tcp"] == "cubic"
    assert open("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read() == allowed
    assert busy["wall"] >= 4 * busy["cpu"] - 2 * host_cpu.QUOTA_US / 1e6
    assert outcome["throttled"][1][0] >= 0.5 * busy["cpu"] and outcome["throttled"][0][0] == 0
    assert host_cpu.leftovers(prefix[:-1]) == []


HOROVOD_ON_HOSTS = """
import json, shlex
from tools import horovodrun as hvdrun, netns_cluster
ranks = shlex.join(hvdrun.ARGV + ["-np", "2", "-H", "198.18.0.1:1,198.18.0.2:1", "--gloo", "--network-interface", "eth0",
                    "--start-timeout", "60", "sh", "-c", 'echo "rank $HOROVOD_RANK $(grep :cpu: /proc/self/cgroup)"'])
argv = ["sh", "-c", 'echo "launcher $(grep :cpu: /proc/self/cgroup)"; exec ' + ranks]
code, traffic, throttled = netns_cluster.run_command(2, "100mbit", argv, on_host=netns_cluster.LAUNCHER, timeout=150,
                                                     dilation=4)
print(json.dumps({"code": code}))
"""


@pytest.mark.system
@pytest.mark.root
@pytest.mark.host_cpu
def test_horovod_ranks_run_in_their_own_hosts_cgroups():
    """horovodrun runs in the launcher's namespace (where `ip netns exec` hides the cgroup hierarchies)
    and starts rank i on host i through tools/netns_ssh.py: each rank is in its own host's CPU share, and
    horovodrun in none of them."""
    proc = subprocess.run([sys.executable, "-c", HOROVOD_ON_HOSTS], cwd=ROOT, capture_output=True, text=True,
                          timeout=200)
    assert proc.returncode == 0 and '{"code": 0}' in proc.stdout, output_of(proc)
    prefix = os.environ.get("MXNET_GC_NETNS", "mxgc") + "-h"
    groups = dict(re.findall(r"rank (\d) \d+:cpu:/(\S+)", proc.stdout))
    assert groups == {"0": prefix + "0", "1": prefix + "1"}, output_of(proc)
    assert re.search(r"launcher \d+:cpu:/\n", proc.stdout), output_of(proc)
    assert host_cpu.leftovers(prefix) == []
