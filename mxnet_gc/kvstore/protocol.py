"""What workers and servers of the compressed dist store agree on: key layout, commands, status.

Transport: MXNet's own dist kvstore (ps-lite), created as 'dist_async' so that the server's updater
sees every worker's push separately.  On top of it (docs/kvstore.md has the whole protocol):

- Each user key is cut into chunks (tensors of at least ``bigarray_bound`` values are split into one
  contiguous part per server; smaller ones stay whole).  A chunk has a *value key* (what a pull
  returns: the sum of the workers' gradients, or the weight when the optimizer runs on the servers)
  and, for mxnet_gc's codecs, a *payload key* that receives the compressed pushes.  Both live on the
  same server; chunks are placed to balance the bytes per server.
- Workers send JSON commands (``encode_command``) through ps-lite's command channel: their
  compression config, the key layout, the optimizer.  The first, ``hello``, is wrapped so that MXNet's
  own server survives it (``encode_hello``): a worker then finds that server out by its status.
- Every server has a *status key* whose value (``STATUS_WORDS`` float32) reports the configuration it
  agreed on and the last error it saw; workers pull it after each synchronisation round and raise
  on an error.
"""
import io
import json
import pickle
import types
import zlib

import numpy as np

COMMAND_PREFIX = "mxgc1 "
STATUS_WORDS = 512
# status layout (float32 words): exact small integers, then the last error message as character codes.
# ST_ROUNDS_DONE: rounds of messages this server has completed, modulo ROUNDS_MODULUS (float32-exact);
# after a barrier it equals the rounds every worker pushed to it, unless a push was lost.
# ST_MARK: SERVER_MARK, set by every mxnet_gc server (MXNet's own server leaves the status at zero).
# ST_ENDED: how many workers have ended their part of the job (their store freed, at exit), the first
# of them ST_ENDED_RANK: a worker still pushing then knows why its round cannot complete.
ST_ROUND, ST_RECEIVED, ST_MISMATCH, ST_CONFIG_HASH, ST_ERRORS, ST_ROUNDS_DONE, ST_MARK, ST_ENDED, ST_ENDED_RANK, \
    ST_MESSAGE_LEN, ST_MESSAGE = range(11)
MAX_MESSAGE = STATUS_WORDS - ST_MESSAGE
SERVER_MARK = 0x6D7867  # float32-exact
ROUNDS_MODULUS = 2 ** 24

# MXNet places a key below its big-array bound on server (key * 9973) % num_servers
# (src/kvstore/kvstore_dist.h); mxnet_gc raises MXNet's bound so that MXNet never splits a key itself.
MXNET_PLACEMENT_PRIME = 9973
MXNET_BIGARRAY_BOUND = 2 ** 31 - 1
MAX_INTERNAL_KEY = (2 ** 31 - 1) // MXNET_PLACEMENT_PRIME


def server_of(internal_key, num_servers):
    """The server MXNet sends an internal key to."""
    return (internal_key * MXNET_PLACEMENT_PRIME) % num_servers


class KeyAllocator:
    """Hands out internal integer keys that MXNet will place on a chosen server."""

    def __init__(self, num_servers, first=0):
        self.num_servers = num_servers
        self._next = [first] * num_servers

    def on_server(self, server):
        k = self._next[server]
        while server_of(k, self.num_servers) != server:
            k += 1
        if k >= MAX_INTERNAL_KEY:
            raise ValueError("mxnet_gc: too many keys for MXNet's key space (internal key %d)" % k)
        self._next[server] = k + 1
        return k


def split_sizes(n, parts):
    """Sizes of ``parts`` contiguous, nearly equal parts of n values."""
    edges = [round(n * i / parts) for i in range(parts + 1)]
    return [edges[i + 1] - edges[i] for i in range(parts)]


def config_hash(config):
    """A float32-exact (24-bit) hash of a JSON-serializable config."""
    return zlib.crc32(json.dumps(config, sort_keys=True).encode()) & 0xFFFFFF


def encode_command(op, **fields):
    """A command body: the prefix and a JSON object (ps-lite commands are NUL-free text)."""
    return COMMAND_PREFIX + json.dumps(dict(op=op, **fields), sort_keys=True)


def encode_hello(**fields):
    """The first command's body: the ``hello`` command inside an object MXNet's own server takes for an
    optimizer (a text pickle, as MXNet sends optimizers).  MXNet's server unpickles every command as an
    optimizer and aborts at the first push while it has none; given this one it lives on, so that the
    worker can read its status, see that it is not mxnet_gc's server and end the job in order."""
    hello = types.SimpleNamespace(aggregate_num=0, mxnet_gc=encode_command("hello", **fields))
    return pickle.dumps(hello, 0).decode("ascii")


class _HelloUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) == ("types", "SimpleNamespace"):
            return types.SimpleNamespace
        raise pickle.UnpicklingError("not an mxnet_gc hello")


def decode_command(body):
    """(op, fields) of a command body, or None for a body that is not an mxnet_gc command."""
    if isinstance(body, str):
        body = body.encode()
    if not body.startswith(COMMAND_PREFIX.encode()):
        try:
            hello = _HelloUnpickler(io.BytesIO(body)).load()
        except Exception:  # noqa: BLE001  (any other body, such as a stock MXNet worker's optimizer)
            return None
        inner = getattr(hello, "mxnet_gc", None)
        return decode_command(inner) if isinstance(inner, str) and inner.startswith(COMMAND_PREFIX) else None
    fields = json.loads(body[len(COMMAND_PREFIX):].decode())
    return fields.pop("op"), fields


def write_message(status, message):
    """Stores ``message`` (truncated) in a status array (numpy float32)."""
    codes = np.frombuffer(message.encode("utf-8", "replace")[:MAX_MESSAGE], np.uint8)
    status[ST_MESSAGE_LEN] = len(codes)
    status[ST_MESSAGE:ST_MESSAGE + len(codes)] = codes


def read_message(status):
    n = int(status[ST_MESSAGE_LEN])
    return bytes(status[ST_MESSAGE:ST_MESSAGE + n].astype(np.uint8)).decode("utf-8", "replace")
