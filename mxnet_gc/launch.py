#!/usr/bin/env python
"""Starts a distributed MXNet job: one scheduler, S servers (mxnet_gc's server) and W workers.

    python -m mxnet_gc.launch -n WORKERS -s SERVERS [--launcher local|ssh] [-H HOSTFILE] COMMAND [ARGS...]

(also installed as the command ``mxnet-gc-launch``; ``python tools/launch.py`` in a source tree).

Every process gets the DMLC_* environment of ps-lite.  The launcher prints each process's output
with a [role rank] prefix, and exits 0 only if every worker exited 0: at once when no worker used a dist
kvstore, else once servers and scheduler exit (they do when the workers' stores end the job; after 5
seconds the launcher ends them).  If any process dies (or
--timeout passes, or Ctrl-C), it ends all the others within a few seconds, says which one failed and
shows its last lines of output.  No process of the job outlives it (nor one a process started in a session
of its own: each carries the job's id, MXNET_GC_JOB, in its environment), even when it is killed with
SIGKILL: a watchdog process ends the job then.  Every process gets the job's secret (MXNET_GC_JOB_SECRET,
or with ssh the file MXNET_GC_JOB_SECRET_FILE), for them to authenticate each other.
(This file imports no MXNet: tools/launch.py and the watchdog start fast.)

--launcher ssh starts each process with ``ssh HOST 'cd CWD && env VARS COMMAND'`` on the hosts of
the hostfile (one host per line, HOST or HOST:SSH_PORT; the scheduler on the first, then servers and
workers round-robin).  The hosts must share the code at the same path and reach each other's addresses.
Before it starts them, one ssh per host writes the job's secret, from ssh's stdin, to
~/.mxnet_gc/job-ID.secret (mode 0600; removed at the end of the job): the secret is on no command line.
MXNet's launcher command lines run unchanged or are refused with what to use instead (docs/launcher.md).
"""
import argparse
import collections
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

# A worker's mxnet_gc store prints this and its rank (ps-lite's, known once the store exists): the
# launcher then labels that worker's output by rank...
RANK_LINE = "mxnet_gc: this worker's rank is"
# ... and this line once it has passed the job's last barrier (its store ended with the job's end): a
# worker that exits 0 without it while others still run left the job early (they wait for it forever).
# The launcher gives both to the workers in MXNET_GC_RANK_LINE and MXNET_GC_END_LINE (config.py).
END_LINE = "mxnet_gc: this worker's store ended with the job"
# ps-lite's scheduler through libmxnet's C API, run by its path (it imports neither mxnet nor mxnet_gc)
SCHEDULER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kvstore", "ps", "scheduler.py")
SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kvstore", "ps", "server_start.py")  # (without scipy)
TAIL_LINES = 20  # lines of output kept per process for the failure report
KILL_GRACE = 5.0  # seconds between SIGTERM and SIGKILL
JOB_VARIABLE = "MXNET_GC_JOB"  # the job's id, in the environment of every process it starts
# The job's secret, for its processes to authenticate each other: the token itself with --launcher local
# (or the launcher's own, when set), or with --launcher ssh the file that holds it on each host (a command
# line is readable by every user of its host; the environment of a process only by its user).
SECRET_VARIABLE = "MXNET_GC_JOB_SECRET"
SECRET_FILE_VARIABLE = "MXNET_GC_JOB_SECRET_FILE"
SECRET_DIR = "$HOME/.mxnet_gc"  # (expanded on each host, in double quotes)
SSH_TIMEOUT = 30.0  # seconds for the ssh commands that write and remove the secret's files
SERVER_EXIT_GRACE = 5.0  # seconds servers and scheduler get to exit after the workers' stores ended the job
HOW_TO_LAUNCH = "python -m mxnet_gc.launch -n W -s S python your_script.py"  # (for the stores' messages too)
EXAMPLE = """example: 2 workers and 1 server on this machine, the script's own arguments after it:

    python -m mxnet_gc.launch -n 2 -s 1 python train.py --epochs 1

Horovod scripts (kvstore='horovod', hvd.init()) are started with horovodrun instead:
    horovodrun -np 2 python train.py"""
EARLY_EXIT_GRACE = 10.0  # seconds workers get to exit after a server or the scheduler did
REFUSED_LAUNCHERS = {  # MXNet's (dmlc-tracker's) other launchers, and what to use instead
    "mpi": "not supported; use ssh with a hostfile (-H), or Horovod (horovodrun) for the ring transport",
    "sge": "not supported; start the job from an SGE script with --launcher ssh -H $PE_HOSTFILE-style hosts",
    "yarn": "not supported; use --launcher ssh with a hostfile (-H)",
}
FAILURE_GRACE = 2.0  # seconds the other workers get to exit (and print why) after a worker failed
LEFT_GRACE = 5.0  # seconds the other workers get to exit after one exited 0 before the end of the job


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
    """The watchdog's loop (``launch.py --reap JOB``, run as a file): reads process-group ids, one per line,
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
        self.popen = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--reap", job],
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


def free_port(host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def read_hostfile(path):
    """[(host, ssh port or None)]: one host a line, ``host`` or dmlc's ``host:port`` (the port ssh uses)."""
    hosts = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                host, _, port = line.split()[0].partition(":")
                if port and not port.isdigit():
                    raise SystemExit("mxnet_gc.launch: hostfile %s: %r is not HOST or HOST:PORT" % (path, line))
                hosts.append((host, int(port) if port else None))
    if not hosts:
        raise SystemExit("mxnet_gc.launch: hostfile %s names no host" % path)
    return hosts


def variables(items, role):
    """{name: value} of --env items (KEY=VALUE, MXNet's KEY:VALUE, or MXNet's NAME: this environment's value)
    and of --env-worker / --env-server items for ``role``."""
    out = {}
    for option, item in items:
        if option not in ("env", "env_" + ("server" if role == "scheduler" else role)):
            continue
        key, sep, value = item.partition("=")
        if not sep:
            key, sep, value = item.partition(":")
        if not sep:
            if item not in os.environ:
                raise ValueError("--%s %s: no such variable in this environment (give %s=VALUE)"
                                 % (option.replace("_", "-"), item, item))
            value = os.environ[item]
        out[key] = value
    return out


def as_command(words):
    """The worker command: as given, or through sh -c as MXNet's launcher runs it (which joins its words into
    one shell line) when it is one string with spaces or starts with VAR=value."""
    if (len(words) == 1 and " " in words[0].strip()) or re.match(r"[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        return ["/bin/sh", "-c", " ".join(words)]
    return words


class Job:
    """A scheduler, servers and workers; ended as a whole."""

    def __init__(self, args):
        self.args = args
        self.processes = []
        self.id = uuid.uuid4().hex  # in every process's environment (JOB_VARIABLE): the job is ended by it
        self.secret = os.environ.get(SECRET_VARIABLE) or secrets.token_hex(32)
        self.secret_file = "%s/job-%s.secret" % (SECRET_DIR, self.id)  # with --launcher ssh, on every host
        self.remove_secret = 'rm -f "%s"' % self.secret_file
        self.secret_written = False  # (set as the writing starts: the files are removed at the end)
        self.stopped = False
        self.watchdog = Watchdog(self.id)
        self.python = args.python or sys.executable
        if args.launcher == "ssh":
            self.hosts = read_hostfile(args.hostfile)
            self.root = self.hosts[0][0]
            self.port = args.port or free_port("127.0.0.1")
        else:
            self.hosts = [(args.host, None)]
            self.root = args.host
            self.port = args.port or free_port(args.host)

    def env(self, role, host):
        env = {
            "DMLC_ROLE": role,
            "DMLC_PS_ROOT_URI": self.root,
            "DMLC_PS_ROOT_PORT": str(self.port),
            "DMLC_NUM_SERVER": str(self.args.num_servers),
            "DMLC_NUM_WORKER": str(self.args.num_workers),
            "DMLC_NODE_HOST": host,
            JOB_VARIABLE: self.id,
        }
        if self.args.launcher == "local":
            env[SECRET_VARIABLE] = self.secret
        if role == "worker":
            env["MXNET_GC_RANK_LINE"], env["MXNET_GC_END_LINE"] = RANK_LINE, END_LINE
        env.update(variables(self.args.env, role))
        return env

    def ssh(self, where, option, command):
        """ssh's argv that runs the shell line ``command`` on ``where`` (host, ssh port or None)."""
        host, port = where
        return (shlex.split(self.args.ssh) + [option, "-o", "StrictHostKeyChecking=no"]
                + (["-p", str(port)] if port else []) + [host, command])

    def on_every_host(self, command, data=b""):
        """Runs the shell line ``command`` on each of the job's hosts at once through ssh, with ``data`` on its
        stdin (ssh -T: no terminal, which would echo it); returns "HOST: why" for each host where it failed."""
        env = dict(os.environ, **{JOB_VARIABLE: self.id})
        runs = [(where[0], subprocess.Popen(self.ssh(where, "-T", command), env=env, stdin=subprocess.PIPE,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            start_new_session=True))  # (Ctrl-C reaches the launcher alone)
                for where in dict.fromkeys(self.hosts)]
        end = time.time() + SSH_TIMEOUT
        failed = []
        for host, run in runs:
            try:  # (at least a second for one that has answered while the others were awaited)
                _, err = run.communicate(data, timeout=max(1.0, end - time.time()))
            except subprocess.TimeoutExpired:
                run.kill()
                run.wait()
                failed.append("%s: no answer within %g s" % (host, SSH_TIMEOUT))
                continue
            if run.returncode:
                why = err.decode("utf-8", "replace").strip() or "exit code %d" % run.returncode
                failed.append("%s: %s" % (host, why))
        return failed

    def write_secret(self):
        """--launcher ssh: writes the job's secret to a file only the user can read on each host, through ssh's
        stdin (never a command line); the processes get its path (SECRET_FILE_VARIABLE).  The launcher removes
        the files at the end of the job; the watchdog if the launcher is killed."""
        for where in dict.fromkeys(self.hosts):
            self.watchdog.at_end(self.ssh(where, "-T", self.remove_secret))
        self.secret_written = True
        failed = self.on_every_host('umask 077 && mkdir -p "%s" && cat > "%s"' % (SECRET_DIR, self.secret_file),
                                    self.secret.encode())
        for failure in failed:
            print("mxnet_gc.launch: cannot write the job's secret file %s on %s" % (self.secret_file, failure),
                  file=sys.stderr)
        if failed:
            raise SystemExit(1)

    def start(self, role, rank, where, command):
        host = where[0]
        env = self.env(role, host)
        if self.args.launcher == "ssh":
            assignments = ["%s=%s" % (k, shlex.quote(v)) for k, v in env.items()]
            assignments.append('%s="%s"' % (SECRET_FILE_VARIABLE, self.secret_file))
            remote = "cd %s && env %s %s" % (shlex.quote(os.getcwd()), " ".join(assignments),
                                             " ".join(shlex.quote(c) for c in command))
            argv = self.ssh(where, "-tt", remote)
            full_env = dict(os.environ, **{JOB_VARIABLE: self.id})
        else:
            argv = command
            full_env = dict(os.environ, **env)
        echo = role == "worker" or self.args.verbose
        self.processes.append(Process(role, rank, host, argv, full_env, echo))
        self.watchdog.watch(self.processes[-1].popen.pid)  # its session: the group of it and its children

    def start_all(self):
        if self.args.mxnet_servers:  # MXNet runs its stock server (and the scheduler) inside `import mxnet`
            server = scheduler = [self.python, "-c", "import mxnet"]
        else:
            server = [self.python, SERVER]
            scheduler = [self.python, SCHEDULER]
        if self.args.launcher == "ssh":
            self.write_secret()
        self.start("scheduler", 0, self.hosts[0], scheduler)
        hosts = self.hosts
        for r in range(self.args.num_servers):
            self.start("server", r, hosts[(1 + r) % len(hosts)], server)
        for r in range(self.args.num_workers):
            self.start("worker", r, hosts[(1 + self.args.num_servers + r) % len(hosts)], as_command(self.args.command))

    def watch(self):
        """Waits for the workers; returns the exit code of the job."""
        deadline = time.time() + self.args.timeout if self.args.timeout else None
        workers = [p for p in self.processes if p.role == "worker"]
        early_since = None  # when a server or the scheduler exited while workers still ran
        left_since = None  # when a worker exited 0 before the end of the job while others still ran
        while True:
            failed = next((p for p in self.processes if p.poll() not in (None, 0)), None)
            if failed is not None:
                # the other workers often meet the same failure a moment later: let them say so first
                end = time.time() + FAILURE_GRACE
                while failed.role == "worker" and time.time() < end and any(p.poll() is None for p in workers):
                    time.sleep(0.05)
                self.fail("%s" % failed.report())
                return 1
            if all(p.poll() == 0 for p in workers):
                break
            left = next((p for p in workers if p.poll() == 0 and not p.ended), None)
            if left is not None:  # (a worker with no store at all exits so; then the others soon do too)
                left_since = left_since or time.time()
                if time.time() - left_since > LEFT_GRACE:
                    running = ", ".join(p.name for p in workers if p.poll() is None)
                    self.fail(left.report(" before the end of the job (its store never reached the job's last "
                                          "barrier) while %s still ran, waiting for it at a synchronisation that "
                                          "can never complete" % running))
                    return 1
            early = next((p for p in self.processes if p.role != "worker" and p.poll() == 0), None)
            if early is not None:  # normal at the very end of a job, while the workers exit
                early_since = early_since or time.time()
                if time.time() - early_since > EARLY_EXIT_GRACE:
                    self.fail("%s while workers were still running" % early.report())
                    return 1
            if deadline and time.time() > deadline:
                self.fail("the job ran past --timeout %g s" % self.args.timeout)
                return 124
            time.sleep(0.05)
        # servers and scheduler exit by themselves: mxnet_gc's once the workers' stores ended the job, MXNet's
        # once its workers finalized; with no store used, nothing ever ends them
        if all(p.ended for p in workers) or self.args.mxnet_servers:
            end = time.time() + SERVER_EXIT_GRACE
            while time.time() < end and any(p.poll() is None for p in self.processes):
                time.sleep(0.05)
            lingering = [p.name for p in self.processes if p.poll() is None]
            if lingering:
                print("mxnet_gc.launch: %s did not exit %g s after the workers finished; ending them"
                      % (", ".join(lingering), SERVER_EXIT_GRACE), file=sys.stderr)
        elif not any(p.ended for p in workers):
            print("mxnet_gc.launch: no worker used a dist kvstore (each ran on its own; the servers had nothing to "
                  "do).  A Horovod script is started with horovodrun -np %d python your_script.py"
                  % len(workers), file=sys.stderr)
        self.stop()
        return 0

    def fail(self, message):
        print("mxnet_gc.launch: job failed: %s" % message, file=sys.stderr)
        self.stop()
        print("mxnet_gc.launch: ended all %d processes" % len(self.processes), file=sys.stderr)

    def stop(self):
        """Ends every process of the job (end_job: each one's session, and every process with the job's id, such
        as a child that started a session of its own), removes the secret's files, then releases the watchdog.
        (A signal that comes while it runs stops the job again, in full; a later call does nothing.)"""
        if self.stopped:
            return
        end_job(self.id, [p.popen.pid for p in self.processes])
        for p in self.processes:
            p.poll(block=True)
            p.reader.join(timeout=1.0)
        if self.secret_written:
            for failure in self.on_every_host(self.remove_secret):
                print("mxnet_gc.launch: cannot remove the job's secret file %s on %s" % (self.secret_file, failure),
                      file=sys.stderr)
        self.watchdog.release()
        self.stopped = True


def launcher_name(name):
    """--launcher's value: local or ssh; MXNet's other launchers are refused with what to use instead."""
    if name in REFUSED_LAUNCHERS:
        raise argparse.ArgumentTypeError("%s: %s" % (name, REFUSED_LAUNCHERS[name]))
    if name not in ("local", "ssh"):
        raise argparse.ArgumentTypeError("%r: local or ssh" % name)
    return name


def not_a_command(word):
    """Why the worker command's first word ``word`` cannot run although it names a file here (a script given
    without its interpreter, or a file that is not executable), or None."""
    if not os.path.isfile(word) or ("/" in word and os.access(word, os.X_OK)):
        return None
    if "/" not in word and shutil.which(word):
        return None
    return ("%s is a file%s, not a command: give the interpreter first, as in `python -m mxnet_gc.launch -n W -s S "
            "python %s`" % (word, " of this folder" if "/" not in word else " that is not executable", word))


def horovod_script(command):
    """The Python script ``command`` runs when it is a Horovod script (it calls hvd.init() and names no
    dist kvstore), else None: under this launcher each worker would train alone."""
    script = next((word for word in command[1:] if word.endswith(".py")), None)
    if script is None or not os.path.isfile(script):
        return None
    with open(script, errors="replace") as f:
        source = f.read()
    uses_horovod = re.search(r"^\s*(import|from) horovod", source, re.M) and "hvd.init()" in source
    return script if uses_horovod and not re.search(r"dist_(sync|async)", source) else None


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m mxnet_gc.launch", description=__doc__.split("\n\n")[0],
                                     epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--num-workers", type=int, required=True)
    parser.add_argument("-s", "--num-servers", type=int, help="(default: as many as workers, as MXNet's launcher)")
    parser.add_argument("--launcher", type=launcher_name, metavar="{local,ssh}",
                        help="local (the default without -H) or ssh (with -H)")
    parser.add_argument("-H", "--hostfile", help="hosts for --launcher ssh, one a line: HOST or HOST:SSH_PORT")
    parser.add_argument("--host", default="127.0.0.1", help="address of every process with --launcher local")
    parser.add_argument("--port", type=int, help="scheduler port (default: a free one)")
    parser.add_argument("--ssh", default="ssh", help="ssh command for --launcher ssh (default: ssh)")
    parser.add_argument("--python", help="Python for the scheduler and servers (default: this one)")
    for option, who in (("env", "every process"), ("env-worker", "the workers"), ("env-server", "the servers")):
        parser.add_argument("--" + option, action="append", default=[], type=lambda v, o=option: (o.replace("-", "_"), v),
                            dest="env", metavar="KEY=VALUE",
                            help="an environment variable for %s (also MXNet's KEY:VALUE, or NAME for this "
                                 "environment's value)" % who)
    parser.add_argument("--sync-dst-dir", help=argparse.SUPPRESS)
    parser.add_argument("--p3", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=0, help="end the job after this many seconds")
    parser.add_argument("--mxnet-servers", action="store_true",
                        help="run MXNet's stock parameter server instead of mxnet_gc's (to compare with MXNet's "
                             "own dist kvstore; mxnet_gc's stores need mxnet_gc's server)")
    parser.add_argument("--report", metavar="FILE",
                        help="write a JSON list of the processes: role, rank, host, exit code, wall and CPU seconds")
    parser.add_argument("-v", "--verbose", action="store_true", help="also show server and scheduler output")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no worker command given")
    why = not_a_command(args.command[0]) if args.launcher != "ssh" and not args.hostfile else None
    if why:
        parser.error(why)
    script = horovod_script(args.command)
    if script:
        parser.error("%s is a Horovod script (hvd.init(), no dist kvstore): under this launcher each worker would "
                     "train alone.  Start it with horovodrun -np %d python %s" % (script, args.num_workers, script))
    if args.sync_dst_dir:
        parser.error("--sync-dst-dir: mxnet_gc.launch copies nothing; every host runs the command in this directory's "
                     "path, so put the code there first (a shared file system, or rsync)")
    if args.p3:
        parser.error("--p3: MXNet's P3 (priority-based parameter propagation) runs in MXNet's own server, not in "
                     "mxnet_gc's")
    try:
        for role in ("worker", "server"):
            variables(args.env, role)
    except ValueError as e:
        parser.error(str(e))
    args.launcher = args.launcher or ("ssh" if args.hostfile else "local")
    args.num_servers = args.num_workers if args.num_servers is None else args.num_servers
    if args.num_workers < 1 or args.num_servers < 1:
        parser.error("needs at least one worker and one server")
    if args.launcher == "ssh" and not args.hostfile:
        parser.error("--launcher ssh needs -H HOSTFILE")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--reap":
        return reap(sys.stdin, argv[1])
    args = parse_args(argv)
    job = Job(args)

    def interrupted(signum, _frame):
        job.fail("interrupted by signal %d" % signum)
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    try:
        job.start_all()
        code = job.watch()
    except OSError as e:  # a command that does not exist or cannot run: one line, not a traceback
        job.stop()
        print("mxnet_gc.launch: cannot start %r: %s (the worker command runs as given, as in `%s`)"
              % (e.filename or " ".join(args.command), e.strerror or e, HOW_TO_LAUNCH), file=sys.stderr)
        return 127
    except BaseException:
        job.stop()
        raise
    if args.report:
        with open(args.report, "w") as f:
            json.dump([{"role": p.role, "rank": p.rank, "host": p.host, "exit_code": p.popen.returncode,
                        "wall_seconds": p.wall_seconds, "cpu_seconds": p.cpu_seconds} for p in job.processes], f)
    return code


if __name__ == "__main__":
    sys.exit(main())
