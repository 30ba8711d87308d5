"""The parameter server's updater (mxnet_gc/kvstore/ps/aggregator.py) in this process, with MXNet's real
arrays and engine: it waits for every received array before returning, never raises into MXNet,
rejects what it cannot add (counting the push, so the workers stay in step) and reports every failure
in the status the workers pull; fuzzed with random and adversarial pushes and commands."""
import json
import threading
import time

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mxnet_gc
from mxnet_gc import optimizer_state
from mxnet_gc.kvstore import protocol
from mxnet_gc.kvstore.ps.aggregator import Aggregator
from mxnet_gc.kvstore.ps.ps_buffers import Buffers
from mxnet_gc.kvstore.layout import Layout
from dist.job import every_codec

POW2 = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
WORKERS = 2
SECRET = "s" * 64
CODECS = [None] + sorted(every_codec().values(), key=lambda c: c["type"])


class Server:
    """An Aggregator with one message of the given keys (sizes) and codec, set up as the workers would."""

    def __init__(self, sizes, codec, optimizer=None, compressed_pull=False, pull_stats=0, checkpoint_dir=".",
                 **aggregator):
        self.agg = Aggregator(0, 1, WORKERS, SECRET, checkpoint_dir, pull_stats, **aggregator)
        self.signer = protocol.Signer(SECRET, 0)
        alloc = protocol.KeyAllocator(1)
        status_key, _ = alloc.on_server(0), alloc.on_server(0)  # (the server's status and counters keys)
        self.agg.command(0, self.signer.hello())
        layout = Layout(1, 10 ** 9)
        keys = ["k%d" % i for i in range(len(sizes))]
        (self.message,) = layout.add(keys, [(n,) for n in sizes], groups=[keys])
        created = None if codec is None else mxnet_gc.codecs.create(codec)
        self.message.set_codecs(lambda key: created, WORKERS)
        self.keys = Buffers(value_key=alloc.on_server(0))
        if created is not None:
            self.keys.payload_key = alloc.on_server(0)
        if compressed_pull:
            self.keys.pull_key = alloc.on_server(0)
        value_keys = [status_key, self.keys.value_key] + [self.keys.pull_key] * compressed_pull
        self.agg.command(0, self.signer.command("expect", value_keys=value_keys))
        self.status = self.register(status_key, protocol.STATUS_WORDS)
        self.value = self.register(self.keys.value_key, self.message.size, fill=7.0)
        if compressed_pull:
            self.pulled = self.register(self.keys.pull_key, self.message.pull_words)
        self.agg.command(0, self.signer.command("layout", messages=[self.keys.describe(self.message)]))
        if optimizer is not None:
            self.agg.command(0, self.signer.command("optimizer", optimizer=optimizer_state.for_servers(optimizer)))
        self.words = self.message.payload_words if created is not None else self.message.size

    def register(self, key, size, fill=0.0):
        stored = mx.nd.full(size, fill)
        self.agg.update(key, mx.nd.zeros(size), stored)
        return stored

    def push(self, array):
        self.agg.update(self.keys.push_key(self.message.coded), array, None)

    def errors(self):
        return int(self.status.asnumpy()[protocol.ST_ERRORS])

    def rounds(self):
        return int(self.status.asnumpy()[protocol.ST_ROUNDS_DONE])

    def message_text(self):
        return protocol.read_message(self.status.asnumpy())


# ---- the updater waits for what MXNet may still be writing ----

class _SlowCopy(mx.operator.CustomOp):
    """Copies its input after a delay, on MXNet's engine, and records when it finished."""

    finished = []

    def forward(self, is_train, req, in_data, out_data, aux):
        time.sleep(0.3)
        self.assign(out_data[0], req[0], in_data[0])
        _SlowCopy.finished.append(threading.get_ident())


@mx.operator.register("mxgc_test_slow_copy")
class _SlowCopyProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=False)

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _SlowCopy()


def pending(values):
    """An array whose value MXNet's engine is still computing (as MXNet's 2bit dequantization leaves it)."""
    return mx.nd.Custom(mx.nd.array(values), op_type="mxgc_test_slow_copy")


@pytest.mark.parametrize("branch", ["register", "unknown key", "wrong size", "wrong dtype", "accepted"])
def test_update_returns_only_after_the_received_array_is_written(branch):
    """MXNet's server frees (or reuses) the received buffer as soon as the updater returns; an updater
    that returns while the engine still writes it lets that write land in freed memory (the crash
    seen with MXNet's own 2bit)."""
    server = Server([16], {"type": "4bit", "thresholds": POW2})
    _SlowCopy.finished.clear()
    if branch == "register":
        server.agg.expected.add(999)
        server.agg.update(999, pending(np.zeros(4, np.float32)), mx.nd.zeros(4))
    elif branch == "unknown key":
        server.agg.update(12345, pending(np.zeros(4, np.float32)), None)
    elif branch == "wrong size":
        server.push(pending(np.zeros(server.words + 1, np.float32)))
    elif branch == "wrong dtype":
        server.push(pending(np.zeros(server.words, np.float32)).astype("float16"))
    else:
        server.push(pending(np.zeros(server.words, np.float32)))
    assert len(_SlowCopy.finished) == 1


# ---- rejections keep the rounds in step and reach the status ----

def dense_round(server, values):
    for v in values:
        server.push(mx.nd.array(v))


def test_rejected_push_is_counted_and_reported_values_unchanged():
    server = Server([5, 3], None)
    before = server.value.asnumpy().copy()
    server.push(mx.nd.ones(8))
    server.push(mx.nd.ones(9))  # wrong size
    assert server.errors() == 1 and "rejected a push of 9 float32 words" in server.message_text()
    np.testing.assert_array_equal(server.value.asnumpy(), before)
    assert server.rounds() == 1
    dense_round(server, [np.full(8, 1.0), np.full(8, 2.0)])  # the next round is whole
    np.testing.assert_array_equal(server.value.asnumpy(), np.full(8, 3.0))
    assert server.rounds() == 2 and server.errors() == 1


def test_pull_monitor_logs_what_the_compressed_pull_carries(caplog):
    """MXNET_GC_PULL_STATS's samples (pull_monitor.py): the norms of the sum, the pull and the servers'
    residual, and the shares sent as 0 and at the top level, against numpy over two rounds."""
    codec = mxnet_gc.codecs.create({"type": "4bit", "thresholds": POW2})
    pull_codec = codec.pull_codec(WORKERS)
    server = Server([600, 40], {"type": "4bit", "thresholds": POW2}, compressed_pull=True, pull_stats=2)
    rng = np.random.default_rng(5)
    residual = np.zeros(640, np.float32)
    caplog.set_level("INFO", logger="mxnet_gc.server")
    for _ in range(2):
        total = np.zeros(640, np.float32)
        for _ in range(WORKERS):
            grad = (rng.standard_normal(640) * 10.0 ** rng.uniform(-1.5, 1.8, 640)).astype(np.float32)
            grad[:50] = 0.0  # values whose sum may be 0
            grad[50:60] = 100.0  # and sums beyond the top pull level
            payload = np.zeros(codec.payload_size(640), np.float32)
            codec.encode_numpy(grad, np.zeros(640, np.float32), payload)
            server.push(mx.nd.array(payload))
            codec.decode_numpy(payload, total, add=True)
        a = total + residual
        pulled = np.zeros(640, np.float32)
        pull_codec.decode_numpy(server.pulled.asnumpy(), pulled)
        residual = a - pulled
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pull stats ")]
    assert len(lines) == 1  # every 2 rounds
    stats = json.loads(lines[0][len("pull stats "):])
    assert stats["round"] == 2 and stats["values"] == 640
    np.testing.assert_allclose([stats["sum"], stats["pulled"], stats["residual"]],
                               [np.linalg.norm(a), np.linalg.norm(pulled), np.linalg.norm(residual)], rtol=1e-5)
    assert stats["zeros"] == pytest.approx(np.count_nonzero((a != 0) & (pulled == 0)) / np.count_nonzero(a))
    top = np.count_nonzero(np.abs(pulled) >= pull_codec.group.levels[-1]) / 640
    assert 10 / 640 <= top and stats["top"] == pytest.approx(top)


def test_corrupt_topk_payload_rejected_without_raising():
    server = Server([40], {"type": "layerwise_topk", "density": 0.25})
    bad = np.zeros(server.words, np.float32)
    bad[0] = np.array([10 ** 6], np.int32).view(np.float32)[0]  # count past the capacity
    server.push(mx.nd.array(np.zeros(server.words, np.float32)))
    server.push(mx.nd.array(bad))
    assert server.errors() == 1 and "corrupt payload" in server.message_text()
    np.testing.assert_array_equal(server.value.asnumpy(), np.full(40, 7.0))
    assert server.rounds() == 1


def test_optimizer_that_cannot_run_is_refused_when_sent():
    server = Server([4], None, optimizer=mx.optimizer.SGD(learning_rate=0.1, clip_gradient="abc"))
    assert server.errors() == 1
    assert "command failed on server 0" in server.message_text()
    assert not server.agg.optimizer.active


def test_paths_outside_the_checkpoint_folder_are_refused(tmp_path):
    """Commands name files only in the job's checkpoint folder (MXNET_GC_CHECKPOINT_DIR), symbolic links and
    '..' resolved; inside it, the optimizer's states go to file and come back."""
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "link").symlink_to(tmp_path)
    server = Server([4], None, optimizer=mx.optimizer.SGD(learning_rate=0.1, momentum=0.9), checkpoint_dir=str(folder))
    for path in ("/etc/x", str(folder / ".." / "x"), str(folder / "link" / "x")):
        server.agg.command(0, server.signer.command("save_states", path=path, dump_optimizer=True))
        assert "outside the job's checkpoint folder %s (MXNET_GC_CHECKPOINT_DIR)" % folder in server.message_text()
    assert server.errors() == 3 and sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints"]
    server.agg.command(0, server.signer.command("save_states", path=str(folder / "ck.opt"), dump_optimizer=True))
    server.agg.command(0, server.signer.command("load_states", path=str(folder / "ck.opt")))
    assert server.errors() == 3 and (folder / "ck.opt.server0").exists()


def test_a_worker_place_never_joined_ends_the_job():
    """A server that hears only some ranks join with the job's secret ends the job when the join timeout
    passes, naming the ranks; one that hears every rank does not."""
    ended = threading.Event()
    server = Server([4], None, join_timeout=0.2, on_join_timeout=ended.set)
    server.agg.command(0, server.signer.command("join", rank=0))
    assert ended.wait(5) and "worker rank(s) [1] did not join with the job's secret within 0.2 s" in \
        server.message_text()
    complete = threading.Event()
    server = Server([4], None, join_timeout=0.2, on_join_timeout=complete.set)
    for rank, signer in enumerate([server.signer] + [protocol.Signer(SECRET, r) for r in range(1, WORKERS)]):
        server.agg.command(0, signer.command("join", rank=rank))
    assert not complete.wait(0.5)


def test_an_unsigned_optimizer_is_never_loaded(tmp_path):
    """The command that once carried a pickled optimizer: refused unread, whatever it holds."""
    import base64
    import pickle
    from tools.planted import Planted
    planted = Planted(str(tmp_path / "ran"))
    server = Server([4], None)
    body = 'mxgc1 {"op": "optimizer", "blob": "%s"}' % base64.b64encode(planted.pickle()).decode()
    server.agg.command(0, body)
    assert "refused a command (not run): not signed with the job's secret" in server.message_text()
    assert not planted.ran() and not server.agg.optimizer.active
    pickle.loads(planted.pickle()).close()  # (what it would have done)
    assert planted.ran()


def test_optimizer_failing_in_a_round_is_reported_and_the_round_ends():
    class Failing(mx.optimizer.SGD):
        calls = 0

        def update_multi_precision(self, index, weight, grad, state):
            Failing.calls += 1
            if Failing.calls > 1:  # passes the trial update, fails in the first real round
                raise FloatingPointError("diverged")
            super().update_multi_precision(index, weight, grad, state)

    server = Server([4], None)
    server.agg.optimizer.optimizer = Failing(learning_rate=0.1)
    Failing.calls = 1
    dense_round(server, [np.ones(4), np.ones(4)])
    assert server.errors() == 1 and "FloatingPointError: diverged" in server.message_text()
    assert server.rounds() == 1 and server.agg.messages[server.keys.push_key(server.message.coded)].count == 0


SIGNED = ['{not json', '{"op": "explode", "sender": 0, "sequence": 9}', '{"op": 3, "sender": 0, "sequence": 9}',
          '{"op": "layout", "messages": 7, "sender": 0, "sequence": 9}', '{"op": "layout", "messages": []}']


@pytest.mark.parametrize("body", SIGNED + ["mxgc1 " + '{"op": "layout", "messages": []}', "mxgc1 00 {}",
                                          "hello from a stock worker"])
def test_bad_commands_are_reported_not_raised(body):
    server = Server([4], None)
    server.agg.command(5, server.signer.sign(body) if body in SIGNED else body)
    assert server.errors() == 1
    assert "command" in server.message_text()
    if body.startswith("mxgc1"):
        assert "not signed with the job's secret" in server.message_text()


# ---- fuzzing: any bytes, any size, any dtype ----

DTYPES = ["float32", "float32", "float32", "float16", "float64"]


@settings(max_examples=150, deadline=None)
@given(codec=st.sampled_from(CODECS), sizes=st.lists(st.integers(1, 70), min_size=1, max_size=3),
       pushes=st.lists(st.tuples(st.sampled_from(DTYPES), st.integers(-2, 2), st.binary(min_size=0, max_size=4096)),
                       min_size=1, max_size=6))
def test_fuzzed_pushes_never_raise_and_keep_rounds(codec, sizes, pushes):
    """Random bit patterns (NaNs, huge counts, any index), wrong sizes and dtypes: the updater never
    raises, each push counts towards its round, and a round with a rejected push leaves the values."""
    server = Server(sizes, codec)
    errors, round_rejected, round_start = 0, False, server.value.asnumpy().copy()
    for i, (dtype, size_delta, raw) in enumerate(pushes):
        words = max(1, server.words + size_delta)
        data = (raw * (1 + 4 * words // max(1, len(raw))))[:4 * words].ljust(4 * words, b"\0")
        server.push(mx.nd.array(np.frombuffer(data, np.float32)).astype(dtype))
        errors_now = server.errors()
        if dtype != "float32" or words != server.words:
            assert errors_now == errors + 1
        round_rejected = round_rejected or errors_now > errors
        errors = errors_now
        if (i + 1) % WORKERS == 0:
            assert server.rounds() == (i + 1) // WORKERS
            if round_rejected:
                np.testing.assert_array_equal(server.value.asnumpy(), round_start)
            round_rejected, round_start = False, server.value.asnumpy().copy()
    assert server.agg.messages[server.keys.push_key(server.message.coded)].count == len(pushes) % WORKERS
