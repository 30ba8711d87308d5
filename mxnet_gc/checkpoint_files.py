"""Checkpoint files with a checksum: each file F is written atomically next to F.sha256.

A checkpoint is written by several processes (rank 0, every worker, every server); each writes its
own files with ``write`` and every reader checks them with ``read``, so a truncated, bit-flipped or
mismatched file is refused with its name instead of being loaded.
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


def verify(path):
    """Raises CorruptCheckpoint unless ``path`` matches ``path.sha256`` (before another library reads it)."""
    read(path)


def read(path):
    """The bytes of ``path``, after checking them against ``path.sha256``."""
    try:
        with open(path + SUFFIX) as f:
            want = f.read().split()[0]
    except (OSError, IndexError) as e:
        raise CorruptCheckpoint("checkpoint file %s has no readable checksum file %s (%s)" % (path, path + SUFFIX, e))
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
