"""The parts of the dist store that need no processes: compression settings, key placement, commands."""
import os
import subprocess
import sys

import numpy as np
import pytest
import mxnet as mx

import mxnet_gc
from mxnet_gc.kvstore import agreement, protocol
from mxnet_gc.kvstore.compression import Compression


def test_supported_types_and_names():
    # MXNet's two types first, then every registered codec (its 2bit as gc_2bit) and 'lgc', sorted: a new codec
    # is listed without a change here
    ours = ["gc_2bit" if t == "2bit" else t for t in mxnet_gc.codecs.available()] + ["lgc"]
    assert mxnet_gc.kvstore.supported_types() == ["none", "2bit"] + sorted(ours)
    assert {"4bit", "5bit", "8bit", "gc_2bit", "layerwise_topk", "lgc"} <= set(ours)
    assert Compression({"type": "2bit", "threshold": 0.5}).is_mxnet
    assert Compression({"type": "gc_2bit"}).codec_for("w").config() == {"type": "2bit", "threshold": 0.5, "rounding": "floor"}
    four = Compression({"type": "4bit", "thresholds": "small", "per_key": {"fc": [0.5, 1.0], 3: "large"}})
    assert four.codec_for("fc").group.levels == (0.5, 1.0)
    assert four.codec_for(3).group == mxnet_gc.codecs.default_group("large")
    assert four.codec_for("other").group == mxnet_gc.codecs.default_group("small")


@pytest.mark.parametrize("params,message", [
    ({"type": "3bit"}, "unknown gradient compression type '3bit'; supported types: "
                       + ", ".join(mxnet_gc.kvstore.supported_types())),
    ({"type": "gc_4bit"}, "unknown gradient compression type 'gc_4bit'"),
    ({"threshold": 0.5}, "must be a dict with a 'type'"),
    ({"type": "2bit", "threshold": -1}, "'threshold' must be positive"),
    ({"type": "2bit", "thresholds": [1]}, "2bit: unknown parameter(s) 'thresholds'"),
    ({"type": "none", "threshold": 1}, "none: unknown parameter(s) 'threshold'"),
    ({"type": "2bit", "per_key": {"a": [1]}}, "'per_key' and 'compressed_pull' need an mxnet_gc codec"),
    ({"type": "4bit", "thresholds": [2, 1]}, "strictly increasing"),
    ({"type": "4bit", "per_key": {"a": [0, 1]}}, "must be positive"),
    ({"type": "4bit", "per_key": [1]}, "'per_key' must be a dict"),
    ({"type": "4bit", "compressed_pull": 1}, "'compressed_pull' must be True or False"),
    ({"type": "2bit", "compressed_pull": True}, "'per_key' and 'compressed_pull' need an mxnet_gc codec"),
    ({"type": "4bit", "warmup_steps": -1}, "'warmup_steps' must be an int >= 0, got -1"),
    ({"type": "gc_2bit", "warmup_steps": 2.5}, "'warmup_steps' must be an int >= 0, got 2.5"),
    ({"type": "2bit", "warmup_steps": 5}, "2bit: unknown parameter(s) 'warmup_steps'"),  # (MXNet's: none)
])
def test_bad_compression_params(params, message):
    with pytest.raises(ValueError) as err:
        Compression(params)
    assert message in str(err.value)


def test_keys_land_on_the_chosen_server():
    for servers in (1, 2, 3, 7):
        alloc = protocol.KeyAllocator(servers)
        seen = set()
        for server in list(range(servers)) * 20:
            key = alloc.on_server(server)
            assert protocol.server_of(key, servers) == server and key not in seen
            seen.add(key)


def test_a_server_knows_its_control_keys():
    """The status and counters keys a worker allocates first are those each server knows as its own."""
    for servers in (1, 2, 5):
        allocator = protocol.KeyAllocator(servers)
        status, counters = [allocator.on_server(s) for s in range(servers)], [allocator.on_server(s) for s in range(servers)]
        assert list(zip(status, counters)) == [protocol.control_keys(s, servers) for s in range(servers)]


def test_split_sizes():
    assert protocol.split_sizes(10, 3) == [3, 4, 3]
    assert sum(protocol.split_sizes(1_000_003, 4)) == 1_000_003


SECRET = "a" * 64


def test_commands_round_trip():
    body = protocol.Signer(SECRET, 1).command("config", rank=1, config={"type": "4bit", "x": "é\\n"})
    assert protocol.Verifier(SECRET).open(body) == ("config", {"rank": 1, "config": {"type": "4bit", "x": "é\\n"}})
    assert protocol.Verifier(SECRET).open("(dp0\n...") is None  # a stock MXNet optimizer pickle
    status = np.zeros(protocol.STATUS_WORDS, np.float32)
    protocol.write_message(status, "rejected a push ✓")
    assert protocol.read_message(status) == "rejected a push ✓"


def test_sparse_arrays_are_refused():
    from mxnet_gc.kvstore import arguments

    sparse = mx.nd.zeros((4, 3)).tostype("row_sparse")
    with pytest.raises(TypeError, match="take dense arrays, got a row_sparse one"):
        arguments.initial_values("w", sparse)
    with pytest.raises(TypeError, match="take dense arrays, got a csr one"):
        arguments.check_arrays("push", "w", [mx.nd.zeros((4, 3)).tostype("csr")], (4, 3))


def test_mxnet_gc_codecs_warm_up_by_default():
    assert Compression({"type": "4bit"}).warmup_steps == 50 == Compression({"type": "layerwise_topk"}).warmup_steps
    assert Compression({"type": "4bit", "warmup_steps": 0, "thresholds": "medium"}).config["warmup_steps"] == 0
    # 4bit's levels are fitted in the warm-up unless given
    assert Compression({"type": "4bit"}).config["default"] == {"type": "4bit", "thresholds": "auto", "rounding": "nearest"}
    assert Compression({"type": "4bit"}).fit_steps == 20
    assert Compression({"type": "2bit"}).warmup_steps == 0 == Compression({"type": "none"}).warmup_steps
    assert Compression({"type": "lgc"}).warmup_steps == 0  # (its own phases)


def test_hello_is_an_optimizer_to_mxnet_own_server():
    """The first command: mxnet_gc's server reads it as ``hello``; MXNet's own server unpickles it as an
    optimizer and makes an updater of it (so that it survives the first pushes; see ServerLink)."""
    import pickle
    import types

    signer = protocol.Signer(SECRET, 0)
    body = signer.hello()
    assert "\0" not in body and body.isascii()  # (ps-lite commands are NUL-free text)
    assert protocol.Verifier(SECRET).open(body) == ("hello", {})
    assert protocol.Verifier(SECRET).open(body.encode()) == ("hello", {})
    # a command read out of the hello's text pickle keeps every character
    text = "C:\\x\n\u00e9\""
    wrapped = pickle.dumps(types.SimpleNamespace(mxnet_gc=signer.command("save_states", path=text)), 0).decode()
    assert protocol.Verifier(SECRET).open(wrapped) == ("save_states", {"path": text})
    mx.optimizer.get_updater(pickle.loads(body.encode()))  # what MXNet's server does with command 0
    # a pickle of anything else is not an mxnet_gc command, and is never loaded by mxnet_gc's server
    assert protocol.Verifier(SECRET).open(pickle.dumps(mx.optimizer.SGD(), 0)) is None


def test_a_command_runs_only_with_the_job_secret_and_once():
    """ps-lite authenticates nothing: a server runs a command only if its HMAC proves the job's secret, and only
    once (each sender numbers its commands)."""
    signer, verifier = protocol.Signer(SECRET, 0), protocol.Verifier(SECRET)
    first, second = signer.command("layout", messages=[]), signer.command("expect", value_keys=[1])
    assert verifier.open(first) == ("layout", {"messages": []})
    with pytest.raises(protocol.Unauthenticated, match="command 1 of worker 0 arrived again"):
        verifier.open(first)
    assert verifier.open(second) == ("expect", {"value_keys": [1]})
    stranger = protocol.Signer("b" * 64, 0).command("optimizer", optimizer={})
    with pytest.raises(protocol.Unauthenticated, match="not signed with the job's secret"):
        verifier.open(stranger)
    tampered = second.replace('"value_keys": [1]', '"value_keys": [2]')
    with pytest.raises(protocol.Unauthenticated, match="not signed with the job's secret"):
        protocol.Verifier(SECRET).open(tampered)
    with pytest.raises(RuntimeError, match="no job secret .MXNET_GC_JOB_SECRET.: start the job with mxnet_gc's launcher"):
        protocol.Signer("", 0)
    assert protocol.server_proof(SECRET, 1) != protocol.server_proof(SECRET, 0) != protocol.server_proof("b" * 64, 0)


def test_store_names_in_mxnet_registry():
    assert mx.kv.KVStoreBase.kv_registry["gc_dist_sync"] is mxnet_gc.kvstore.DistSyncStore
    assert mxnet_gc.kvstore.create("local").type == "local"  # other names are MXNet's own stores


def store_error(store, **env):
    """What creating ``store`` in a fresh process with ``env`` (None: unset) says (its settings are read once)."""
    environ = {k: v for k, v in os.environ.items() if k not in env and not k.startswith(("DMLC_", "HOROVOD_"))}
    environ.update({k: v for k, v in env.items() if v is not None})
    proc = subprocess.run([sys.executable, "-c", "import mxnet_gc; mxnet_gc.kvstore.create(%r)" % store], env=environ,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    return " ".join(proc.stderr.split())


def test_store_outside_a_job_says_how_to_start_one():
    assert ("no DMLC_* environment (this process was not started as a job's worker): start the job with mxnet_gc's "
            "launcher: `python -m mxnet_gc.launch -n W -s S python your_script.py`") in store_error("dist_sync")


def test_a_dist_sync_script_under_horovodrun_is_told_what_to_run():
    assert ("started by horovodrun (a ring job), which starts no parameter servers: use kvstore='horovod' under "
            "horovodrun, or start this dist_sync script with mxnet_gc's launcher: `python -m mxnet_gc.launch -n W -s S "
            "python your_script.py`") in store_error("dist_sync", HOROVOD_SIZE="2", HOROVOD_RANK="0")


def test_a_horovod_script_under_the_launcher_is_told_what_to_run():
    assert ("started as a parameter-server job's worker (DMLC_ROLE, by python -m mxnet_gc.launch), where every worker "
            "would run Horovod alone: start a Horovod script with `horovodrun -np W python your_script.py`, or use "
            "kvstore='dist_sync' under the launcher") in store_error("horovod", DMLC_ROLE="worker")


def test_layout_with_merge_groups():
    """Each group is one message on one server, whatever the bucket size; split keys keep their own messages."""
    from mxnet_gc.kvstore.layout import Layout

    layout = Layout(num_servers=2, bound=1000)
    keys = ["a", "b", "big", "c", "d"]
    shapes = [(10,), (20, 2), (3000,), (5,), (7,)]
    messages = layout.add(keys, shapes, groups=[["d", "c", "big"], ["a", "b"]])
    as_keys = sorted(sorted(c.key for c in m.chunks) for m in messages)
    assert as_keys == [["a", "b"], ["big"], ["big"], ["big"], ["big"], ["c", "d"]]
    assert all(len({c.message.server for c in m.chunks}) == 1 for m in messages)


def test_large_keys_are_cut_into_parts_of_at_most_the_bound():
    """A key of at least the bound is cut into parts of at most the bound, as many on every server; on one
    server too (its parts are messages that can come back while the next are being pushed)."""
    from mxnet_gc.kvstore.layout import Layout

    for servers, n, parts in ((1, 999, 1), (1, 1000, 1), (1, 4500, 5), (2, 1000, 2), (2, 3000, 4), (3, 7000, 9)):
        layout = Layout(num_servers=servers, bound=1000)
        layout.add(["k"], [(n,)])
        chunks = layout.chunks["k"]
        assert len(chunks) == parts, (servers, n)
        assert [c.begin for c in chunks[1:]] == [c.end for c in chunks[:-1]] and chunks[-1].end == n
        assert max(c.size for c in chunks) <= max(1000, -(-n // servers))
        per_server = [sum(c.size for c in chunks if c.message.server == s) for s in range(servers)]
        assert max(per_server) - min(per_server) <= parts // servers
    with pytest.raises(ValueError, match="every key being initialized exactly once"):
        Layout(2, 1000).add(["a", "b"], [(1,), (1,)], groups=[["a"]])


def test_a_key_over_a_servers_fair_share_is_spread_to_level_the_servers():
    """The Fashion-MNIST CNN (225,034 values, 91% in one dense layer) in its trainer's one merge group: on
    S servers the big layer leaves the group and fills the servers up to one level, so that each server
    carries about 1/S of the bytes (whole, it would carry the layer alone); keys within their fair share,
    or under two minimum parts, stay whole."""
    from mxnet_gc.kvstore.layout import Layout, MIN_SPREAD_PART

    shapes = [(32, 1, 3, 3), (32,), (64, 32, 3, 3), (64,), (128, 1600), (128,), (10, 128), (10,)]
    keys = list(range(len(shapes)))
    for servers in (1, 2, 4, 8):
        layout = Layout(servers, 10 ** 6)
        layout.add(keys, shapes, groups=[keys])
        big = layout.chunks[4]
        assert len(big) == servers and sorted(c.message.server for c in big) == list(range(servers))
        assert [c.begin for c in big[1:]] == [c.end for c in big[:-1]] and big[-1].end == 204800
        load = [b // 4 for b in layout.server_bytes]
        assert sum(load) == 225034
        # the group's message went first to the least loaded server (0) with the 18,816 values before the
        # layer; the layer's parts then filled every server to one level, (204,800 + 18,816) / S; the
        # group's 1,418 values after the layer went in a message after its parts
        assert max(load) / min(load) < 1.06
        if servers > 1:
            tail = layout.messages[-1]
            assert [c.key for c in tail.chunks] == [5, 6, 7] and tail.size == 1418
            load[tail.server] -= tail.size
        level = (204800 + 18816) // servers
        assert all(load[s] in (level, level + 1) for s in range(1, servers)), load
        assert len(layout.messages) == (2 + servers if servers > 1 else 1)
    for servers, shapes, whole in ((4, [(1000, 100)] * 8, True),  # 8 equal keys: each within its fair share
                                   (4, [(2 * MIN_SPREAD_PART - 1,), (10,)], True),  # too small to spread
                                   (4, [(2 * MIN_SPREAD_PART,), (10,)], False)):
        layout = Layout(servers, 10 ** 6)
        layout.add(list(range(len(shapes))), shapes)
        assert all(len(cs) == 1 for cs in layout.chunks.values()) == whole, (servers, shapes)


def test_a_large_key_is_cut_for_the_pulls_stages_by_its_payload():
    """With the pull's stages (8 stages of at least 16 KiB), the CNN's dense layer (204,800 of 225,034
    values) is cut on its servers into parts of at most about 225,034 / 8 values, each of at least 16 KiB of
    its codec's payload: dense float32 into 8 parts of 25,600, 4bit (half a byte a value) into 6 of about
    34,133, top-k at 1e-3 (a few bytes) not at all; on 2 servers each server's spread part is cut the same
    way (dense 4 + 4, 4bit 2 + 3: at least 16 KiB each)."""
    from mxnet_gc.kvstore.layout import Layout

    shapes = [(32, 1, 3, 3), (32,), (64, 32, 3, 3), (64,), (128, 1600), (128,), (10, 128), (10,)]
    keys = list(range(len(shapes)))
    stage = 225034 / 8
    for servers, payload, parts in ((1, 4.0, 8), (1, 0.5, 6), (1, 0.008, 1), (2, 4.0, 8), (2, 0.5, 5)):
        layout = Layout(servers, 10 ** 6, stages=(8, 16 << 10))
        layout.add(keys, shapes, groups=[keys], payload=lambda key: payload)
        big = layout.chunks[4]
        assert len(big) == parts, (servers, payload, [c.size for c in big])
        assert [c.begin for c in big[1:]] == [c.end for c in big[:-1]] and big[-1].end == 204800
        assert all(c.size * payload >= 16 << 10 for c in big) if parts > 1 else big[0].size == 204800
        assert all(c.size <= stage + 1 for c in big) or payload < 4
        assert all(len(layout.chunks[k]) == 1 for k in keys if k != 4)  # (the small keys stay in their group)
        assert len({c.message for c in big}) == parts and all(len(c.message.chunks) == 1 for c in big if parts > 1)
    # without a payload (Horovod's layout, LGC): nothing is cut for the stages
    layout = Layout(1, 10 ** 6, stages=(8, 16 << 10))
    layout.add(keys, shapes, groups=[keys])
    assert len(layout.messages) == 1


def test_messages_follow_the_groups_order_so_the_first_ready_gradients_go_first():
    """The trainer's group in backward's order (the last layer first): the keys before the cut dense layer
    in a first message, its parts next, the convolutions (whose gradients backward makes last) in a last
    message; a push of every key sends them in that order, whatever the order of the keys in the call."""
    from mxnet_gc.kvstore.layout import Layout

    shapes = [(32, 1, 3, 3), (32,), (64, 32, 3, 3), (64,), (128, 1600), (128,), (10, 128), (10,)]
    backward = list(range(len(shapes)))[::-1]
    layout = Layout(1, 10 ** 6, stages=(8, 16 << 10))
    layout.add(list(range(len(shapes))), shapes, groups=[backward], payload=lambda key: 0.5)
    order = [[(c.key, c.begin) for c in m.chunks] for m in layout.messages_of([0, 1, 2, 3, 4, 5, 6, 7])]
    parts = [c.begin for c in layout.chunks[4]]
    assert order == [[(7, 0), (6, 0), (5, 0)]] + [[(4, b)] for b in parts] + [[(3, 0), (2, 0), (1, 0), (0, 0)]]
    assert len(parts) == 6


def test_config_differences_name_the_fields():
    a = {"type": "4bit", "default": {"thresholds": [1, 2]}, "per_key": {}}
    b = {"type": "4bit", "default": {"thresholds": [1, 3]}, "per_key": {}, "extra": True}
    assert agreement.differences(a, b) == ["default.thresholds[1]: 2 / 3", 'extra: "(absent)" / true']
    assert agreement.differences(a, a) == []
    assert agreement.differences({"x": 1}, "none") == ['{"x": 1} / "none"']
    assert agreement.differences([1, 2], [1, 2, 3]) == ["2 items / 3 items (first extra: 3)"]


def test_init_settings_do_not_depend_on_the_order_of_keys_and_name_the_first_that_differs():
    """Keys in any order; merge groups in theirs, which is their messages' (the same on every worker)."""
    one = agreement.init_config(["b", 3, "a"], [(2,), (1, 4), (5,)], False, [["b", "a"], [3]])
    other = agreement.init_config(["a", "b", 3], [(5,), (2,), (1, 4)], False, [["b", "a"], [3]])
    assert one == other and [k for k, _ in one["keys"]] == [3, "a", "b"]
    assert agreement.disagreement("keys", {0: one, 1: other}) is None
    wrong = agreement.init_config(["a", "b", 3], [(5,), (2, 1), (1, 4)], False, None)
    message = agreement.disagreement("keys", {1: wrong, 0: one})
    assert message.startswith('the workers set different keys in an init call (rank 0 / rank 1): groups: '
                              '[["b", "a"], [3]] / null; keys[2]: ["b", [2]] / ["b", [2, 1]]; every worker must '
                              'init the same keys'), message
    reordered = agreement.init_config(["a", "b", 3], [(5,), (2,), (1, 4)], False, [[3], ["a", "b"]])
    assert agreement.disagreement("keys", {0: one, 1: reordered}).startswith(
        'the workers set different keys in an init call (rank 0 / rank 1): groups[0]: ["b", "a"] / [3]')


def test_a_residual_saved_under_another_cut_is_cut_again_when_it_is_one_value_a_value():
    """A worker's residuals saved where a key was one chunk (Horovod's store) restore into the parameter
    server's cut of it for the pull's stages (4 + 6 values), and back; a residual that is not one value a
    value (top-k's, with its threshold and step count per chunk) is refused, naming the chunk."""
    from mxnet_gc.kvstore import residual_file

    whole = np.arange(10, dtype=np.float32)
    parts = [mx.nd.zeros(4), mx.nd.zeros(6)]
    residual_file.restore("f", {}, {"'w'/0": whole}, [("w", 0, parts[0]), ("w", 1, parts[1])], 1, per_value=True)
    assert np.array_equal(np.concatenate([p.asnumpy() for p in parts]), whole)
    one = mx.nd.zeros(10)
    residual_file.restore("f", {}, {"'w'/0": whole[:4], "'w'/1": whole[4:]}, [("w", 0, one)], 1, per_value=True)
    assert np.array_equal(one.asnumpy(), whole)
    with pytest.raises(ValueError, match="chunk 0 of key 'w': 12 values saved, 6 here"):
        residual_file.restore("f", {}, {"'w'/0": np.zeros(12, np.float32)},
                              [("w", 0, mx.nd.zeros(6)), ("w", 1, mx.nd.zeros(8))], 1, per_value=False)
