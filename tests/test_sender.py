"""mxnet_gc/kvstore/horovod/sender.py, in this process: chains run one after another in the order submitted,
on a thread of their own; a pull gets its chain's value or its error; after a failure the chains queued
behind it fail with it without running; ``drain`` waits for every chain (the jobs that send through it
are tests/test_horovod.py's)."""
import threading

import pytest

from mxnet_gc.kvstore.horovod.sender import Sender


def test_chains_run_in_order_on_one_other_thread():
    sender, ran, threads = Sender(), [], set()
    gate = threading.Event()

    def chain(i):
        if i == 0:
            gate.wait(5)  # (the caller goes on while the first chain blocks)
        threads.add(threading.current_thread().name)
        ran.append(i)
        return i * i
    tickets = [sender.submit(lambda i=i: chain(i)) for i in range(5)]
    assert ran == []  # submit returned before the first chain could end
    gate.set()
    assert [t.result() for t in tickets] == [0, 1, 4, 9, 16]
    assert ran == [0, 1, 2, 3, 4]
    assert threads == {"mxnet_gc-sender"} and not sender.on_thread()


def test_a_failed_chain_fails_those_behind_it_without_running_them():
    sender, ran = Sender(), []

    def fails():
        raise ValueError("corrupt payload of key(s) [3]")
    first = sender.submit(lambda: ran.append("first") or 1)
    failing = sender.submit(fails)
    behind = sender.submit(lambda: ran.append("behind"))
    sender.drain()
    assert first.result() == 1
    for ticket in (failing, behind):
        with pytest.raises(ValueError, match=r"^corrupt payload of key\(s\) \[3\]$"):
            ticket.result()
    assert ran == ["first"]


def test_drain_waits_for_every_chain_and_is_a_no_op_on_the_sender_thread():
    sender, done = Sender(), []
    sender.drain()  # (nothing submitted)
    gate = threading.Event()
    sender.submit(lambda: gate.wait(5))
    inner = sender.submit(lambda: sender.drain() or sender.on_thread())  # (a chain's own blocking calls)
    sender.submit(lambda: done.append(True))
    threading.Timer(0.2, gate.set).start()
    sender.drain()
    assert done == [True] and inner.result() is True
