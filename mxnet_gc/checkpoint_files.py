"""Checkpoint files with a checksum: each file F is written atomically next to F.sha256.

A checkpoint is written by several processes (rank 0, every worker, every server); each writes its
own files with ``write`` (or ``seal`` after another library wrote them) and every reader checks them
with ``read`` or ``verify``, so a truncated, bit-flipped or mismatched file is refused with its name
instead of being loaded.  A manifest (the Gluon trainer's prefix.trainer.json) lists every file of a
checkpoint with its ``digest``; it is written last, so an interrupted save leaves the previous one whole.
"""
import hashlib
import os

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


def _replace(path, data):
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
