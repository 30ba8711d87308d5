"""The runs of a study: made fresh by this invocation, or reused explicitly from stored files.

Every run a study makes is written (to ``path``, as it ends) with its provenance (tools/provenance.py: the
commit, whether the tree was clean, the hash of the code it executed, the date, the machine, the command).
A stored run is reused only when named (``reuse``: files of earlier runs) and only if it ran the same code
(the same code hash; ``any_code`` for a report that reads a file as it is), and is labelled "stored" with its
commit and date wherever it is printed: nothing is printed as a result of this invocation that it did not
produce.
"""
import json
import os

from tools import provenance


def key_of(run):
    """A stored run's key (files written before keys: its argument list and workers)."""
    return run["key"] if "key" in run else {"argv": run["argv"], "workers": run.get("workers", 2)}


class Runs:
    """Runs by key (a JSON-able value, such as the argument list and the workers): ``get`` gives the stored
    one or makes it."""

    def __init__(self, path, reuse=(), any_code=False):
        self.path, self.runs, self.stored, self.reused = path, [], [], set()
        code = provenance.code_hash()
        other = 0
        for stored_path in reuse:
            with open(stored_path) as f:
                for run in json.load(f).get("runs", []):
                    if any_code or (run.get("provenance") or {}).get("code") == code:
                        self.stored.append(run)
                    else:
                        other += 1
        if other:
            print("%d stored run(s) in %s ran other code (or do not say which): not reused; they run again"
                  % (other, ", ".join(reuse)), flush=True)

    def find(self, key):
        """The run of ``key`` (made now, else stored), or None."""
        return next((run for runs in (self.runs, self.stored) for run in runs if key_of(run) == key), None)

    def get(self, key, make=None, command=None, config=None):
        """The log of ``key``'s run: a stored one, or ``make()``'s (recorded with the provenance of
        ``command`` and the study's name for its configuration, ``config``, and written to ``path``); None when neither is there
        (``make`` None)."""
        run = self.find(key)
        if run is None and make is None:
            return None
        if run is None:
            run = {"key": key, "log": make(), "provenance": provenance.record(command)}
            if config is not None:
                run["config"] = config
        elif all(r is not run for r in self.runs):  # a stored run, reused for the first time
            self.reused.add(id(run))
        else:
            return run["log"]
        self.runs.append(run)
        self.save()
        return run["log"]

    def label(self, key):
        """'' for a run made now; ' (stored: commit C, DATE)' for a reused one."""
        run = self.find(key)
        if run is None or id(run) not in self.reused:
            return ""
        p = run.get("provenance") or {}
        return " (stored: commit %s, %s)" % (p.get("commit", "unknown"), p.get("date", "date unknown"))

    def keep_stored(self):
        """Keep every reusable stored run in ``path`` too (those of the same code this invocation did not ask
        for), so that a study run again for some configurations does not drop the others."""
        for run in list(self.stored):
            self.get(key_of(run))

    def save(self):
        if self.path:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            with open(self.path, "w") as f:
                json.dump({"runs": self.runs}, f, indent=1)


def by_config(path):
    """The runs of a study file by the study's names for their configurations: {config: [log, ...]}, in the
    file's order."""
    with open(path) as f:
        runs = json.load(f)["runs"]
    out = {}
    for run in runs:
        out.setdefault(run["config"], []).append(run["log"])
    return out


def provenances(path):
    """The provenance records of a study file's runs, in order."""
    with open(path) as f:
        return [run.get("provenance") or {} for run in json.load(f)["runs"]]
