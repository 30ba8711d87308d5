"""What workers and servers of the compressed dist store agree on: key layout, commands, status.

Transport: MXNet's own dist kvstore (ps-lite), created as 'dist_async' so that the server's updater
sees every worker's push separately.  On top of it (docs/kvstore.md has the whole protocol):

- Each user key is cut into chunks (layout.py: tensors of at least ``bigarray_bound`` values, or over a
  server's fair share, are cut into contiguous parts on several servers; smaller ones stay whole).  A chunk has a *value key* (what a pull
  returns: the sum of the workers' gradients, or the weight when the optimizer runs on the servers)
  and, for mxnet_gc's codecs, a *payload key* that receives the compressed pushes.  Both live on the
  same server; chunks are placed to balance the bytes per server.
- Workers send JSON commands (``Signer``) through ps-lite's command channel: their compression config,
  the key layout, the optimizer.  ps-lite authenticates nothing, so each command carries an HMAC-SHA256
  with the job's secret and a number per sender; a server runs only commands that prove the secret, each
  once (``Verifier``).  The first, ``hello``, is wrapped so that MXNet's own server survives it
  (``Signer.hello``): a worker then finds that server out by its status.
- Every server has a *status key* whose value (``STATUS_WORDS`` float32) reports the configuration it
  agreed on and the last error it saw, and proves that the server holds the job's secret
  (``server_proof``), and a *counters key* with the status's numbers; workers pull the counters after
  each synchronisation round, the status when they show an error or a disagreement, and raise.
"""
import codecs
import hashlib
import hmac
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
# ST_PROOF: PROOF_WORDS words, a byte each, of the server's proof that it holds the job's secret.
# ST_AGREED_*: the last configuration round every worker took part in (its number, mismatch flag and hash): a
# worker still reading a round's verdict when a faster one has started the next round finds it there.
ST_ROUND, ST_RECEIVED, ST_MISMATCH, ST_CONFIG_HASH, ST_ERRORS, ST_ROUNDS_DONE, ST_MARK, ST_ENDED, ST_ENDED_RANK, \
    ST_AGREED_ROUND, ST_AGREED_MISMATCH, ST_AGREED_HASH, ST_MESSAGE_LEN = range(13)
PROOF_WORDS = 32
COUNTER_WORDS = ST_MESSAGE_LEN  # the status's numbers, also in a small key of their own pulled every round
ST_PROOF = ST_MESSAGE_LEN + 1
ST_MESSAGE = ST_PROOF + PROOF_WORDS
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


def control_keys(server, num_servers):
    """Server ``server``'s status key and counters key: the first two internal keys on it (so a server knows
    its own before any command, and publishes its status, and its proof, even to workers whose commands it
    refuses).  Workers pull the counters (COUNTER_WORDS) with every round's values, the whole status (its
    message) only when the counters show something to read: a pull per parameter (gluon.Trainer, Module)
    then costs a few words, not STATUS_WORDS."""
    allocator = KeyAllocator(num_servers)
    return allocator.on_server(server), allocator.on_server(server)


def split_sizes(n, parts):
    """Sizes of ``parts`` contiguous, nearly equal parts of n values."""
    edges = [round(n * i / parts) for i in range(parts + 1)]
    return [edges[i + 1] - edges[i] for i in range(parts)]


def config_hash(config):
    """A float32-exact (24-bit) hash of a JSON-serializable config."""
    return zlib.crc32(json.dumps(config, sort_keys=True).encode()) & 0xFFFFFF


class Unauthenticated(ValueError):
    """A command that does not prove the job's secret, or one already run."""


def _mac(secret, data):
    return hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


def server_proof(secret, server_rank):
    """What server ``server_rank`` writes in its status (ST_PROOF): PROOF_WORDS bytes only the job's secret gives."""
    return list(hmac.new(secret.encode(), b"mxnet_gc server %d" % server_rank, hashlib.sha256).digest())


class Signer:
    """One worker's commands: prefix, HMAC-SHA256 of the JSON with the job's secret, JSON (ps-lite commands are
    NUL-free text).  The JSON names the sender and numbers its commands, so that none can be run twice."""

    def __init__(self, secret, sender):
        if not secret:
            from ..launch import HOW_TO_LAUNCH  # (here: `python -m mxnet_gc.launch` runs that module unimported)
            raise RuntimeError("mxnet_gc: this process has no job secret (MXNET_GC_JOB_SECRET): start the job with "
                               "mxnet_gc's launcher (`%s`), which gives every process one, or set "
                               "MXNET_GC_JOB_SECRET to the same random value in every process of the job" % HOW_TO_LAUNCH)
        self.secret, self.sender, self.sequence = secret, sender, 0

    def command(self, op, **fields):
        self.sequence += 1
        return self.sign(json.dumps(dict(fields, op=op, sender=self.sender, sequence=self.sequence), sort_keys=True))

    def sign(self, text):
        """The body of a command whose JSON is ``text``."""
        return "%s%s %s" % (COMMAND_PREFIX, _mac(self.secret, text.encode()), text)

    def hello(self):
        """The first command, ``hello``, inside an object MXNet's own server takes for an optimizer (a text
        pickle, as MXNet sends optimizers).  MXNet's server unpickles every command as an optimizer and
        aborts at the first push while it has none; given this one it lives on, so that the worker can read
        its status, see that it is not mxnet_gc's server and end the job in order.  (mxnet_gc's server
        reads the command out of the text: it unpickles nothing.)"""
        hello = types.SimpleNamespace(aggregate_num=0, mxnet_gc=self.command("hello"))
        return pickle.dumps(hello, 0).decode("ascii")


class Verifier:
    """A server's check of the workers' commands (``Signer``)."""

    def __init__(self, secret):
        self.secret = secret
        self.last = {}  # sender -> the number of its last command run

    def open(self, body):
        """(op, fields) of a command body; None for a body that is not an mxnet_gc command (such as a stock MXNet
        worker's optimizer); Unauthenticated for one that does not prove the job's secret or was run already."""
        text = _command_text(body)
        if text is None:
            return None
        mac, _, payload = text[len(COMMAND_PREFIX):].partition(" ")
        if not hmac.compare_digest(mac.encode(), _mac(self.secret, payload.encode()).encode()):
            raise Unauthenticated("not signed with the job's secret (MXNET_GC_JOB_SECRET): sent by a process outside "
                                  "the job (ps-lite lets any process that reaches the scheduler first join as a worker), "
                                  "or by a worker of another job")
        fields = json.loads(payload)
        sender, sequence = fields.pop("sender"), fields.pop("sequence")
        if sequence <= self.last.get(sender, 0):
            raise Unauthenticated("command %d of worker %s arrived again (after its command %d): a replay"
                                  % (sequence, sender, self.last[sender]))
        self.last[sender] = sequence
        return fields.pop("op"), fields


def _command_text(body):
    """The command in ``body``: the body itself, or the hello's command read out of its text pickle (protocol
    0 writes a str as a line 'V' + its raw-unicode-escape form; no unpickling)."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if body.startswith(COMMAND_PREFIX):
        return body
    for line in body.split("\n"):
        if line.startswith("V" + COMMAND_PREFIX):
            return codecs.decode(line[1:].encode("latin-1", "replace"), "raw_unicode_escape")
    return None


def write_message(status, message):
    """Stores ``message`` (truncated) in a status array (numpy float32)."""
    codes = np.frombuffer(message.encode("utf-8", "replace")[:MAX_MESSAGE], np.uint8)
    status[ST_MESSAGE_LEN] = len(codes)
    status[ST_MESSAGE:ST_MESSAGE + len(codes)] = codes


def read_message(status):
    n = int(status[ST_MESSAGE_LEN])
    return bytes(status[ST_MESSAGE:ST_MESSAGE + n].astype(np.uint8)).decode("utf-8", "replace")
