"""The compressed allreduce's parts (mxnet_gc/kvstore/horovod/ring_scatter.py), in this process: where a message is
cut, and which parts go by pairwise rounds.  The values pulled on real jobs are tests/test_horovod.py's."""
import pytest

import mxnet_gc
from mxnet_gc.kvstore.layout import Layout
from mxnet_gc.kvstore.horovod.ring_scatter import PAIRWISE_WORDS, RingScatter

POW2 = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]


def message(sizes, codec):
    """One message of keys of these sizes, every key with ``codec``."""
    layout = Layout(1, 10 ** 9)
    keys = ["k%d" % i for i in range(len(sizes))]
    (m,) = layout.add(keys, [(n,) for n in sizes], groups=[keys])
    created = mxnet_gc.codecs.create(codec)
    m.set_codecs(lambda key: created, 1)
    return m


@pytest.mark.parametrize("workers", [2, 3, 4, 7])
@pytest.mark.parametrize("codec, per_word", [({"type": "4bit", "thresholds": POW2}, 8),
                                             ({"type": "gc_2bit", "threshold": 0.5}, 16)])
def test_parts_are_cut_where_payload_words_start(workers, codec, per_word):
    m = message([30 * 4, 4, 257], codec)
    parts = [RingScatter(m, workers, r) for r in range(workers)]
    bounds = parts[0].bounds
    assert bounds[0] == 0 and bounds[-1] == m.size and bounds == sorted(bounds)
    chunk_starts = {c.offset for c in m.chunks}
    for b in bounds[1:-1]:
        start = max(s for s in chunk_starts if s <= b)
        assert b == m.size or (b - start) % per_word == 0
    assert sum(parts[0].splits) == m.payload_words  # (every word in one part)
    for r, p in enumerate(parts):
        assert p.owner_residual.size == bounds[r + 1] - bounds[r] and p.splits == parts[0].splits


def test_large_parts_go_by_pairwise_rounds_from_three_workers():
    """With rounds (MXNET_GC_ALLTOALL=rounds, the default): pairwise rounds when every part has PAIRWISE_WORDS payload
    words and W > 2 (with 2 workers one alltoall is already one flow each way); one alltoall for smaller
    parts, and for every part without rounds."""
    large = message([4 * 8 * PAIRWISE_WORDS + 1000, 4], {"type": "4bit", "thresholds": POW2})
    assert [RingScatter(large, w, 0, rounds=True).pairwise for w in (2, 3, 4)] == [False, True, True]
    assert min(RingScatter(large, 4, 0).splits) >= PAIRWISE_WORDS
    assert not RingScatter(large, 4, 0).pairwise
    assert not RingScatter(large, 5, 0, rounds=True).pairwise  # (parts of fewer words)
    small = message([30 * 4, 4, 257], {"type": "4bit", "thresholds": POW2})
    assert not any(RingScatter(small, w, 0, rounds=True).pairwise for w in (2, 3, 4))


def test_horovod_settings():
    from mxnet_gc.config import Settings

    assert Settings.from_environ({}).alltoall == "rounds"
    assert Settings.from_environ({"MXNET_GC_ALLTOALL": "at_once"}).alltoall == "at_once"
    with pytest.raises(ValueError, match="MXNET_GC_ALLTOALL must be one of rounds, at_once, got 'ring'"):
        Settings.from_environ({"MXNET_GC_ALLTOALL": "ring"})
    assert Settings.from_environ({}).alltoall_peers == 1
    assert Settings.from_environ({"MXNET_GC_ALLTOALL_PEERS": "3"}).alltoall_peers == 3
    with pytest.raises(ValueError, match="MXNET_GC_ALLTOALL_PEERS must be >= 1, got '0'"):
        Settings.from_environ({"MXNET_GC_ALLTOALL_PEERS": "0"})
    assert Settings.from_environ({}).horovod_message_bytes == 64 << 20
    assert Settings.from_environ({"MXNET_GC_HOROVOD_MESSAGE_BYTES": "1024"}).horovod_message_bytes == 1024
    with pytest.raises(ValueError, match="MXNET_GC_HOROVOD_MESSAGE_BYTES must be >= 4, got '0'"):
        Settings.from_environ({"MXNET_GC_HOROVOD_MESSAGE_BYTES": "0"})


def test_the_owners_sum_refuses_parts_of_the_wrong_size():
    import mxnet as mx

    m = message([30 * 4, 4, 257], {"type": "4bit", "thresholds": POW2})
    scatter = RingScatter(m, 3, 1)
    words = scatter.splits[1]
    with pytest.raises(ValueError, match="the alltoall brought %d words, not 3 workers' parts of %d"
                                         % (3 * words - 1, words)):
        scatter.push_reduce(mx.nd.zeros(3 * words - 1), step=0)
