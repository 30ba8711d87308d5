"""A job of the launcher (launch.py): its scheduler, servers and workers started with ps-lite's
environment and the job's secret, on this host or through ssh on a hostfile's hosts, watched until the
workers end, and ended as a whole."""
import os
import re
import secrets
import shlex
import socket
import subprocess
import sys
import time
import uuid

from .launch_processes import END_LINE, JOB_VARIABLE, RANK_LINE, SSH_TIMEOUT, Process, Watchdog, end_job

# ps-lite's scheduler through libmxnet's C API, run by its path (it imports neither mxnet nor mxnet_gc)
SCHEDULER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kvstore", "ps", "scheduler.py")
SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kvstore", "ps", "server_start.py")  # (without scipy)
# The job's secret, for its processes to authenticate each other: the token itself with --launcher local
# (or the launcher's own, when set), or with --launcher ssh the file that holds it on each host (a command
# line is readable by every user of its host; the environment of a process only by its user).
SECRET_VARIABLE = "MXNET_GC_JOB_SECRET"
SECRET_FILE_VARIABLE = "MXNET_GC_JOB_SECRET_FILE"
SECRET_DIR = "$HOME/.mxnet_gc"  # (expanded on each host, in double quotes)
SERVER_EXIT_GRACE = 5.0  # seconds servers and scheduler get to exit after the workers' stores ended the job
EARLY_EXIT_GRACE = 10.0  # seconds workers get to exit after a server or the scheduler did
FAILURE_GRACE = 2.0  # seconds the other workers get to exit (and print why) after a worker failed
LEFT_GRACE = 5.0  # seconds the other workers get to exit after one exited 0 before the end of the job


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
