"""The runs of a study: made fresh by this invocation, or reused explicitly from stored files.

Every study stores its runs in one row format, JSON Lines (``pandas.read_json(path, lines=True)`` loads a
file as it is): one run per line, with the columns ROW (the study's name for the configuration, the method,
model, transport, workers, seed, epochs, final test accuracy, MB rank 0 sent in the last epoch, its mean
step time) and the run's provenance (PROVENANCE), then ``key`` (what identifies the run) and ``log`` (the
example's whole log: every epoch).

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


ROW = ("config", "method", "model", "transport", "workers", "seed", "epochs", "accuracy", "mb_sent_last_epoch",
       "step_ms")
PROVENANCE = ("commit", "clean", "code", "date", "machine", "command", "recorded")


def row(run):
    """A run ({key, log, provenance[, config]}) as one row of the format."""
    log = run["log"]
    args, last = log.get("args", {}), log["epochs"][-1]
    steps = sum(p["steps"][1] - p["steps"][0] + 1 for p in last.get("phases", []))
    out = {"config": run.get("config"), "method": args.get("compression", args.get("gc_type")),
           "model": args.get("model"), "transport": args.get("kvstore", args.get("kv_store")),
           "workers": log.get("workers", run["key"].get("workers")), "seed": args.get("seed"),
           "epochs": len(log["epochs"]), "accuracy": last["test_accuracy"],
           "mb_sent_last_epoch": last["bytes_sent"] / 1e6 if "bytes_sent" in last else None,
           "step_ms": 1e3 * last["seconds"] / steps if steps and "seconds" in last else None}
    out.update({k: (run.get("provenance") or {}).get(k) for k in PROVENANCE})
    return dict(out, key=run["key"], log=log)


def read(path):
    """The runs of a file in the format: [{key, log, provenance[, config]}]."""
    runs = []
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                run = {"key": r["key"], "log": r["log"],
                       "provenance": {k: r[k] for k in PROVENANCE if r.get(k) is not None}}
                if r.get("config") is not None:
                    run["config"] = r["config"]
                runs.append(run)
    return runs


def write(path, runs):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.writelines(json.dumps(row(run)) + "\n" for run in runs)


class Runs:
    """Runs by key (a JSON-able value, such as the argument list and the workers): ``get`` gives the stored
    one or makes it."""

    def __init__(self, path, reuse=(), any_code=False):
        self.path, self.runs, self.stored, self.reused = path, [], [], set()
        code = provenance.code_hash()
        other = 0
        for stored_path in reuse:
            for run in read(stored_path):
                if any_code or run["provenance"].get("code") == code:
                    self.stored.append(run)
                else:
                    other += 1
        if other:
            print("%d stored run(s) in %s ran other code (or do not say which): not reused; they run again"
                  % (other, ", ".join(reuse)), flush=True)

    def find(self, key):
        """The run of ``key`` (made now, else stored), or None."""
        return next((run for runs in (self.runs, self.stored) for run in runs if run["key"] == key), None)

    def get(self, key, make=None, command=None, config=None):
        """The log of ``key``'s run: a stored one, or ``make()``'s (recorded with the provenance of
        ``command`` and the study's name for its configuration, ``config``, and written to ``path``); None
        when neither is there (``make`` None)."""
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
            self.get(run["key"])

    def save(self):
        if self.path:
            write(self.path, self.runs)


def by_config(runs):
    """Runs (``read``'s) by the study's names for their configurations: {config: [log, ...]}, in order."""
    out = {}
    for run in runs:
        out.setdefault(run["config"], []).append(run["log"])
    return out
