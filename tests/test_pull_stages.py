"""The dist store's pull stages and push queue (kvstore/ps/pull_stages.py), in-process."""
import numpy as np

from mxnet_gc.kvstore.ps.pull_stages import PULL_STAGE_MIN_BYTES, PULL_STAGES, PushQueue, stage_min_bytes, stages


class Message:
    def __init__(self, name, server=0):
        self.name, self.server, self.rounds = name, server, 0


def pushes(sizes_in_bytes):
    messages = [Message("m%d" % i) for i in range(len(sizes_in_bytes))]
    return messages, [(m, np.zeros(n // 4, np.float32)) for m, n in zip(messages, sizes_in_bytes)]


def names(result):
    return [[m.name for m in batch] for _, batch in result]


def test_small_pushes_are_one_stage():
    messages, pushed = pushes([1000] * 5)
    assert names(stages(pushed, messages, False, False)) == [["m0", "m1", "m2", "m3", "m4"]]


def test_large_pushes_split_into_about_pull_stages_stages_in_push_order():
    each = 4 * PULL_STAGE_MIN_BYTES
    messages, pushed = pushes([each] * (2 * PULL_STAGES))
    result = stages(pushed, messages, False, False)
    assert len(result) == PULL_STAGES
    assert sum(names(result), []) == [m.name for m in messages]
    assert all(len(arrays) == 2 for arrays, _ in result)


def test_stages_grow_with_the_workers():
    """A stage's least payload is 16 KiB up to 4 workers and 1 MiB beyond (a barrier there waits for the
    slowest of more workers): the same pushes make fewer stages."""
    assert [stage_min_bytes(w) for w in (1, 2, 4, 5, 8, 16)] == [PULL_STAGE_MIN_BYTES] * 3 + [1 << 20] * 3
    messages, pushed = pushes([256 << 10] * 32)  # 8 MiB
    assert len(stages(pushed, messages, False, False, stage_min_bytes(4))) == PULL_STAGES
    assert len(stages(pushed, messages, False, False, stage_min_bytes(8))) == PULL_STAGES  # (1 MiB each)
    messages, pushed = pushes([192 << 10] * 16)  # 3 MiB
    assert len(stages(pushed, messages, False, False, stage_min_bytes(4))) == PULL_STAGES
    assert len(stages(pushed, messages, False, False, stage_min_bytes(8))) == 3


def test_a_short_last_stage_joins_the_one_before():
    messages, pushed = pushes([PULL_STAGE_MIN_BYTES, PULL_STAGE_MIN_BYTES, PULL_STAGE_MIN_BYTES // 4])
    assert names(stages(pushed, messages, False, False)) == [["m0"], ["m1", "m2"]]


def test_each_message_a_stage_and_asynchronous_one_stage():
    messages, pushed = pushes([100, 100, 100])
    # (then a last stage with nothing to wait for: the pull of the servers' status comes with it)
    assert names(stages(pushed, messages, True, False)) == [["m0"], ["m1"], ["m2"], []]
    assert names(stages(pushed, messages, True, True)) == [["m0", "m1", "m2"]]


def test_messages_pulled_without_a_push_come_with_the_last_stage():
    messages, pushed = pushes([PULL_STAGE_MIN_BYTES] * 2)
    extra = Message("weights")
    result = stages(pushed, messages + [extra], False, False)
    assert names(result) == [["m0"], ["m1", "weights"]]
    assert [len(arrays) for arrays, _ in result] == [1, 1]


class Keys:
    """The messages' push keys (ps_buffers.MessageBuffers'): here their names."""

    @staticmethod
    def push_key(message):
        return message.name


class Port:
    def __init__(self):
        self.pushed, self.rounds = [], {}

    def push(self, key, array, priority=0):
        self.pushed.append(key)

    def count_round(self, server, rounds=1):
        self.rounds[server] = self.rounds.get(server, 0) + rounds


def test_queue_sends_through_a_payload_then_the_first_megabyte_then_waits():
    port = Port()
    queue = PushQueue(port, Keys())
    messages, pushed = pushes([PULL_STAGE_MIN_BYTES // 2] * 4)
    for m, a in pushed:
        queue.add(m, a, 0)
    assert queue.holds(messages[:1])
    queue.send()  # before any pull: the first megabyte goes
    assert port.pushed == ["m0", "m1"]
    queue.send(through=[pushed[2][1]])  # a stage needs m2
    assert port.pushed == ["m0", "m1", "m2"] and queue.holds(messages[3:]) and not queue.holds(messages[:3])
    queue.pulled()
    queue.send(everything=True)
    assert port.pushed == ["m0", "m1", "m2", "m3"] and port.rounds == {0: 4}
    assert [m.rounds for m in messages] == [1, 1, 1, 1]
