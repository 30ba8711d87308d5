"""Emulated hosts' CPU: each host of tools/netns_cluster.py gets one core's 1/D, in a cgroup of its own.

A host is a cgroup NAME-hI under cgroup v1's ``cpu`` controller (a CFS quota of period/D per period) and
under ``cpuset`` (one core of this machine, host I on core I mod cores, so that a host's threads share
one core as on a one-core machine instead of spending the quota on two cores at once).  Every process
started on the host joins both (tools/netns_ssh.py does it before its exec; so does a command run
``on_host``), and its children stay there.  A command run inside a host's namespace (horovodrun) sees
the hierarchies only once ``show_hierarchies`` has mounted them there: `ip netns exec` hides them.
The quota is the same at every D (QUOTA_US of CPU per
period of D x QUOTA_US): in the emulated cluster's time each host then runs in the same slices whatever
D is, so that the same job at D and 2D sees the same bursts, the same switches between the hosts that
share a core and the same cold caches after them (a fixed period would cut a host's CPU into D times
finer slices at a larger D, and its steps would grow with D).

While hosts exist, every core of the machine runs a loop at the lowest priority (SCHED_IDLE, nice 19),
which takes only time nobody else wants: the cores never halt, as with the kernel's ``idle=poll``.  On a
virtual machine a halted core wakes slowly and with cold caches, and at a larger D the cores are idle
more often, so without the loops a CPU-bound step took more CPU time at a larger D.  Their time is
counted as nice time in /proc/stat, which the benchmark's busy fraction leaves out.  ``throttled`` reads how long each host's quota
held it back.  Needs root and a writable cgroup v1 ``cpu`` controller; ``missing`` says why not.
"""
import json
import math
import os
import subprocess
import sys
import time

CPU = "/sys/fs/cgroup/cpu"
CPUSET = "/sys/fs/cgroup/cpuset"
# The part of each core the hosts may use: the rest is for the kernel's work of shaping the links, the
# launcher and the benchmark itself (outside every host).
USABLE = 0.9
QUOTA_US = 2000  # (CFS refuses a quota under 1 ms)


def missing():
    """Why hosts cannot get a CPU share here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (cgroup v1's cpu controller under %s)" % CPU
    for path in (os.path.join(CPU, "cpu.cfs_quota_us"), os.path.join(CPUSET, "cpuset.cpus")):
        if not os.access(path, os.W_OK):
            return "needs cgroup v1's cpu and cpuset controllers writable at %s and %s" % (CPU, CPUSET)
    return None


def cores():
    """The cores hosts can be put on (this process's own allowed set)."""
    return sorted(os.sched_getaffinity(0))


def smallest_dilation(hosts, ncores=None):
    """The smallest whole D at which ``hosts`` hosts of 1/D core each fit: the busiest core (it holds
    ceil(hosts / cores) of them) stays within USABLE."""
    per_core = math.ceil(hosts / (ncores or len(cores())))
    return max(1, math.ceil(per_core / USABLE - 1e-9))


def fits(hosts, dilation, ncores=None):
    """None when ``hosts`` hosts fit at ``dilation``, else the refusal, with how many hosts would fit."""
    ncores = ncores or len(cores())
    most = ncores * int(dilation * USABLE + 1e-9)
    if hosts <= most:
        return None
    return ("%d hosts of 1/%g core each do not fit %d cores (%d%% of each for the hosts): at most %d fit; "
            "use --dilation %d or more, or 'auto'" % (hosts, dilation, ncores, 100 * USABLE, most,
                                                      smallest_dilation(hosts, ncores)))


def period_us(dilation):
    """CFS period for a quota of 1/D core."""
    return int(round(QUOTA_US * dilation))


def _write(path, value):
    """Writes ``value``; a refusal surfaces when the file closes, so it is closed here."""
    with open(path, "w") as f:
        f.write(str(value))


def _group(controller, name):
    return os.path.join(controller, name)


# A core's lowest-priority loop; it ends with the process that started it (PR_SET_PDEATHSIG).
AWAKE = """
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(1, signal.SIGKILL)
os.sched_setaffinity(0, {int(sys.argv[1])})
os.nice(19)
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
while True:
    pass
"""


class Hosts:
    """Cgroups for ``count`` hosts named PREFIX0 ...; ``close`` removes them (after their processes end)."""

    def __init__(self, prefix, count, dilation):
        reason = missing() or fits(count, dilation)
        if reason:
            raise SystemExit("host_cpu.py: %s" % reason)
        self.prefix, self.count, self.dilation = prefix, count, dilation
        self.period_us = period_us(dilation)
        self.quota_us = QUOTA_US
        self.made, self.awake = [], []
        try:
            self.awake = [subprocess.Popen([sys.executable, "-c", AWAKE, str(core)]) for core in cores()]
            for i in range(count):
                name = prefix + str(i)
                for controller in (CPU, CPUSET):
                    os.mkdir(_group(controller, name))
                    self.made.append(_group(controller, name))
                _write(os.path.join(CPU, name, "cpu.cfs_period_us"), self.period_us)
                _write(os.path.join(CPU, name, "cpu.cfs_quota_us"), self.quota_us)
                _write(os.path.join(CPUSET, name, "cpuset.cpus"), cores()[i % len(cores())])
                with open(os.path.join(CPUSET, "cpuset.mems")) as f:
                    _write(os.path.join(CPUSET, name, "cpuset.mems"), f.read().strip())
        except BaseException:
            self.close()
            raise

    def throttled(self):
        """[(seconds held back by the quota, periods throttled)] per host, since the hosts were made."""
        out = []
        for i in range(self.count):
            with open(os.path.join(CPU, self.prefix + str(i), "cpu.stat")) as f:
                stat = dict(line.split() for line in f if line.strip())
            out.append((int(stat["throttled_time"]) / 1e9, int(stat["nr_throttled"])))
        return out

    def close(self):
        """Ends the cores' loops and removes every cgroup made; waits up to 10 s for processes that are
        still ending."""
        for loop in self.awake:
            loop.kill()
            loop.wait()
        self.awake = []
        deadline = time.time() + 10
        for path in reversed(self.made):
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # (busy: a process killed a moment ago has not left yet)
                    if time.time() > deadline:
                        raise SystemExit("host_cpu.py: cannot remove %s: processes still in it" % path)
                    time.sleep(0.05)
        self.made = []


def enter(prefix, index):
    """Puts this process into host ``index``'s cgroups, when the hosts have any (else does nothing)."""
    name = prefix + str(index)
    for controller in (CPUSET, CPU):
        procs = os.path.join(controller, name, "cgroup.procs")
        if os.path.exists(procs):
            _write(procs, os.getpid())


def hierarchies():
    """{controller path: [its mount point, options]} of the cpu and cpuset hierarchies as this process
    sees them (the path may be a link to the mount point, as cpu to cpu,cpuacct)."""
    points = {os.path.realpath(c): c for c in (CPU, CPUSET)}
    found = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            tail = fields[fields.index("-") + 1:]  # (filesystem type, source, super options)
            if fields[4] in points and tail[0] == "cgroup":
                found[points[fields[4]]] = [fields[4], tail[2]]
    return found


def show_hierarchies(found):
    """Mounts the hierarchies ``found`` (``hierarchies`` outside the hosts) where they were.

    `ip netns exec` gives its command a /sys of its own, without the cgroup hierarchies, in a mount
    namespace of its own; a command on a host that starts processes on other hosts (horovodrun, whose ssh
    is tools/netns_ssh.py) needs them to put those processes into their hosts' cgroups.  Nothing outside
    that mount namespace sees the mounts; an /sys/fs/cgroup that is not the new, empty one is left alone.
    """
    if not found or not os.path.isdir("/sys/fs/cgroup") or os.listdir("/sys/fs/cgroup"):
        return
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "cgroup", "/sys/fs/cgroup"], check=True)
    for path, (point, options) in found.items():
        if not os.path.isdir(point):
            os.mkdir(point)
            controllers = ",".join(o for o in options.split(",") if o not in ("rw", "ro"))
            subprocess.run(["mount", "-t", "cgroup", "-o", controllers, "cgroup", point], check=True)
        if path != point:
            os.symlink(os.path.basename(point), path)


def leftovers(prefix):
    """Host cgroups of an earlier run that did not end cleanly."""
    found = []
    for controller in (CPU, CPUSET):
        if os.path.isdir(controller):
            found += [os.path.join(controller, n) for n in os.listdir(controller) if n.startswith(prefix)]
    return found


if __name__ == "__main__":
    # ``host_cpu.py HIERARCHIES COMMAND...`` (HIERARCHIES: ``hierarchies()`` as JSON): shows them, then
    # becomes COMMAND (tools/netns_cluster.py runs a command on a host this way).
    show_hierarchies(json.loads(sys.argv[1]))
    os.execvp(sys.argv[2], sys.argv[2:])
