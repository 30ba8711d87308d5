"""Checkpoint files with a checksum: each file F is written atomically next to F.sha256.

A checkpoint is written by several processes (rank 0, every worker, every server); each writes its
own files with ``write`` (or ``seal`` after another library wrote them) and every reader checks them
with ``read`` or ``verify``, so a truncated, bit-flipped or mismatched file is refused with its name
instead of being loaded.  State (residuals, optimizer states, LGC's autoencoders) is written as an .npz of
numeric arrays and a JSON ``__meta__`` (``write_arrays``, ``read_arrays``): reading one runs no code.  (The
checksums find damage, not tampering: whoever can edit a file can rewrite its checksum.)  A manifest (the Gluon trainer's prefix.trainer.json) lists every file of a
checkpoint with its ``digest``; it is written last, so an interrupted save leaves the previous one whole.
"""
import hashlib
import io
import json
import os

import numpy as np

SUFFIX = ".sha256"


class CorruptCheckpoint(ValueError):
    """A checkpoint file that is missing its checksum or does not match it."""


def write(path, data):
    """Writes ``data`` (bytes) to ``path`` and its SHA-256 to ``path.sha256`` (each through a rename)."""
    _replace(path, data)
    seal(path)


def seal(path):
    """Writes ``path.sha256`` for a file another library has written (such as ``mx.nd.save``)."""
    with open(path, "rb") as f:
        data = f.read()
    _replace(path + SUFFIX, ("%s  %s\n" % (hashlib.sha256(data).hexdigest(), os.path.basename(path))).encode())


def digest(path):
    """The SHA-256 recorded in ``path.sha256``."""
    try:
        with open(path + SUFFIX) as f:
            return f.read().split()[0]
    except (OSError, IndexError) as e:
        raise CorruptCheckpoint("checkpoint file %s has no readable checksum file %s (%s)" % (path, path + SUFFIX, e))


def verify(path, expected=None):
    """Raises CorruptCheckpoint unless ``path`` matches ``path.sha256`` (and ``expected``, a manifest's
    digest, when given): before another library reads it."""
    read(path)
    if expected is not None and digest(path) != expected:
        raise CorruptCheckpoint("checkpoint file %s is not the one its manifest lists (SHA-256 %s, listed %s): "
                                "it was written by another or an interrupted save" % (path, digest(path), expected))


def remove(path):
    """Deletes a checkpoint file and its checksum, if present."""
    for name in (path, path + SUFFIX):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass


def read(path):
    """The bytes of ``path``, after checking them against ``path.sha256``."""
    want = digest(path)
    with open(path, "rb") as f:
        data = f.read()
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise CorruptCheckpoint("checkpoint file %s is corrupt: its SHA-256 is %s, %s says %s"
                                % (path, got, path + SUFFIX, want))
    return data


def write_arrays(path, meta, arrays):
    """Writes ``meta`` (JSON-serializable) and ``arrays`` ({name: numpy array}) as an .npz, with its checksum."""
    buffer = io.BytesIO()
    np.savez(buffer, __meta__=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    write(path, buffer.getvalue())


def read_arrays(path):
    """(meta, {name: array}) of a file ``write_arrays`` wrote, its checksum checked.  Anything else (such as
    the pickles of mxnet_gc before 2026-12, which can run code when loaded) is refused, never unpickled."""
    data = read(path)
    if not data.startswith(b"PK"):
        raise CorruptCheckpoint(
            "checkpoint file %s is not an .npz of arrays and JSON%s; mxnet_gc reads no other format (a pickle can "
            "run any code when loaded): resume from a checkpoint this version saved"
            % (path, " (it is a pickle, as mxnet_gc wrote optimizer states and LGC autoencoders before 2026-12)"
               if data[:1] == b"\x80" or data[:1] == b"(" else ""))
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as saved:
            return json.loads(str(saved["__meta__"])), {n: saved[n] for n in saved.files if n != "__meta__"}
    except (ValueError, KeyError, OSError) as e:
        raise CorruptCheckpoint("checkpoint file %s is not an .npz of numeric arrays and JSON: %s" % (path, e)) from None


def _replace(path, data):
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
