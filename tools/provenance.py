"""What made a result: the commit (and whether the tree had changes beside it), the date, the machine and
the command, recorded with every result a tool writes, so that a row can be traced to the code it ran."""
import hashlib
import os
import platform
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _git(*args):
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def cpu_model():
    """The CPU's model name (/proc/cpuinfo), or the platform's processor string."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


CODE_FOLDERS = ("mxnet_gc", "src_cpp", "examples")  # what a training run executes of this repository


def code_hash(root=ROOT):
    """A digest of the code a run executes (the sources under CODE_FOLDERS, by path and content; built
    libraries and caches excluded): two runs of the same hash ran the same code, committed or not."""
    digest = hashlib.sha256()
    for folder in CODE_FOLDERS:
        for directory, dirs, files in os.walk(os.path.join(root, folder)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".cc", ".h", ".def")):
                    path = os.path.join(directory, name)
                    digest.update(os.path.relpath(path, root).encode() + b"\0")
                    with open(path, "rb") as f:
                        digest.update(f.read() + b"\0")
    return digest.hexdigest()[:16]


def record(argv=None):
    """{commit, clean, code, date, machine, command} of this run (``argv``: the command, by default this
    process's; ``code``: code_hash())."""
    return {"commit": _git("rev-parse", "--short", "HEAD") or "unknown", "code": code_hash(),
            "clean": _git("status", "--porcelain", "--untracked-files=no") == "",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": "%d cores, %s" % (os.cpu_count(), cpu_model()),
            "command": " ".join(shlex.quote(a) for a in (argv or ["python"] + sys.argv))}


def line(p):
    """A record as one line of text, for a table's heading."""
    return "commit %s%s, %s, %s: `%s`" % (p["commit"], "" if p["clean"] else " (with uncommitted changes)",
                                          p["date"], p["machine"], p["command"])
