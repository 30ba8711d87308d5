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


def data_note(read):
    """The line under a table naming its data: per source file, how many rows, the commit(s) and dates.  Rows
    of more than one version of the code (by their code hash, or by their commit where they record none) are
    said to be so, since their differences are then not only the methods'; rows from before provenance was
    recorded carry the commit that first held them (record), and are said to."""
    parts = []
    for source, provs in read.items():
        versions = {p.get("code") or p.get("commit") for p in provs}
        commits = sorted({p.get("commit") or "unknown" for p in provs})
        dates = sorted({(p.get("date") or "unknown")[:10] for p in provs})
        when = dates[0] if len(dates) == 1 else "%s to %s" % (dates[0], dates[-1])
        early = any(p.get("recorded") for p in provs)
        if len(versions) == 1:
            parts.append("%s, %d rows: commit %s, %s%s" % (source, len(provs), commits[0], when,
                                                            " (the commit that first held them)" * early))
        else:
            shown = ", ".join(commits[:4]) + (" and %d more" % (len(commits) - 4) if len(commits) > 4 else "")
            parts.append("%s, %d rows of %d %s (%s; %s): rows that %s different code" % (
                source, len(provs), len(versions), "commits that first held them" if early else
                "versions of the code", shown, when, "may have run" if early else "ran"))
    return "Data: " + "; ".join(parts) + "."
