"""The files of a training checkpoint and its manifest, written and read by the Gluon trainer.

The files of step S carry MXNet's checkpoint numbering, prefix-SSSS (as ``mx.model.save_checkpoint``'s
prefix-EEEE.params): prefix-SSSS.params (weights, rank 0), prefix-SSSS.rank<r>.residuals (each worker's
error-feedback state; with 'lgc' also prefix-SSSS.rank0.residuals.lgc<g>, each group's autoencoder) and
the optimizer states (prefix-SSSS.opt.server<r> on each server when the optimizer runs there, else
prefix-SSSS.opt, rank 0), each with its SHA-256 in a .sha256 file.  Once all are written, rank 0
writes prefix.trainer.json, the manifest: for each checkpoint it keeps (the newest ``keep``), the
trainer's state (the job's settings, the schedule, groups and merge plan), ``extra`` and every file's
SHA-256; then it deletes the files of the checkpoints it no longer keeps.  A save interrupted before
the manifest leaves the previous checkpoints whole.  ``export`` writes a checkpoint's weights as a
file ``net.load_parameters`` reads.
"""
import json
import os

import mxnet as mx

from . import checkpoint_files


def tag_of(prefix, step):
    """The name of step ``step``'s files: prefix-SSSS, MXNet's numbering."""
    return "%s-%04d" % (prefix, step)


def save(prefix, kv, step, weights, optimizer_states, state, keep=1):
    """Writes the checkpoint of ``step`` (a collective call on the workers) and keeps the newest ``keep``.

    ``weights``: {name: NDArray} (used on rank 0); ``optimizer_states``: a function that writes the
    workers' optimizer states to the path it is given (called on rank 0), or None when the optimizer runs
    on the servers; ``state``: the trainer's
    JSON-serializable state for the manifest.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError("keep must be an int >= 1 (how many checkpoints to keep), got %r" % (keep,))
    tag = tag_of(prefix, step)
    if kv.rank == 0:
        mx.nd.save(tag + ".params", weights)
        checkpoint_files.seal(tag + ".params")
    kv.save_residuals("%s.rank%d.residuals" % (tag, kv.rank))
    if optimizer_states is None:
        kv.save_optimizer_states(tag + ".opt", dump_optimizer=True)
        opt_files = kv.optimizer_state_files(tag + ".opt")
    else:
        opt_files = [tag + ".opt"]
        if kv.rank == 0:
            optimizer_states(tag + ".opt")
    kv.barrier()
    if kv.rank != 0:
        return
    files = [tag + ".params"] + ["%s.rank%d.residuals" % (tag, r) for r in range(kv.num_workers)] + opt_files \
        + kv.state_files("%s.rank0.residuals" % tag)
    entry = dict(state, step=step, files={os.path.basename(f): checkpoint_files.digest(f) for f in files})
    previous = _entries(prefix)
    kept = [entry] + [e for e in previous if e["step"] != step][:keep - 1]
    checkpoint_files.write(prefix + ".trainer.json", json.dumps({"checkpoints": kept}).encode())
    folder = os.path.dirname(os.path.abspath(prefix))
    wanted = {name for e in kept for name in e["files"]}
    for e in previous:
        for name in set(e["files"]) - wanted:
            checkpoint_files.remove(os.path.join(folder, name))


def load(prefix, step=None):
    """(the manifest entry of the checkpoint of ``step``, by default the newest kept, and the prefix of its
    files), after checking every file it lists: a corrupt file, or one another (or an interrupted) save
    wrote, is refused."""
    entries = _entries(prefix, missing_ok=False)
    if step is None:
        entry = entries[0]
    else:
        found = [e for e in entries if e["step"] == step]
        if not found:
            raise ValueError("checkpoint %s has no step %r; it keeps steps %s" % (prefix, step, [e["step"] for e in entries]))
        entry = found[0]
    folder = os.path.dirname(os.path.abspath(prefix))
    for name, digest in entry["files"].items():
        checkpoint_files.verify(os.path.join(folder, name), digest)
    return entry, tag_of(prefix, entry["step"])


def steps(prefix):
    """The steps of the checkpoints ``prefix`` keeps, newest first."""
    return [e["step"] for e in _entries(prefix, missing_ok=False)]


def _entries(prefix, missing_ok=True):
    """The manifest's checkpoints, newest first ([] when there is no manifest yet and ``missing_ok``)."""
    if not os.path.exists(prefix + ".trainer.json"):
        if missing_ok:
            return []
        raise FileNotFoundError("no checkpoint %s: %s.trainer.json does not exist" % (prefix, prefix))
    path = prefix + ".trainer.json"
    data = checkpoint_files.read(path)
    try:
        return json.loads(data.decode())["checkpoints"]
    except (ValueError, KeyError, TypeError) as e:  # (UnicodeDecodeError is a ValueError)
        raise checkpoint_files.CorruptCheckpoint("checkpoint manifest %s is not the JSON a save writes (%s: %s)"
                                                 % (path, type(e).__name__, e)) from None


def weights(tag):
    """{name: NDArray} of a checkpoint's weights file (tag.params, mx.nd.save's format; checked by ``load``)."""
    try:
        return mx.nd.load(tag + ".params")
    except mx.base.MXNetError:
        raise checkpoint_files.CorruptCheckpoint("checkpoint file %s.params is not an NDArray file (the format of "
                                                 "mx.nd.save)" % tag) from None


def export(prefix, net, fname, step=None):
    """Writes the weights of the checkpoint ``prefix`` (its newest, or that of ``step``) into ``net``
    and saves them to ``fname`` with ``net.save_parameters``, the file ``net.load_parameters`` reads (for
    inference, without mxnet_gc).  ``net``: the network the checkpoint trained (its parameters' names)."""
    _, tag = load(prefix, step)
    saved = weights(tag)
    params = net.collect_params()
    missing = sorted(set(params.keys()) - set(saved))
    if missing:
        raise ValueError("checkpoint %s has no weights for %s (is it this network's?)" % (prefix, missing))
    for name, p in params.items():
        p.set_data(saved[name])
    net.save_parameters(fname)


def check_configuration(prefix, saved, mine):
    """Raises ValueError naming every setting in which this job differs from the checkpoint's."""
    differing = ["%s: %s in the checkpoint, %s in this job" % (k, json.dumps(saved.get(k)), json.dumps(v))
                 for k, v in mine.items() if json.loads(json.dumps(v)) != saved.get(k)]
    if differing:
        raise ValueError("checkpoint %s was saved by a job with other settings; %s" % (prefix, "; ".join(differing)))
