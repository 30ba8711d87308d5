"""The files of a training checkpoint and its manifest, written and read by the Gluon trainer.

The files of step S are prefix.S.params (weights, rank 0), prefix.S.rank<r>.residuals (each worker's
error-feedback state; with 'lgc' also prefix.S.rank0.residuals.lgc<g>, each group's autoencoder) and the optimizer states (prefix.S.opt.server<r> on each server when the
optimizer runs there, else prefix.S.opt, rank 0), each with its SHA-256 in a .sha256 file.  Once all
are written, rank 0 writes prefix.trainer.json, the manifest: the trainer's state (the job's settings,
the schedule, groups and merge plan), ``extra``, and every file's SHA-256; then it deletes the previous
checkpoint's files.  A save interrupted before the manifest leaves the previous checkpoint whole.
"""
import json
import os

import mxnet as mx

from . import checkpoint_files


def save(prefix, kv, step, weights, optimizer_states, state):
    """Writes the checkpoint of ``step`` (a collective call on the workers).

    ``weights``: {name: NDArray} (used on rank 0); ``optimizer_states``: the workers' updater states
    (bytes, used on rank 0), or None when the optimizer runs on the servers; ``state``: the trainer's
    JSON-serializable state for the manifest.
    """
    tag = "%s.%d" % (prefix, step)
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
            checkpoint_files.write(tag + ".opt", optimizer_states)
    kv.barrier()
    if kv.rank != 0:
        return
    files = [tag + ".params"] + ["%s.rank%d.residuals" % (tag, r) for r in range(kv.num_workers)] + opt_files \
        + kv.state_files("%s.rank0.residuals" % tag)
    previous = manifest_files(prefix)
    manifest = dict(state, step=step, files={os.path.basename(f): checkpoint_files.digest(f) for f in files})
    checkpoint_files.write(prefix + ".trainer.json", json.dumps(manifest).encode())
    for old in set(previous) - {os.path.abspath(f) for f in files}:
        checkpoint_files.remove(old)


def load(prefix):
    """(the manifest, the prefix of its step's files), after checking every file the manifest lists:
    a corrupt file, or one another (or an interrupted) save wrote, is refused."""
    manifest = json.loads(checkpoint_files.read(prefix + ".trainer.json"))
    folder = os.path.dirname(os.path.abspath(prefix))
    for name, digest in manifest["files"].items():
        checkpoint_files.verify(os.path.join(folder, name), digest)
    return manifest, "%s.%d" % (prefix, manifest["step"])


def manifest_files(prefix):
    """The files the manifest prefix.trainer.json lists (none when there is none yet)."""
    try:
        manifest = json.loads(checkpoint_files.read(prefix + ".trainer.json"))
    except (OSError, ValueError):
        return []
    folder = os.path.dirname(os.path.abspath(prefix))
    return [os.path.join(folder, name) for name in manifest.get("files", {})]


def check_configuration(prefix, saved, mine):
    """Raises ValueError naming every setting in which this job differs from the checkpoint's."""
    differing = ["%s: %s in the checkpoint, %s in this job" % (k, json.dumps(saved.get(k)), json.dumps(v))
                 for k, v in mine.items() if json.loads(json.dumps(v)) != saved.get(k)]
    if differing:
        raise ValueError("checkpoint %s was saved by a job with other settings; %s" % (prefix, "; ".join(differing)))
