#!/usr/bin/env python
"""The fault matrix: unusual but legal uses and faults, each a real job, with what the user sees and a
verdict (docs/reliability.md).

    python -m tools.fault_matrix [--short] [--case NAME ...] [--json FILE] [--markdown docs/reliability.md]

Every case starts real processes (mxnet_gc's launcher: scheduler, servers, workers; or horovodrun
--gloo) through tools/fault_worker.py, with timeouts, and checks the outcome with numpy: an exact
result (every pulled sum equals the sum of what the workers pushed) or a clear error on every worker
and a non-zero exit, within 60 seconds, with no process of the job left running.  ``--short`` runs each case in its smallest form (the tests
run it); the full matrix adds every compression type and 3 workers.  Exits 1 unless every verdict is
"ok".
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
from tools.jobfiles import write_section
from tools.planted import Planted
from tools import horovodrun as hvdrun, provenance

ROOT = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "fault_worker.py")
LIMIT = 60.0  # seconds a faulty job may take to end with its error
ENV = {"MXNET_GC_COLLECTIVE_TIMEOUT": "8"}  # the horovod store's wait for collectives, shortened

PS_TYPES = ["none", "gc_2bit", "4bit", "layerwise_topk", "lgc"]  # (MXNet's 2bit: a job of its own, see below)
RING_TYPES = ["none", "gc_2bit", "4bit", "layerwise_topk", "lgc"]
SHORT_TYPES = ["none", "4bit", "lgc"]  # the short form's


class Job:
    """One finished job: its exit code, output, duration, and what each worker saved."""

    def __init__(self, proc, seconds, out):
        self.code, self.output, self.seconds = proc.returncode, proc.stdout + proc.stderr, seconds
        self.saved = {}
        for name in sorted(os.listdir(out)):
            if name.startswith("rank") and name.endswith(".npz"):
                with np.load(os.path.join(out, name)) as data:
                    self.saved[int(name[4:-4])] = dict(data)

    def error_line(self):
        """The first error a worker or the launcher printed (what the user reads first)."""
        for line in self.output.splitlines():
            found = re.search(r"(\w*(?:Error|CorruptCheckpoint): .*|job failed: .*|mxnet_gc\.launch: cannot .*)", line)
            if found:
                return found.group(1).strip()
        return "(no error printed)"

    def errors_on(self, text, ranks):
        """Whether the workers of ``ranks`` each printed ``text`` (the launcher labels lines [worker r],
        horovodrun [r])."""
        lines = self.output.splitlines()
        return all(any(text in line and (("[worker %d]" % r) in line or line.startswith("[%d]" % r))
                       for line in lines) for r in ranks)


def run(case, settings, workers=2, servers=1, out=None, env=None, launcher_args=()):
    """Runs tools/fault_worker.py CASE on ``settings["store"]``'s transport; returns the Job."""
    out = out or tempfile.mkdtemp(prefix="mxgc-fault-")
    args = [sys.executable, WORKER, case, json.dumps(settings), out]
    full_env = dict(os.environ, **ENV, **(env or {}), MXGC_FAULT_JOB=out,  # (a tag every process inherits)
                    MXNET_GC_CHECKPOINT_DIR=out)
    if settings.get("store") == "horovod":
        argv = hvdrun.ARGV + ["-np", str(workers), "-H", "localhost:%d" % workers, "--gloo", "--start-timeout", "30"]
    else:
        argv = [sys.executable, os.path.join(HERE, "launch.py"), "-n", str(workers), "-s", str(servers),
                "--timeout", str(int(2 * LIMIT))] + list(launcher_args)
    start = time.time()
    proc = subprocess.run(argv + args, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=3 * LIMIT)
    job = Job(proc, time.time() - start, out)
    job.left = left_running(out)
    return job


def left_running(out):
    """PIDs of the job's processes still alive a moment after it ended (their environment holds its tag),
    which are then killed: none may be left."""
    time.sleep(0.5)
    left, tag = [], ("MXGC_FAULT_JOB=%s\0" % out).encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if tag in f.read():
                    left.append(int(pid))
        except OSError:
            pass
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


def verdict(ok, seen, *jobs):
    """("ok" or "WRONG", what the user sees); WRONG too when a process of ``jobs`` was left running."""
    left = [pid for job in jobs for pid in job.left]
    if left:
        return "WRONG", "%s; processes left running: %s" % (seen, left)
    return ("ok" if ok else "WRONG"), seen


# ---- the cases: each returns (verdict, what the user sees) ----

_KEYS_JOBS = {}


def keys_jobs(store, types, workers=2):
    """The jobs of exact_sums (run once per process and shared): one for 'lgc' ('lgc' codes every key of its
    store: a job of its own), one for the other types that then also switches the compression after pushes
    (compression_switch reads it; not after MXNet's own 2bit, which cannot be switched off)."""
    at = (store, tuple(types), workers)
    if at not in _KEYS_JOBS:
        others = [t for t in types if t != "lgc"]
        _KEYS_JOBS[at] = [run("keys", {"store": store, "compressions": group, "steps": 3,
                                       "switch": group is others and "2bit" not in group},
                              workers=workers) for group in (others, ["lgc"] if "lgc" in types else []) if group]
    return _KEYS_JOBS[at]


def exact_sums(store, types, workers=2):
    """Workers list their keys in different orders (str and int keys, same and different sizes, in one init
    call each); every pulled sum must equal the sum of every worker's pushes, for every compression."""
    jobs = keys_jobs(store, types, workers)
    failed = [j for j in jobs if j.code != 0]
    if failed:
        return verdict(False, failed[0].error_line(), *jobs)
    job = jobs[0]
    for other in jobs[1:]:
        for r in job.saved:
            job.saved[r].update(other.saved[r])
    wrong, checked = [], 0
    for name in types:
        pushed = {}
        for r, saved in job.saved.items():
            for field, value in saved.items():
                if field.startswith(name + "/") and field.endswith("/pushed"):
                    pushed[field[:-len("/pushed")]] = pushed.get(field[:-len("/pushed")], 0) + value
        for field, total in pushed.items():
            for r, saved in job.saved.items():
                checked += 1
                if not np.array_equal(saved[field + "/pulled"], total):
                    wrong.append("%s rank %d" % (field, r))
        if name == "lgc" and len({str(saved["lgc/coded"]) for saved in job.saved.values()}) != 1:
            wrong.append("lgc: the workers coded different keys")
    return verdict(not wrong and len(job.saved) == workers and checked > 0,
                   "exact sums (%d pulls checked, %s)" % (checked, ", ".join(types)) if not wrong
                   else "wrong: " + "; ".join(wrong[:4]), *jobs)


def clear_error(case, settings, text, workers=2, servers=1, on=None, **kw):
    """The job must fail (non-zero exit) within LIMIT seconds, every worker (or those of ``on``) printing
    ``text``."""
    job = run(case, settings, workers=workers, servers=servers, **kw)
    every = job.errors_on(text, range(workers) if on is None else on)
    return verdict(job.code != 0 and every and job.seconds < LIMIT,
                   "%s (exit %d, %.0f s%s)" % (job.error_line(), job.code, job.seconds,
                                              "" if every else ", NOT on every worker"), job)


def missing_key(compression):
    return clear_error("missing", {"store": "horovod", "compression": compression},
                       "key(s) ['k']: not pushed by rank(s) [1]")


def missing_key_once():
    """Rank 1 skips key 'k' at step 1: the worker whose pushes the server did not complete names the key
    (or, when the other's next push completed the round first, says that no round waits; or, when rank 1
    has already ended, that it ended with one round fewer than rank 0 pushed)."""
    job = run("missing", {"store": "dist_sync", "once": True})
    said = "pushed other rounds than server 0 completed" in job.output or (
        "ended its part of the job" in job.output and "rounds where this worker pushed" in job.output)
    return verdict(job.code != 0 and said and job.seconds < LIMIT,
                   "%s (exit %d, %.0f s)" % (job.error_line(), job.code, job.seconds), job)


def worker_leaves():
    job = run("leave", {"store": "dist_sync"})
    seen = "%s (exit %d, %.0f s)" % (job.error_line(), job.code, job.seconds)
    return verdict(job.code != 0 and "before the end of the job" in job.output and job.seconds < LIMIT, seen, job)


def compression_switch(store):
    """4bit leaves a residual of 0.3 - 0.25 per value; set to none, the next push sends it (in key-order's
    job, which runs this after its sections)."""
    job = keys_jobs(store, SHORT_TYPES)[0]
    if job.code != 0:
        return verdict(False, job.error_line(), job)
    g = np.float32(0.3)
    owed = g - np.float32(0.25)
    want = [np.full(6, 2 * np.float32(0.25)), np.full(6, 2 * owed), np.zeros(6)]
    ok = all(np.array_equal(s["switch/w/%d" % i], w) for s in job.saved.values() for i, w in enumerate(want))
    return verdict(ok and len(job.saved) == 2, "the residual is sent with the next push (%s per value, exact)" % (2 * owed)
                   if ok else "pulled %s" % [job.saved[0]["switch/w/%d" % i][0] for i in range(3)], job)


def checkpoint_servers(kind):
    """A checkpoint saved with 2 servers, loaded by a job with 1: refused at load, naming the cause."""
    out = tempfile.mkdtemp(prefix="mxgc-fault-")
    saved = run("save", {"kind": kind}, servers=2, out=out)
    if saved.code != 0:
        return verdict(False, "the saving job failed: " + saved.error_line(), saved)
    text = "resume with 2 servers" if kind == "server-optimizer" else "resume on as many servers"
    job = run("load", {"kind": kind}, servers=1, out=out)
    every = job.errors_on(text, range(2))
    return verdict(job.code != 0 and every and job.seconds < LIMIT,
                   "%s (exit %d, %.0f s)" % (job.error_line(), job.code, job.seconds), saved, job)


def planted_in_checkpoint(kind, every_file=True):
    """A checkpoint whose files, one at a time, hold a pickle that would create a file when loaded, their
    checksums and the manifest's digests rewritten (as whoever can edit the files can): each load is refused,
    naming the file, and nothing runs.  Without ``every_file``, one file of each kind (rank 0's, server 0's)."""
    folder = tempfile.mkdtemp(prefix="mxgc-fault-")
    saved = run("save", {"kind": kind}, out=folder)
    if saved.code != 0:
        return verdict(False, "the saving job failed: " + saved.error_line(), saved)
    manifest = os.path.join(folder, "ckpt.trainer.json")
    with open(manifest) as f:
        names = sorted(json.load(f)["checkpoints"][0]["files"]) + [os.path.basename(manifest)]
    if not every_file:
        names = list({re.sub(r"(rank|server)\d+", r"\1", n): n for n in reversed(names)}.values())[::-1]
    jobs, seen, ok, first = [saved], [], True, ""
    for name in names:
        out = tempfile.mkdtemp(prefix="mxgc-fault-")
        for f in os.listdir(folder):
            if f.startswith("ckpt"):
                shutil.copy(os.path.join(folder, f), out)
        planted = Planted(os.path.join(out, "ran"))
        plant(out, name, planted.pickle())
        job = run("load", {"kind": kind}, out=out)
        jobs.append(job)
        refused = job.code != 0 and name in job.output and not planted.ran() and job.seconds < LIMIT
        ok = ok and refused
        seen.append("%s%s" % (name, " (THE PICKLE RAN)" if planted.ran() else "" if refused else " (not refused)"))
        first = first if len(seen) > 1 else job.error_line()
    return verdict(ok, "%d files (%s), each refused naming it, nothing run; the first: %s"
                   % (len(names), ", ".join(seen), first), *jobs)


def plant(folder, name, data):
    """Writes ``data`` as checkpoint file ``name`` with a matching checksum file and manifest digest."""
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)
    with open(os.path.join(folder, name + ".sha256"), "w") as f:
        f.write("%s  %s\n" % (digest, name))
    manifest = os.path.join(folder, "ckpt.trainer.json")
    if name != os.path.basename(manifest):
        with open(manifest) as f:
            entries = json.load(f)
        entries["checkpoints"][0]["files"][name] = digest
        plant(folder, os.path.basename(manifest), json.dumps(entries).encode())


def stranger_worker():
    """A process without the job's secret in a worker's place sends the servers an optimizer as MXNet
    pickles it, a command with a forged signature and a bare pickle: each refused, nothing run, and the
    job ends when its place's worker never joins (MXNET_GC_JOIN_TIMEOUT, 5 s here)."""
    out = tempfile.mkdtemp(prefix="mxgc-fault-")
    job = run("stranger", {"store": "dist_sync"}, out=out, env={"MXNET_GC_JOIN_TIMEOUT": "5"})
    refused = job.output.count("refused a command (not run)") == 2 and "not an mxnet_gc command" in job.output
    ended = "did not join with the job's secret within 5 s" in job.output
    ran = Planted(os.path.join(out, "ran")).ran()
    said = [line.split("ERROR ", 1)[-1] for line in job.output.splitlines()
            if "refused a command" in line or "did not join" in line]
    return verdict(job.code != 0 and refused and ended and not ran and job.seconds < LIMIT,
                   "server 0: %s (exit %d, %.0f s); %s" % (" / ".join(said[:1] + said[-1:]), job.code, job.seconds,
                                                          "the pickle RAN" if ran else "nothing ran"), job)


def stranger_server():
    """A server with another secret (a process outside the job in a server's place): the workers refuse it
    at their first contact, naming it, and the job ends."""
    job = run("missing", {"store": "dist_sync"}, launcher_args=["--env-server", "MXNET_GC_JOB_SECRET=" + "0" * 64])
    text = "server(s) [0] do not hold this job's secret"
    return verdict(job.code != 0 and job.errors_on(text, range(2)) and job.seconds < LIMIT,
                   "%s (exit %d, %.0f s)" % (job.error_line(), job.code, job.seconds), job)


def inf_in_lgc(store):
    """An inf in one worker's gradient of the coded tensor in each phase of 'lgc': every pulled value of
    every step finite (tests/test_dist_lgc.py checks the values against a reference)."""
    job = run("inf", {"store": store})
    if job.code != 0:
        return verdict(False, job.error_line(), job)
    bad = ["%s rank %d" % (f, r) for r, s in job.saved.items() for f, v in s.items() if f != "coded"
           and not np.isfinite(v).all()]
    warned = "key 'last': 1 (dropped: not sent, any residual unchanged there)" in job.output
    coded = [json.loads(str(s["coded"])) for s in job.saved.values()]
    return verdict(not bad and warned and coded[0] == coded[1] == ["last"] and len(job.saved) == 2,
                   "every pulled value finite, 10 steps, 6 infs; RuntimeWarning: ... key 'last': 1 (dropped: not "
                   "sent, any residual unchanged there)" if not bad else "non-finite: " + "; ".join(bad[:4]), job)


def missing_command():
    start = time.time()
    proc = subprocess.run([sys.executable, os.path.join(HERE, "launch.py"), "-n", "1", "-s", "1", "/no/such/command"],
                          capture_output=True, text=True, timeout=LIMIT)
    lines = proc.stderr.strip().splitlines()
    return verdict(proc.returncode == 127 and len(lines) == 1 and "Traceback" not in proc.stderr,
                   "%s (exit %d, %.0f s)" % (lines[-1] if lines else "(nothing)", proc.returncode, time.time() - start))


KEYS_TEXT = "the workers set different keys in an init call"
CASES = [  # (name, fault, short form, full form)
    ("key-order-ps", "workers init the same keys in different orders, parameter server",
     lambda: exact_sums("dist_sync", SHORT_TYPES), lambda: exact_sums("dist_sync", PS_TYPES)),
    ("key-order-ps-mxnet-2bit", "the same with MXNet's own 2bit", None, lambda: exact_sums("dist_sync", ["2bit"])),
    ("key-order-ps-3-workers", "the same with 3 workers", None,
     lambda: exact_sums("dist_sync", ["4bit", "layerwise_topk"], workers=3)),
    ("key-order-horovod", "workers init the same keys in different orders, Horovod",
     lambda: exact_sums("horovod", SHORT_TYPES), lambda: exact_sums("horovod", RING_TYPES)),
    ("key-order-horovod-3-workers", "the same with 3 workers", None,
     lambda: exact_sums("horovod", ["4bit", "layerwise_topk"], workers=3)),
    ("init-calls-ps", "one init call per key, in different orders, parameter server",
     lambda: clear_error("calls", {"store": "dist_sync"}, KEYS_TEXT), None),
    ("init-calls-horovod", "the same on Horovod", lambda: clear_error("calls", {"store": "horovod"}, KEYS_TEXT), None),
    ("shapes-ps", "a key of shape (10, 10) on rank 0, (10, 11) on rank 1, parameter server",
     lambda: clear_error("shapes", {"store": "dist_sync", "shape": [10, 11]}, '["w", [10, 10]] / ["w", [10, 11]]'),
     None),
    ("shapes-horovod", "the same on Horovod",
     lambda: clear_error("shapes", {"store": "horovod", "shape": [10, 11]}, '["w", [10, 10]] / ["w", [10, 11]]'),
     None),
    ("shapes-horovod-same-size", "(10, 10) against (20, 5) on Horovod",
     lambda: clear_error("shapes", {"store": "horovod", "shape": [20, 5]}, '["w", [10, 10]] / ["w", [20, 5]]'), None),
    ("missing-key-horovod-4bit", "rank 1 never pushes key 'k' (4bit), Horovod", lambda: missing_key("4bit"), None),
    ("missing-key-horovod-none", "the same uncompressed", lambda: missing_key("none"), None),
    ("missing-key-horovod-4bit-cpull", "the same with 4bit by the compressed allreduce ('compressed_pull')",
     lambda: missing_key("4bit-cpull"), None),
    ("missing-key-once-ps", "rank 1 does not push key 'k' at step 1 (pushes it at the others), parameter server",
     missing_key_once, None),
    ("double-push-ps", "rank 1 pushes key 'a' twice before its pull, parameter server",
     lambda: clear_error("double", {"store": "dist_sync"}, "push of key 'a' twice before its pull", on=[1]), None),
    ("double-push-horovod", "the same on Horovod",
     lambda: clear_error("double", {"store": "horovod"}, "push of key 'a' twice before its pull", on=[1]), None),
    ("skipped-step-ps", "rank 1 pulls key 'a' without pushing it at step 1, parameter server",
     lambda: clear_error("skip", {"store": "dist_sync"}, "pull of key 'a' without a push since its last pull", on=[1]),
     None),
    ("skipped-step-horovod", "the same on Horovod",
     lambda: clear_error("skip", {"store": "horovod"}, "pull of key 'a' without a push since its last pull", on=[1]),
     None),
    ("compression-one-worker-ps", "only rank 0 sets a compression (4bit) before init, parameter server",
     lambda: clear_error("compress-one", {"store": "dist_sync"}, "the workers made different collective calls"), None),
    ("worker-leaves", "a worker exits 0 at its start while the other pushes, parameter server", worker_leaves, None),
    ("worker-ends", "a worker exits 0 (its store ends in order) after its first step, parameter server",
     lambda: clear_error("ends", {"store": "dist_sync"}, "worker 1 ended its part of the job", on=[0]), None),
    ("compression-switch-ps", "4bit, then set_gradient_compression({'type': 'none'}) after pushes",
     lambda: compression_switch("dist_sync"), None),
    ("compression-switch-horovod", "the same on Horovod", lambda: compression_switch("horovod"), None),
    ("checkpoint-servers", "a checkpoint (optimizer on 2 servers) resumed with 1 server",
     lambda: checkpoint_servers("server-optimizer"), None),
    ("checkpoint-servers-lgc", "an 'lgc' checkpoint of 2 servers resumed with 1", lambda: checkpoint_servers("lgc"),
     None),
    ("pickle-in-checkpoint", "a pickle planted in each file of a checkpoint (optimizer on the servers), checksums "
     "and manifest rewritten (short form: one file of each kind)",
     lambda: planted_in_checkpoint("server-optimizer", every_file=False),
     lambda: planted_in_checkpoint("server-optimizer")),
    ("pickle-in-checkpoint-lgc", "the same for an 'lgc' checkpoint (optimizer on the workers, the servers' "
     "autoencoders)", lambda: planted_in_checkpoint("lgc", every_file=False), lambda: planted_in_checkpoint("lgc")),
    ("stranger-worker", "a process without the job's secret in a worker's place sends pickles and forged commands",
     stranger_worker, None),
    ("stranger-server", "a server with another secret than the workers'", stranger_server, None),
    ("inf-lgc-ps", "an inf in a gradient in each phase of 'lgc' (dense, ramp, train, lgc; leader and not), "
     "parameter server", None, lambda: inf_in_lgc("dist_sync")),
    ("inf-lgc-horovod", "the same on Horovod (LGC-RAR)", None, lambda: inf_in_lgc("horovod")),
    ("missing-command", "the launcher's worker command does not exist", missing_command, None),
]


# tests that check a case more closely than the matrix's own run (the short form leaves these cases to them)
MORE_TESTS = {
    "inf-lgc-ps": "tests/test_dist_lgc.py::test_an_inf_in_any_phase_is_dropped_and_poisons_nothing (every value "
                  "against the numpy reference)",
    "inf-lgc-horovod": "tests/test_horovod_lgc.py::test_an_inf_in_any_phase_is_dropped_and_poisons_nothing",
}


def markdown(rows, made):
    """The table of docs/reliability.md's fault matrix, made from the rows of a run (``made``: its provenance)."""
    short = {name for name, _, form, _ in CASES if form is not None}
    lines = [provenance.line(made) + ":", "",
             "| case | fault | what the user sees | verdict | seconds | test |", "|---|---|---|---|---:|---|"]
    for r in rows:
        tests = ["`tests/test_fault_matrix.py` (`[%s]`)" % r["case"]] if r["case"] in short else ["the full matrix"]
        tests += ["`%s`" % MORE_TESTS[r["case"]]] if r["case"] in MORE_TESTS else []
        seen = re.sub(r"/tmp/\S+", "DIR", r["seen"]).replace("|", "/")
        lines.append("| %s | %s | %s | %s | %.0f | %s |" % (r["case"], r["fault"], seen, r["verdict"], r["seconds"],
                                                           "; ".join(tests)))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="each case in its smallest form (the tests')")
    parser.add_argument("--case", nargs="*", help="only these cases (by name)")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--markdown", help="rewrite the fault matrix section of this file (docs/reliability.md)")
    parser.add_argument("--list", action="store_true", help="print the names of the cases (of --short) and exit")
    args = parser.parse_args(argv)
    names = [c[0] for c in CASES]
    if args.list:
        print("\n".join(name for name, _, short, full in CASES if short is not None or not args.short))
        return 0
    unknown = sorted(set(args.case or []) - set(names))
    if unknown:
        parser.error("unknown case(s) %s; known: %s" % (", ".join(unknown), ", ".join(names)))
    rows = []
    print("| case | fault | what the user sees | verdict | seconds |\n|---|---|---|---|---:|", flush=True)
    for name, fault, short, full in CASES:
        form = short if args.short or full is None else full
        if form is None or (args.case and name not in args.case):
            continue
        start = time.time()
        ok, seen = form()
        rows.append({"case": name, "fault": fault, "seen": seen, "verdict": ok, "seconds": round(time.time() - start, 1)})
        print("| %s | %s | %s | %s | %.0f |" % (name, fault, seen.replace("|", "/"), ok, rows[-1]["seconds"]), flush=True)
    made = provenance.record(["python", "-m", "tools.fault_matrix"] + (argv if argv is not None else sys.argv[1:]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"provenance": made, "rows": rows}, f, indent=1)
    if args.markdown:
        write_section(args.markdown, "fault_matrix", markdown(rows, made))
    return 0 if all(r["verdict"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
