"""What the workers of a job must agree on, in one canonical form, and the sentence that says how they differ.

Both transports check these before any data moves: the compression settings, the keys of every init
call (with their shapes, in a canonical order, so that the order in which a worker lists its keys never
matters), merge groups, and LGC's phase switches; the parameter server also, when its store starts, the
environment settings its key layout follows (``config.Settings.shared``).  The parameter server compares
the workers' settings on the servers (``Aggregator.on_config``); Horovod gathers them on every worker.
Both use ``disagreement`` for the message.
"""
import json

# what -> (the settings' name in the message, what the user must do)
SUBJECTS = {
    "compression": ("gradient compression parameters", ""),
    "keys": ("keys in an init call",
             "every worker must init the same keys with the same shapes, in the same init calls (in any order "
             "within a call)"),
    "groups": ("merge groups", "every worker must pass the same groups to regroup"),
    "lgc_phase": ("lgc phase settings", "every worker must push the coded keys at every step"),
    "settings": ("environment settings", "every worker must give these variables the same value "
                 "(docs/configuration.md)"),
}


def key_order(key):
    """A sort key that orders int and str keys the same way in every process (ints first)."""
    return (isinstance(key, str), key)


def sorted_keys(keys):
    return sorted(keys, key=key_order)


def init_config(keys, shapes, reduce_only, groups):
    """The canonical form of an init call: keys sorted, with their shapes; groups as given (groups_as_lists)."""
    pairs = sorted(zip(keys, shapes), key=lambda p: key_order(p[0]))
    return {"keys": [[k, list(s)] for k, s in pairs], "reduce_only": bool(reduce_only),
            "groups": groups_as_lists(groups)}


def groups_as_lists(groups):
    """Merge groups as lists, in the order given: the order of the keys in the groups is the order of their
    messages (the trainer gives backward's, so that messages are pushed as their gradients become ready),
    so every worker must give the same."""
    if groups is None:
        return None
    return [list(g) for g in groups]


def differences(a, b, prefix=""):
    """Where two JSON-like settings differ, as "field: a / b" strings (dicts by dotted name, lists by the
    first index that differs)."""
    label = prefix + ": " if prefix else ""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            name = "%s.%s" % (prefix, key) if prefix else str(key)
            if key not in a or key not in b:
                out.append("%s: %s / %s" % (name, json.dumps(a.get(key, "(absent)")),
                                            json.dumps(b.get(key, "(absent)"))))
            else:
                out += differences(a[key], b[key], name)
        return out
    if isinstance(a, list) and isinstance(b, list) and a != b:
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:  # (an item of a list, such as a key and its shape, is shown whole)
                name = "%s[%d]" % (prefix, i)
                if isinstance(x, dict) and isinstance(y, dict):
                    return differences(x, y, name)
                return ["%s: %s / %s" % (name, json.dumps(x), json.dumps(y))]
        longer, other = (a, b) if len(a) > len(b) else (b, a)
        return ["%s%d items / %d items (first extra: %s)" % (label, len(a), len(b), json.dumps(longer[len(other)]))]
    return [] if a == b else ["%s%s / %s" % (label, json.dumps(a), json.dumps(b))]


def disagreement(what, configs):
    """The sentence saying how ``configs`` ({rank: settings}) differ, or None when they are equal."""
    first = min(configs)
    differing = sorted(r for r, c in configs.items() if c != configs[first])
    if not differing:
        return None
    name, hint = SUBJECTS[what]
    other = differing[0]
    message = "the workers set different %s (rank %d / rank %d): %s" % (
        name, first, other, "; ".join(differences(configs[first], configs[other])))
    return message + ("; " + hint if hint else "")


def different_calls(subjects):
    """The sentence saying that the workers made different collective calls at the same point (``subjects``:
    {rank: what}), or None when they made the same."""
    first = min(subjects)
    other = next((r for r in sorted(subjects) if subjects[r] != subjects[first]), None)
    if other is None:
        return None
    return ("the workers made different collective calls at the same point (rank %d sent its %s, rank %d its %s): every "
            "worker must make the same calls in the same order (set_gradient_compression, init, regroup, "
            "save_residuals and the trainer's steps that make them), not only some workers"
            % (first, SUBJECTS[subjects[first]][0], other, SUBJECTS[subjects[other]][0]))
