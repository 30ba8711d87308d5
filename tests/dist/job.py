"""Runs a real distributed job through tools/launch.py, and what its workers and the tests share.

A job is described by a JSON spec; each worker (tests/dist/worker.py) runs it and saves every value it
pulled to OUT/rank<r>.npz; the tests compare those with an independent numpy simulation.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LAUNCH = os.path.join(ROOT, "tools", "launch.py")
JOB_TIMEOUT = 240  # seconds; the launcher ends the job, the test's own timeout is a second guard


def gradient(seed, rank, step, key_index, shape, scale, nonfinite=None, grid=None):
    """The gradient a worker pushes: deterministic in (seed, rank, step, key); ``nonfinite``: [[rank, step, key
    index, flat position, 'nan' or 'inf'], ...] puts those values in; ``grid``: rounded to multiples of
    1/grid (a power of two), so that a sum of 3 or more is exact in any order."""
    rng = np.random.default_rng([seed, rank, step, key_index])
    g = (rng.standard_normal(shape) * scale).astype(np.float32)
    if grid:
        g = (np.round(g * grid) / grid).astype(np.float32)
    for r, s, k, position, value in nonfinite or ():
        if (r, s, k) == (rank, step, key_index):
            g.reshape(-1)[position] = float(value)
    return g


def initial_value(seed, key_index, shape):
    rng = np.random.default_rng([seed, 10_000 + key_index])
    return rng.standard_normal(shape).astype(np.float32)


def every_codec():
    """{type: params} of every registered codec with its class's ``example`` parameters: the tests that run
    every codec take them from here, so that a new codec is run by them with no change."""
    import mxnet_gc
    return {t: dict(mxnet_gc.codecs.codec_class(t).example, type=t) for t in mxnet_gc.codecs.available()}


def from_the_first_step(compression):
    """A test's compression params: its codec from the first step (the stores' default is a dense warm-up)
    and float32 pulls (4bit's default compresses them), unless they give 'warmup_steps' or 'compressed_pull'
    (MXNet's own types and 'lgc' take neither)."""
    if compression and compression["type"] not in ("none", "2bit", "lgc"):
        return dict({"warmup_steps": 0, "compressed_pull": False}, **compression)
    return compression


def renamed(scenario, i):
    """The scenario with keys of its own: int keys moved by 1000 (i + 1), str keys prefixed with 's<i>.';
    in its keys, groups and 4bit's per_key levels."""
    def rename(key):
        return key + 1000 * (i + 1) if isinstance(key, int) else "s%d.%s" % (i, key)

    wire = dict(scenario, keys=[[rename(k), s] for k, s in scenario["keys"]])
    if scenario.get("groups"):
        wire["groups"] = [[rename(k) for k in g] for g in scenario["groups"]]
    if (scenario.get("compression") or {}).get("per_key"):
        per_key = {rename(int(k) if k.isdigit() else k): v for k, v in scenario["compression"]["per_key"].items()}
        wire["compression"] = dict(scenario["compression"], per_key=per_key)
    return wire


def each_scenario(spec, run):
    """What a test worker saves of ``spec``: ``run(spec as sent, spec with the names to save under)`` of each
    of its scenarios (renamed; saved as 'i:<name>'), then of the spec itself if it gives keys."""
    saved = {}
    for i, scenario in enumerate(spec.get("scenarios", [])):
        saved.update(("%d:%s" % (i, n), a) for n, a in run(renamed(scenario, i), scenario).items())
    if "keys" in spec:
        saved.update(run(spec, spec))
    return saved


def run_scenarios(tmp_path, specs, workers, servers, env=()):
    """One job that runs ``specs`` one after the other on the same store (worker.py's scenarios); returns
    [{rank: {name: array}}], one per spec."""
    _, results = run_job(tmp_path, {"scenarios": specs}, workers, servers, env)
    return split_scenarios(results, len(specs))


def split_scenarios(results, count):
    """{rank: {'i:name': array}} as [{rank: {name: array}}], one per scenario."""
    return [{rank: {n.split(":", 1)[1]: a for n, a in saved.items() if n.startswith("%d:" % i)}
             for rank, saved in results.items()} for i in range(count)]


# Who failed first: horovodrun names "Process name: N" and prefixes its lines "[N]<stderr>:"; mxnet_gc's
# launcher says "job failed: worker N (pid ..." and prefixes "[worker N] ".
FIRST_FAILED = [(re.compile(r"Process name: (\d+)"), "[%s]<"), (re.compile(r"job failed: (\w+(?: \d+)?) \("), "[%s] ")]


def output_of(proc, tail=3000):
    """What a failed job printed, for an assertion's message: the last lines of the process that failed
    first (its own, which the tails of a job of several processes often miss) and the tails of both streams."""
    both = proc.stdout + proc.stderr
    own = []
    for pattern, prefix in FIRST_FAILED:
        found = pattern.search(both)
        if found:
            own = [line for line in both.splitlines() if line.startswith(prefix % found.group(1))][-60:]
            break
    first = "the first process to fail printed last:\n%s\n\n" % "\n".join(own) if own else ""
    return first + "stdout's end:\n%s\nstderr's end:\n%s" % (proc.stdout[-tail:], proc.stderr[-tail:])


def run_job(tmp_path, spec, workers, servers, env=(), expect_success=True, timeout=JOB_TIMEOUT):
    """Launches the job; returns (completed process, {rank: {name: array}})."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    spec = dict(spec, out=str(out))
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    argv = [sys.executable, LAUNCH, "-n", str(workers), "-s", str(servers), "--timeout", str(timeout), "-v"]
    for item in env:
        argv += ["--env", item]
    argv += [sys.executable, os.path.join(HERE, "worker.py"), str(spec_path)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout + 60)
    if expect_success:
        assert proc.returncode == 0, output_of(proc, tail=4000)
    results = {}
    for name in os.listdir(out):
        if name.startswith("rank") and name.endswith(".npz"):
            with np.load(out / name) as data:
                results[int(name[4:-4])] = dict(data)
    return proc, results
