"""The launcher's processes: each one started with its output streamed and its last lines kept
(``Process``), a job's processes found by the job's id in their environment and ended (``end_job``), and the
watchdog that ends them if the launcher dies (``Watchdog`` and ``reap``, this file run alone with
``--reap JOB``).

Standard library only: the watchdog starts at once."""
import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time

# A worker's mxnet_gc store prints this and its rank (ps-lite's, known once the store exists): the
# launcher then labels that worker's output by rank...
RANK_LINE = "mxnet_gc: this worker's rank is"
# ... and this line once it has passed the job's last barrier (its store ended with the job's end): a
# worker that exits 0 without it while others still run left the job early (they wait for it forever).
# The launcher gives both to the workers in MXNET_GC_RANK_LINE and MXNET_GC_END_LINE (config.py).
END_LINE = "mxnet_gc: this worker's store ended with the job"
TAIL_LINES = 20  # lines of output kept per process for the failure report
KILL_GRACE = 5.0  # seconds between SIGTERM and SIGKILL
JOB_VARIABLE = "MXNET_GC_JOB"  # the job's id, in the environment of every process it starts
SSH_TIMEOUT = 30.0  # seconds for the ssh commands that write and remove the secret's files


class Process:
    """One started process, its output streamed with a prefix and its last lines kept."""

    def __init__(self, role, rank, host, argv, env, echo):
        self.role, self.rank = role, rank
        # a worker's rank is ps-lite's choice: until its store says it, "#i" is the launch order
        self.name = "scheduler" if role == "scheduler" else "%s %s%d" % (role, "#" if role == "worker" else "", rank)
        self.tail = collections.deque(maxlen=TAIL_LINES)
        self.host = host
        self.started = time.time()
        self.cpu_seconds = self.wall_seconds = None  # user + system CPU time of it and its children, at exit
        self.ended = False  # a worker: its store said END_LINE
        self.popen = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        self.reader = threading.Thread(target=self._read, args=(echo,), daemon=True)
        self.reader.start()

    def _read(self, echo):
        for raw in self.popen.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if self.role == "worker" and line.startswith(RANK_LINE) and line[len(RANK_LINE):].strip().isdigit():
                self.rank = int(line[len(RANK_LINE):])
                line = "%s (launched as %s)" % (line, self.name)
                self.name = "worker %d" % self.rank
            if self.role == "worker" and line == END_LINE:
                self.ended = True
                continue
            self.tail.append(line)
            if echo:
                sys.stdout.write("[%s] %s\n" % (self.name, line))
                sys.stdout.flush()

    def poll(self, block=False):
        """The exit code, or None while it runs; reaps it with wait4 to keep its CPU time."""
        if self.popen.returncode is None:
            try:
                pid, status, usage = os.wait4(self.popen.pid, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return self.popen.poll()
            if pid:
                self.popen.returncode = os.waitstatus_to_exitcode(status)
                self.cpu_seconds = usage.ru_utime + usage.ru_stime
                self.wall_seconds = time.time() - self.started
        return self.popen.returncode

    def report(self, note=""):
        code = self.popen.returncode
        how = "was killed by signal %d" % -code if code is not None and code < 0 else "exited with code %s" % code
        lines = "\n".join("    " + line for line in self.tail) or "    (no output)"
        return "%s (pid %d) %s%s; its last lines:\n%s" % (self.name, self.popen.pid, how, note, lines)


def processes_with_env(*entries):
    """PIDs of live processes whose environment holds every one of ``entries`` (KEY=VALUE, each a whole
    variable), such as a job's --env tag."""
    wanted = [b"\0" + e.encode() + b"\0" for e in entries]
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                environ = b"\0" + f.read()
        except OSError:
            continue
        if all(w in environ for w in wanted):
            found.append(int(pid))
    return found


def end_job(job, groups):
    """Ends every process of ``job``: the process groups ``groups``, and the group of every process whose
    environment holds ``JOB_VARIABLE=job`` (a process that started a session of its own, such as a worker's
    TensorBoard, or one the launcher had started but not yet named when it died): SIGTERM, then SIGKILL to
    what is left after KILL_GRACE seconds (the job's processes are looked for again before each signal)."""
    groups = set(groups)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in processes_with_env("%s=%s" % (JOB_VARIABLE, job)):
            try:
                groups.add(os.getpgid(pid))
            except ProcessLookupError:
                pass
        groups = {g for g in groups if _signal_group(g, sig)}
        end = time.time() + KILL_GRACE
        while sig == signal.SIGTERM and groups and time.time() < end:
            time.sleep(0.05)
            groups &= _live_groups()


def _signal_group(group, sig):
    """Sends ``sig`` to a process group; False if the group is gone (or not ours)."""
    try:
        os.killpg(group, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _live_groups():
    """The process groups with a member that has not exited (a zombie, which has, waits for its parent to
    read its exit: for an orphan, init, which may do it a second later, or never in a container without one)."""
    groups = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
        except OSError:
            continue
        state, _, group = stat[stat.rindex(")") + 2:].split()[:3]  # (after the name, which may hold anything)
        if state not in ("Z", "X"):
            groups.add(int(group))
    return groups


def reap(stream, job):
    """The watchdog's loop (``launch_processes.py --reap JOB``, this file run alone): reads process-group ids, one per line,
    from ``stream``, and commands to run at the end of the job (``run`` and a JSON argv).

    The launcher writes each process's group as it starts it and ``done`` once it has ended them all.
    If the stream closes without ``done`` (the launcher was killed, even by SIGKILL), the watchdog ends
    the job itself (end_job: every group, and every process with the job's id), then runs the commands
    (the removal of the job's secret files), each for at most SSH_TIMEOUT seconds.
    """
    groups, commands = [], []
    for line in stream:
        line = line.strip()
        if line == "done":
            return 0
        if line.isdigit():
            groups.append(int(line))
        elif line.startswith("run "):
            commands.append(json.loads(line[len("run "):]))
    end_job(job, groups)
    for argv in commands:
        try:
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=SSH_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired):
            pass
    return 0


class Watchdog:
    """A separate process that ends the job's processes if the launcher dies without ending them."""

    def __init__(self, job):
        self.popen = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--reap", job],  # (this file alone)
                                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True)

    def watch(self, pid):
        self._tell(b"%d" % pid)

    def at_end(self, argv):
        """A command for the watchdog to run after it has ended the job (not when the launcher released it)."""
        self._tell(b"run " + json.dumps(argv).encode())

    def _tell(self, line):
        self.popen.stdin.write(line + b"\n")
        self.popen.stdin.flush()

    def release(self):
        """The launcher has ended every process itself: the watchdog exits without killing."""
        try:
            self.popen.stdin.write(b"done\n")
            self.popen.stdin.close()
        except (BrokenPipeError, ValueError):
            pass
        self.popen.wait()


if __name__ == "__main__":  # the watchdog: launch_processes.py --reap JOB
    sys.exit(reap(sys.stdin, sys.argv[2]))
