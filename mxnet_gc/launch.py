#!/usr/bin/env python
"""Starts a distributed MXNet job: one scheduler, S servers (mxnet_gc's server) and W workers.

    python -m mxnet_gc.launch -n WORKERS -s SERVERS [--launcher local|ssh] [-H HOSTFILE] COMMAND [ARGS...]

(also installed as the command ``mxnet-gc-launch``; ``python tools/launch.py`` in a source tree).  This
module reads the command line; launch_job.py starts and watches the job's processes, launch_processes.py
streams their output and ends them (with a watchdog if the launcher dies).

Every process gets the DMLC_* environment of ps-lite.  The launcher prints each process's output
with a [role rank] prefix, and exits 0 only if every worker exited 0: at once when no worker used a dist
kvstore, else once servers and scheduler exit (they do when the workers' stores end the job; after 5
seconds the launcher ends them).  If any process dies (or
--timeout passes, or Ctrl-C), it ends all the others within a few seconds, says which one failed and
shows its last lines of output.  No process of the job outlives it (nor one a process started in a session
of its own: each carries the job's id, MXNET_GC_JOB, in its environment), even when it is killed with
SIGKILL: a watchdog process ends the job then.  Every process gets the job's secret (MXNET_GC_JOB_SECRET,
or with ssh the file MXNET_GC_JOB_SECRET_FILE), for them to authenticate each other.
(`python -m mxnet_gc.launch` and tools/launch.py import no MXNet: the launcher starts at once.)

--launcher ssh starts each process with ``ssh HOST 'cd CWD && env VARS COMMAND'`` on the hosts of
the hostfile (one host per line, HOST or HOST:SSH_PORT; the scheduler on the first, then servers and
workers round-robin).  The hosts must share the code at the same path and reach each other's addresses.
Before it starts them, one ssh per host writes the job's secret, from ssh's stdin, to
~/.mxnet_gc/job-ID.secret (mode 0600; removed at the end of the job): the secret is on no command line.
MXNet's launcher command lines run unchanged or are refused with what to use instead (docs/launcher.md).
"""
import argparse
import json
import os
import re
import shutil
import signal
import sys

from .launch_job import Job, variables

HOW_TO_LAUNCH = "python -m mxnet_gc.launch -n W -s S python your_script.py"  # (for the stores' messages too)
EXAMPLE = """example: 2 workers and 1 server on this machine, the script's own arguments after it:

    python -m mxnet_gc.launch -n 2 -s 1 python train.py --epochs 1

Horovod scripts (kvstore='horovod', hvd.init()) are started with horovodrun instead:
    horovodrun -np 2 python train.py"""
REFUSED_LAUNCHERS = {  # MXNet's (dmlc-tracker's) other launchers, and what to use instead
    "mpi": "not supported; use ssh with a hostfile (-H), or Horovod (horovodrun) for the ring transport",
    "sge": "not supported; start the job from an SGE script with --launcher ssh -H $PE_HOSTFILE-style hosts",
    "yarn": "not supported; use --launcher ssh with a hostfile (-H)",
}


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
    args = parse_args(sys.argv[1:] if argv is None else argv)
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
