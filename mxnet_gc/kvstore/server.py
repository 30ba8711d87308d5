"""The server side of the compressed dist store: decodes every worker's push and sums them.

Runs inside MXNet's own parameter server (ps-lite), created as 'dist_async' so that its updater is
called for each worker's push.  For each message it keeps an accumulator; when the last worker's push
of a round has arrived it writes the sum (or, with an optimizer, the updated weight) into the value
array that workers pull.  Started by ``python -m mxnet_gc.kvstore.server`` (tools/launch.py does it).
"""
import base64
import ctypes
import logging
import os
import pickle
import sys

import mxnet as mx
import numpy as np
from mxnet.base import _LIB, check_call
from mxnet.kvstore.kvstore_server import KVStoreServer

from .. import codecs
from . import protocol

log = logging.getLogger("mxnet_gc.server")


def numpy_view(array):
    """A numpy array over an NDArray's memory, without a copy.

    The server reads payloads and sums on its own thread, outside MXNet's engine: a received push
    lives in ps-lite's message buffer only while the updater runs, and an engine round trip per push
    would cost more than the decoding.  The engine does not see these accesses; callers keep engine
    operations on the same arrays finished before touching them.
    """
    array.wait_to_read()
    ptr = ctypes.c_void_p()
    check_call(_LIB.MXNDArrayGetData(array.handle, ctypes.byref(ptr)))
    return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(array.size,))


class MessageState:
    """What a server knows of one message: its segments' codecs, the accumulator, the push count."""

    def __init__(self, desc):
        self.value_key = desc["value_key"]
        self.size = desc["size"]
        self.acc = mx.nd.zeros(self.size)
        self.acc_np = numpy_view(self.acc)
        self.count = 0
        self.rejected = False
        self.residual_np = None  # error feedback of the compressed pull, if any
        self.set_layout(desc)

    def set_layout(self, desc):
        self.words = desc["words"]
        self.reduce_only = desc.get("reduce_only", False)
        self.pull_key = desc["pull_key"]
        if self.pull_key is not None and self.residual_np is None:
            self.residual_np = np.zeros(self.size, np.float32)
        self.segments = [dict(seg, codec=None if seg["codec"] is None else codecs.create(seg["codec"]),
                              pull_codec=None if seg["codec"] is None else codecs.create(seg["pull_codec"]))
                         for seg in desc["segments"]]
        self.coded = self.segments[0]["codec"] is not None

    def add(self, recv):
        """Adds one worker's push (dense float32 values, or payloads) to the accumulator, at once."""
        first = self.count == 0
        if not self.coded:
            if first:
                self.acc_np[:] = recv
            else:
                self.acc_np += recv
            return
        for seg in self.segments:
            payload = recv[seg["payload_offset"]:seg["payload_offset"] + seg["payload_words"]]
            seg["codec"].decode_numpy(payload, self.acc_np[seg["offset"]:seg["offset"] + seg["size"]], add=not first)

    def encode_sum(self, out):
        """Re-encodes the accumulated sum into ``out`` (a payload), with the server's own residual."""
        for seg in self.segments:
            values = slice(seg["offset"], seg["offset"] + seg["size"])
            words = slice(seg["pull_offset"], seg["pull_offset"] + seg["pull_words"])
            seg["pull_codec"].encode_numpy(self.acc_np[values], self.residual_np[values], out[words])


class CompressedServer(KVStoreServer):
    """mxnet_gc's parameter server: MXNet's server with a summing, decoding updater."""

    def __init__(self):
        super().__init__(mx.kv.create("dist_async"))
        self.server_rank = None  # known once ps-lite runs: set by the first command
        self.num_servers = int(os.environ["DMLC_NUM_SERVER"])
        self.num_workers = int(os.environ["DMLC_NUM_WORKER"])
        self.values = {}  # value key -> the stored NDArray workers pull
        self.values_np = {}  # value key -> a numpy view of it
        self.expected = set()  # value keys whose next push registers them
        self.messages = {}  # push key -> MessageState
        self.status_key = None
        self.status = np.zeros(protocol.STATUS_WORDS, np.float32)
        self.configs = {}  # config round -> {worker rank: config}
        self.optimizer = None
        self.opt_states = {}
        self.updater_set = False
        self.pushes = 0
        self.bytes = 0

    # ---- ps-lite callbacks ----

    def _controller(self):
        def handle(cmd_id, body, _):
            if not self.updater_set:  # MXNet's server object and rank exist only once run() started
                self.kvstore._set_updater(self.update)
                self.server_rank = self.kvstore.rank
                self.updater_set = True
            command = protocol.decode_command(body)
            if command is None:
                self.error("command %d is not an mxnet_gc command (is this a stock MXNet worker?)" % cmd_id)
                return
            op, fields = command
            try:
                getattr(self, "on_" + op)(**fields)
            except Exception as e:  # a bad command must not kill the server: report it to the workers
                log.exception("command %s failed", op)
                self.error("command %s failed: %s" % (op, e))
        return handle

    def update(self, key, recv, stored):
        """Called by MXNet for every push after a key's first (init) push."""
        if key in self.expected:
            self.expected.discard(key)
            self.values[key] = stored
            self.values_np[key] = numpy_view(stored)
            if key == self.status_key:
                self.publish_status()
            return
        message = self.messages.get(key)
        if message is None:
            self.error("push to key %d, which no layout assigns to server %d" % (key, self.server_rank))
            return
        self.pushes += 1
        self.bytes += 4 * recv.size
        if recv.size != message.words:
            keys = [seg["index"] for seg in message.segments]
            self.error("rejected a push of %d float32 words to key %d (for keys %s), expected %d; the values are "
                       "left unchanged this round" % (recv.size, key, keys, message.words))
            message.rejected = True
        else:
            message.add(numpy_view(recv))
        message.count += 1
        if message.count == self.num_workers:
            self.finish_round(message)

    def finish_round(self, message):
        if not message.rejected:
            if self.optimizer is None or message.reduce_only:
                self.values_np[message.value_key][:] = message.acc_np
                if message.pull_key is not None:
                    message.encode_sum(self.values_np[message.pull_key])
            else:
                self.apply_optimizer(message)
        message.count = 0
        message.rejected = False

    def apply_optimizer(self, message):
        """One optimizer step per segment, under the segment's own index (its chunk id)."""
        value = self.values[message.value_key]
        for seg in message.segments:
            begin, end = seg["offset"], seg["offset"] + seg["size"]
            weight, grad = (value, message.acc) if len(message.segments) == 1 else \
                (value[begin:end], message.acc[begin:end])
            index = seg["id"]
            if index not in self.opt_states:
                self.opt_states[index] = self.optimizer.create_state_multi_precision(index, weight)
            self.optimizer.update_multi_precision(index, weight, grad, self.opt_states[index])
        value.wait_to_read()  # the update reads acc, which the next round writes directly

    # ---- commands from workers ----

    def on_hello(self, status_keys):
        self.status_key = status_keys[self.server_rank]

    def on_expect(self, value_keys):
        mine = [k for k in value_keys if protocol.server_of(k, self.num_servers) == self.server_rank]
        self.expected.update(k for k in mine if k not in self.values)

    def on_layout(self, messages, dropped=()):
        """New or changed messages; ``dropped``: value keys of messages no longer sent (after a regroup)."""
        self.messages = {k: m for k, m in self.messages.items() if m.value_key not in set(dropped)}
        for desc in messages:
            if protocol.server_of(desc["value_key"], self.num_servers) != self.server_rank:
                continue
            old = next((m for m in self.messages.values() if m.value_key == desc["value_key"]), None)
            if old is None:
                self.messages[desc["push_key"]] = MessageState(desc)
                continue
            if old.count:
                self.error("layout changed in the middle of a round of keys %s"
                           % [seg["index"] for seg in desc["segments"]])
            self.messages = {k: m for k, m in self.messages.items() if m is not old}
            old.set_layout(desc)
            self.messages[desc["push_key"]] = old
        if self.optimizer is not None:
            self.alias_optimizer_indices()

    def on_config(self, rank, round, config):
        seen = self.configs.setdefault(round, {})
        seen[rank] = config
        first_rank = min(seen)
        st = self.status
        st[protocol.ST_ROUND] = round
        st[protocol.ST_RECEIVED] = len(seen)
        st[protocol.ST_CONFIG_HASH] = protocol.config_hash(seen[first_rank])
        differing = sorted(r for r, c in seen.items() if c != seen[first_rank])
        if differing:
            st[protocol.ST_MISMATCH] = 1
            message = "workers set different gradient compression parameters: rank %d %s, rank %d %s" % (
                first_rank, seen[first_rank], differing[0], seen[differing[0]])
            log.error(message)
            protocol.write_message(st, message)
        else:
            st[protocol.ST_MISMATCH] = 0
        self.publish_status()

    def on_optimizer(self, blob):
        self.optimizer = pickle.loads(base64.b64decode(blob))
        self.opt_states = {}
        self.alias_optimizer_indices()

    def on_save_states(self, path, dump_optimizer):
        with open("%s.server%d" % (path, self.server_rank), "wb") as f:
            state = (self.opt_states, self.optimizer) if dump_optimizer else self.opt_states
            f.write(pickle.dumps(_to_numpy(state)))

    def on_load_states(self, path):
        with open("%s.server%d" % (path, self.server_rank), "rb") as f:
            state = _to_ndarray(pickle.loads(f.read()))
        if isinstance(state, tuple):
            self.opt_states, self.optimizer = state
            self.alias_optimizer_indices()
        else:
            self.opt_states = state

    # ---- helpers ----

    def alias_optimizer_indices(self):
        """The optimizer sees each segment under its chunk id: map those to the user key's settings.

        (Learning-rate and weight-decay multipliers are looked up by index in param_dict, lr_mult,
        wd_mult and idx2name; a split tensor's parts need their own states but the same settings.)
        """
        opt = self.optimizer
        for table in ("param_dict", "idx2name", "lr_mult", "wd_mult"):
            original = getattr(opt, "_mxgc_" + table, None)
            if original is None:
                original = dict(getattr(opt, table, {}) or {})
                setattr(opt, "_mxgc_" + table, original)
            aliased = {k: v for k, v in original.items() if not isinstance(k, int)}
            for message in self.messages.values():
                for seg in message.segments:
                    if seg["index"] in original:
                        aliased[seg["id"]] = original[seg["index"]]
            setattr(opt, table, aliased)

    def error(self, message):
        """Logs a server-side error and reports it to the workers through the status key."""
        log.error(message)
        self.status[protocol.ST_ERRORS] += 1
        protocol.write_message(self.status, message)
        self.publish_status()

    def publish_status(self):
        array = self.values_np.get(self.status_key)
        if array is not None:
            array[:] = self.status

    def run(self):
        super().run()
        log.info("server %d done: %d pushes, %d bytes received", self.server_rank, self.pushes, self.bytes)
        print("mxnet_gc server %d: %d pushes, %d bytes received" % (self.server_rank, self.pushes, self.bytes),
              flush=True)


def _to_numpy(obj):
    """Optimizer states with NDArrays replaced by numpy arrays (so they pickle)."""
    if isinstance(obj, mx.nd.NDArray):
        return ("__ndarray__", obj.asnumpy())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_numpy(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _to_numpy(v) for k, v in obj.items()}
    return obj


def _to_ndarray(obj):
    if isinstance(obj, tuple) and len(obj) == 2 and obj[0] == "__ndarray__":
        return mx.nd.array(obj[1])
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_ndarray(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _to_ndarray(v) for k, v in obj.items()}
    return obj


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s mxnet_gc server %(message)s", stream=sys.stderr)
    role = os.environ.get("DMLC_ROLE")
    if role == "scheduler":
        return  # importing mxnet (above) already ran the scheduler to the end of the job
    if role != "server":
        sys.exit("mxnet_gc.kvstore.server: DMLC_ROLE must be 'server' or 'scheduler', got %r" % role)
    CompressedServer().run()
    # ps-lite has finished.  Skip MXNet's shutdown hooks: after pushes compressed by MXNet's own 2bit,
    # MXNet 1.9.1 frees its server-side decompression buffers with an invalid device and crashes.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
