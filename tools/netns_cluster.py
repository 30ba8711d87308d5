#!/usr/bin/env python
"""A bandwidth-limited cluster on one machine: one network namespace per host, shaped links.

    sudo .venv/bin/python -m tools.netns_cluster --hosts 4 --rate 100mbit -- \\
        -n 2 -s 1 .venv/bin/python examples/synthetic_gluon.py

Creates hosts mxgc-h0 ... mxgc-h{N-1}, each a network namespace with one interface (address
198.18.0.{i+1}/24, the range reserved for benchmarks) joined to the others through a bridge in its own
namespace (mxgc-sw).  Each host's link is limited to --rate in both directions with tc's token
bucket filter (``unlimited`` leaves it alone).

Hosts have a CPU of their own under time dilation (--dilation D, default 'auto': the smallest D at which
the hosts fit this machine's cores; tools/host_cpu.py): each host gets 1/D of one core, every link
D times less than --rate (a queue D times longer in time, so that it holds the same bytes), so the
cluster behaves as hosts of one core on links of --rate, D times slower.  ``--dilation none`` leaves the
hosts sharing every core (no CPU emulation).  Then it runs tools/launch.py with the given arguments
across those hosts (its ssh launcher, with tools/netns_ssh.py in place of ssh: the scheduler on the
first host, then servers and workers, one host each), prints each host's bytes sent and received
(its interface's counters) and the packets its link's queues dropped, and removes every namespace it
made, also on failure and Ctrl-C.

Every host's TCP uses cubic, Linux's default congestion control, whatever this machine's default is (a
machine set to BBR shapes its flows by timers in real time, which dilation does not stretch: its
200 ms probes of the path's RTT with a window of 4 packets stall a transfer 200 / D ms of the emulated
cluster's); the machine's list of allowed controls gets cubic for as long as the hosts exist.

Each host's /etc/hosts (/etc/netns/NS/hosts, which `ip netns exec` mounts) resolves this machine's name
to the host's own address, as on a real cluster (Gloo advertises that address to its peers).  Needs root
and iproute2 (ip, tc); without them it refuses with a message.  MXNET_GC_NETNS=NAME (default
mxgc) names the namespaces, so that two clusters can exist at once.
"""
import argparse
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _settings():
    """mxnet_gc's settings (mxnet_gc/config.py, loaded on its own: it imports no MXNet, which the
    cluster tools do not need)."""
    spec = importlib.util.spec_from_file_location("mxnet_gc_config", os.path.join(ROOT, "mxnet_gc", "config.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.settings()


# MXNET_GC_NETNS=NAME names the namespaces NAME-h0... and NAME-sw (default mxgc), so that clusters can
# run side by side; tools/netns_ssh.py uses the same name.
NAME = _settings().netns
PREFIX = NAME + "-h"
SWITCH = NAME + "-sw"
SUBNET = "198.18.0.%d"
LAUNCHER = "launcher"  # (run_command's on_host: a namespace of its own, without a CPU share)
CONGESTION = "cubic"  # every host's TCP congestion control (Linux's default)
SYSCTL_TCP = "/proc/sys/net/ipv4/"


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (host_cpu, also when run by its path)
import host_cpu  # noqa: E402

UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def rate_bits(rate):
    """Bits per second of a tc rate such as '100mbit' or '1gbit'; None for 'unlimited'."""
    if rate == "unlimited":
        return None
    for unit in sorted(UNITS, key=len, reverse=True):
        number = rate[:-len(unit)]
        if rate.endswith(unit) and number.replace(".", "", 1).isdigit():
            return float(number) * UNITS[unit]
    raise SystemExit("netns_cluster.py: %r is not a rate (a number with bit, kbit, mbit or gbit, or unlimited)" % rate)


def dilation_value(text):
    """--dilation's values: 'auto', 'none' or a number >= 1."""
    if text in ("auto", "none"):
        return text
    try:
        value = float(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError("a dilation is 'auto', 'none' or a number >= 1, not %r" % text)
    return value


def dilation_for(hosts, dilation):
    """The dilation factor a request means: None for 'none' (or None), the smallest that fits for 'auto'."""
    if dilation in (None, "none"):
        return None
    return host_cpu.smallest_dilation(hosts) if dilation == "auto" else float(dilation)


def run(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def address(i):
    return SUBNET % (i + 1)


class Cluster:
    """Namespaces, links and shaping for N hosts, and with a ``dilation`` D each host's CPU share
    (1/D core) and links at ``rate`` / D; with ``launcher`` one more namespace (address(N)) without a CPU
    share, for the command that starts a job; ``close`` removes all of them."""

    def __init__(self, hosts, rate, dilation=None, launcher=False):
        self.hosts, self.dilation, self.launcher = hosts, dilation, launcher
        bits = rate_bits(rate)
        self.rate = rate if bits is None or dilation is None else "%dbit" % round(bits / dilation)
        self.latency_ms = 100 * (dilation or 1)  # the queue's bound in time: the same bytes at rate / D
        self.made, self.cpu, self.allowed_before = [], None, None

    def __enter__(self):
        try:
            if self.dilation is not None:
                self.cpu = host_cpu.Hosts(PREFIX, self.hosts, self.dilation)
            self.allowed_before = allow_congestion(CONGESTION)
            self._ns(SWITCH)
            run("ip", "netns", "exec", SWITCH, "ip", "link", "add", "br0", "type", "bridge")
            run("ip", "netns", "exec", SWITCH, "ip", "link", "set", "br0", "up")
            for i in range(self.hosts + self.launcher):
                ns = PREFIX + str(i)
                self._ns(ns)
                self._hosts_file(ns, i)
                # the veth pair is created inside the host namespace, its peer moved to the switch
                run("ip", "netns", "exec", ns, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "p%d" % i)
                run("ip", "netns", "exec", ns, "ip", "link", "set", "p%d" % i, "netns", SWITCH)
                run("ip", "netns", "exec", SWITCH, "ip", "link", "set", "p%d" % i, "master", "br0", "up")
                run("ip", "netns", "exec", ns, "ip", "addr", "add", address(i) + "/24", "dev", "eth0")
                run("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
                run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
                run("ip", "netns", "exec", ns, "sh", "-c",
                    "echo %s > %stcp_congestion_control" % (CONGESTION, SYSCTL_TCP))
                if self.rate != "unlimited":  # egress of the host, and egress towards it from the switch
                    for where, dev in ((ns, "eth0"), (SWITCH, "p%d" % i)):
                        run("ip", "netns", "exec", where, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                            self.rate, "burst", "256kbit", "latency", "%dms" % self.latency_ms)
        except BaseException:
            self.close()
            raise
        return self

    def _ns(self, name):
        run("ip", "netns", "add", name)
        self.made.append(name)

    def _hosts_file(self, ns, i):
        """/etc/netns/NS/hosts, which `ip netns exec` shows as /etc/hosts: this machine's name resolves to
        the host's own address there (Gloo, for one, advertises the address its hostname resolves to)."""
        os.makedirs("/etc/netns/" + ns, exist_ok=True)
        with open("/etc/netns/%s/hosts" % ns, "w") as f:
            f.write("127.0.0.1 localhost\n%s %s\n" % (address(i), socket.gethostname()))

    def counters(self):
        """{host address: (bytes sent, bytes received, packets dropped)}: the bytes from each host's
        interface, the drops from the queues shaping its link (its own egress and the switch's towards it:
        a full queue drops, as when many flows arrive at one link at once)."""
        out = {}
        for i in range(self.hosts):
            values = []
            for counter in ("tx_bytes", "rx_bytes"):
                r = run("ip", "netns", "exec", PREFIX + str(i), "cat", "/sys/class/net/eth0/statistics/" + counter)
                values.append(int(r.stdout))
            links = ((PREFIX + str(i), "eth0"), (SWITCH, "p%d" % i))
            values.append(sum(self._dropped(where, dev) for where, dev in links))
            out[address(i)] = tuple(values)
        return out

    @staticmethod
    def _dropped(where, dev):
        """Packets the root queue of ``dev`` in namespace ``where`` dropped (tc -s: "(dropped N, ...")."""
        text = run("ip", "netns", "exec", where, "tc", "-s", "qdisc", "show", "dev", dev, "root").stdout
        return sum(int(part.split(",")[0]) for part in text.split("(dropped ")[1:])

    def close(self):
        """Deletes every namespace made (their interfaces and the bridge go with them); kills what ran there."""
        for ns in reversed(self.made):
            pids = run("ip", "netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            run("ip", "netns", "del", ns, check=False)
            shutil.rmtree("/etc/netns/" + ns, ignore_errors=True)
        self.made = []
        if self.cpu is not None:
            self.cpu.close()
            self.cpu = None
        if self.allowed_before is not None:
            tcp_setting("tcp_allowed_congestion_control", self.allowed_before)
            self.allowed_before = None

    def __exit__(self, *exc):
        self.close()


def tcp_setting(name, value=None):
    """This machine's TCP setting ``name`` (/proc/sys/net/ipv4), after writing ``value`` if given."""
    if value is not None:
        with open(SYSCTL_TCP + name, "w") as f:
            f.write(value)
    with open(SYSCTL_TCP + name) as f:
        return f.read().strip()


def allow_congestion(name):
    """Lets network namespaces choose the congestion control ``name`` (a namespace other than the machine's
    may set only the controls of its allowed list); returns the list as it was if it had to change, else
    None.  Refuses a kernel without ``name``."""
    if name not in tcp_setting("tcp_available_congestion_control").split():
        sys.exit("netns_cluster.py: this kernel has no TCP congestion control %r, which the emulated hosts "
                 "use (Linux's default)" % name)
    allowed = tcp_setting("tcp_allowed_congestion_control")
    if name in allowed.split():
        return None
    tcp_setting("tcp_allowed_congestion_control", " ".join(allowed.split() + [name]))
    return allowed


def leftovers():
    """Namespaces and host cgroups of an earlier run that did not end cleanly."""
    names = run("ip", "netns", "list", check=False).stdout.split()
    return [n for n in names if n.startswith(PREFIX) or n == SWITCH] + host_cpu.leftovers(PREFIX)


def check_environment():
    if os.geteuid() != 0:
        sys.exit("netns_cluster.py: needs root (network namespaces and tc); run it as root")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            sys.exit("netns_cluster.py: needs %s from iproute2 (apt-get install iproute2)" % tool)
    probe = NAME + "-probe"
    r = run("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        sys.exit("netns_cluster.py: cannot create network namespaces here: %s" % r.stderr.strip())
    run("ip", "netns", "del", probe, check=False)


def run_job(hosts, rate, launch_args, dilation=None):
    """Runs tools/launch.py with ``launch_args`` across ``hosts`` new hosts shaped to ``rate`` (dilated by
    ``dilation``), then removes them.  Returns what run_command returns."""
    with tempfile.NamedTemporaryFile("w", suffix=".hosts") as hostfile:
        hostfile.write("\n".join(address(i) for i in range(hosts)) + "\n")
        hostfile.flush()
        ssh = "%s %s" % (sys.executable, os.path.join(ROOT, "tools", "netns_ssh.py"))
        return run_command(hosts, rate, [sys.executable, os.path.join(ROOT, "tools", "launch.py"), "--launcher",
                                         "ssh", "-H", hostfile.name, "--ssh", ssh] + list(launch_args),
                           dilation=dilation)


def run_command(hosts, rate, argv, on_host=None, env=None, timeout=None, dilation=None):
    """Runs ``argv`` with ``hosts`` new hosts shaped to ``rate`` and dilated by ``dilation`` (a factor, or
    None: no CPU emulation), then removes them.  ``argv`` runs outside the hosts (on_host None), on host
    ``on_host`` (in its namespace and CPU share), or with on_host LAUNCHER in a namespace of its own
    without a CPU share (address(hosts)), from which it reaches the hosts: a launcher that starts its
    processes by ssh (horovodrun) then takes none of their CPU, as tools/launch.py run outside the hosts.
    In argv's environment ``ssh`` is tools/netns_ssh.py (for launchers
    such as horovodrun that call ssh), plus ``env``; after ``timeout`` seconds it is ended (exit code
    124).  Returns (exit code, {host address: (bytes sent, bytes received, packets dropped)} during the
    run, [(seconds the host's CPU quota held it back, periods throttled)] per host or None)."""
    check_environment()
    stale = leftovers()
    if stale:
        sys.exit("netns_cluster.py: namespaces or host cgroups %s exist from an earlier run; delete them with "
                 "`ip netns del NAME` and `rmdir PATH`" % ", ".join(stale))
    launcher = on_host == LAUNCHER
    with Cluster(hosts, rate, dilation, launcher=launcher) as cluster, tempfile.TemporaryDirectory() as bin_dir:
        with open(os.path.join(bin_dir, "ssh"), "w") as f:
            f.write("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, os.path.join(ROOT, "tools", "netns_ssh.py")))
        os.chmod(os.path.join(bin_dir, "ssh"), 0o755)
        env = dict(os.environ, **(env or {}), PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        enter = None
        if on_host is not None:
            argv = ["ip", "netns", "exec", PREFIX + str(hosts if launcher else on_host), sys.executable,
                    host_cpu.__file__, json.dumps(host_cpu.hierarchies())] + list(argv)
            if not launcher:  # (in the child, before its exec)
                enter = lambda: host_cpu.enter(PREFIX, on_host)  # noqa: E731
        before = cluster.counters()
        try:
            code = subprocess.call(argv, cwd=os.getcwd(), env=env, timeout=timeout, preexec_fn=enter)
        except subprocess.TimeoutExpired:  # call() killed argv; closing the cluster ends what it started
            code = 124
        after = cluster.counters()
        throttled = cluster.cpu.throttled() if cluster.cpu else None
    return code, {host: tuple(a - b for a, b in zip(after[host], before[host])) for host in after}, throttled


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, required=True, help="scheduler + servers + workers")
    parser.add_argument("--rate", default="unlimited", help="per-host link rate for tc (100mbit, 1gbit, ...)")
    parser.add_argument("--dilation", type=dilation_value, default="auto",
                        help="D: each host 1/D of a core, links at rate / D ('auto': the smallest D that fits this "
                             "machine; 'none': hosts share every core)")
    parser.add_argument("launch_args", nargs=argparse.REMAINDER,
                        help="after --: the arguments of tools/launch.py (-n, -s, the worker command)")
    args = parser.parse_args(argv)
    launch_args = args.launch_args[1:] if args.launch_args[:1] == ["--"] else args.launch_args

    def interrupted(signum, _frame):
        raise KeyboardInterrupt("signal %d" % signum)

    signal.signal(signal.SIGTERM, interrupted)
    # (Python leaves SIGINT ignored when it started ignored, as in a background job of a script: Ctrl-C
    # and the tests' SIGINT must end the job and delete the hosts all the same)
    signal.signal(signal.SIGINT, interrupted)
    dilation = dilation_for(args.hosts, args.dilation)
    if dilation is not None:
        print("dilation %g: each host 1/%g of a core, links at %s / %g; times in the job are %g times the "
              "emulated cluster's" % (dilation, dilation, args.rate, dilation, dilation), flush=True)
    code, traffic, throttled = run_job(args.hosts, args.rate, launch_args, dilation)
    print("host          bytes sent  bytes received  packets dropped  cpu throttled s")
    for i, (host, (sent, received, dropped)) in enumerate(traffic.items()):
        print("%-12s %11d %15d %16d %16s" % (host, sent, received, dropped,
                                            "%.2f" % throttled[i][0] if throttled else "-"))
    return code


if __name__ == "__main__":
    sys.exit(main())
