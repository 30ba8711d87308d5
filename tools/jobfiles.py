"""What the benchmark tools share: a job's workers each write their measurements to OUT/rank<r>.json
for the driver to read, and the driver starts them through tools/launch.py (on loopback here, or on
tools/netns_cluster.py's shaped hosts)."""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(ROOT, "tools", "launch.py")


def add_worker_arguments(parser, *names):
    """The hidden options of a tool's worker mode: --worker, --out and ``names`` (strings)."""
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    for name in names:
        parser.add_argument(name, help=argparse.SUPPRESS)


def worker_command(module, **options):
    """The command line of the worker mode of the tool ``module`` (such as 'tools.bench_network'), with
    ``options`` (--name value each); it runs from the source tree's root."""
    argv = [sys.executable, "-m", module, "--worker"]
    for name, value in options.items():
        argv += ["--" + name.replace("_", "-"), str(value)]
    return argv


def save(out, rank, result):
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump(result, f)


def load_json(path):
    with open(path) as f:
        return json.load(f)


def load(out, workers):
    """Every rank's result, in rank order."""
    return [load_json(os.path.join(out, "rank%d.json" % r)) for r in range(workers)]


def local_job(worker_argv, out, workers, servers=1, env=(), mxnet_servers=False, timeout=900, what="job"):
    """Runs a job on loopback (tools/launch.py) whose workers save to ``out``; returns their results."""
    argv = [sys.executable, LAUNCH, "-n", str(workers), "-s", str(servers), "--timeout", str(timeout)]
    if mxnet_servers:
        argv.append("--mxnet-servers")
    for item in env:
        argv += ["--env", item]
    proc = subprocess.run(argv + worker_argv + ["--out", out], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("%s failed:\n%s\n%s" % (what, proc.stdout[-3000:], proc.stderr[-3000:]))
    return load(out, workers)


def read_section_page(path, name):
    """The page ``path``, refused unless it has ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` (a
    benchmark checks this before it runs, not after)."""
    begin, end = "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name
    with open(path) as f:
        doc = f.read()
    if begin not in doc or end not in doc:
        raise SystemExit("%s has no %s ... %s markers" % (path, begin, end))
    return doc


def write_section(path, name, text):
    """Replaces the text between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` in the page ``path`` (the
    tools that write a page's measured section)."""
    doc = read_section_page(path, name)
    begin, end = "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name
    head, rest = doc.split(begin, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + text.rstrip("\n") + "\n" + end + rest.split(end, 1)[1])
