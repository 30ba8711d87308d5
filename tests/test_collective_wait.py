"""mxnet_gc/kvstore/horovod/collective_wait.py: a blocking call returns its value, times out at its deadline (the
caller goes on; a later call gets a helper of its own), or turns MXNet's error into CollectiveError."""
import threading
import time

import pytest
from mxnet.base import MXNetError

from mxnet_gc.kvstore.horovod.collective_wait import CollectiveError, Waiter


def test_a_call_returns_times_out_or_fails():
    waiter = Waiter()
    assert waiter.run(lambda: 42, time.monotonic() + 5) == 42
    never = threading.Event()
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        waiter.run(never.wait, start + 0.3)
    assert 0.25 < time.monotonic() - start < 3
    assert waiter.run(lambda: "next", time.monotonic() + 5) == "next"  # (a new helper: the old one is blocked)

    def aborted():
        raise MXNetError("Traceback (most recent call last):\n  File \"x.py\", line 1\nHorovod has been shut down.")
    with pytest.raises(CollectiveError, match="^Horovod has been shut down.$"):
        waiter.run(aborted, time.monotonic() + 5)
    never.set()
