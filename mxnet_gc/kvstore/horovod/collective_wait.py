"""Waiting for Horovod's collectives with a timeout.

A collective that some worker never joins never completes, and MXNet's waits (``wait_to_read``, and
Horovod's allgather, which waits inside) block without a limit.  A helper thread makes the blocking
call; the caller waits for the helper until a deadline.  A call that timed out leaves its helper
blocked (a daemon thread): the caller then fails the job, and later calls get a helper of their own.
"""
import queue
import threading
import time

from mxnet.base import MXNetError


class CollectiveError(RuntimeError):
    """A collective failed (Horovod aborted it: another worker failed or ended)."""


class Waiter:
    """Runs blocking calls on a helper thread, each until a deadline."""

    def __init__(self):
        self._requests = None

    def run(self, call, deadline):
        """``call()``'s result, if it returns before ``deadline`` (time.monotonic()); else TimeoutError.
        CollectiveError when it raises MXNet's error."""
        if self._requests is None:
            self._requests = queue.Queue()
            threading.Thread(target=self._serve, args=(self._requests,), daemon=True).start()
        answer = queue.Queue(maxsize=1)
        self._requests.put((call, answer))
        try:
            ok, value = answer.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            self._requests = None  # (its helper is blocked)
            raise TimeoutError from None
        if not ok:
            raise CollectiveError(value)
        return value

    @staticmethod
    def _serve(requests):
        while True:
            call, answer = requests.get()
            try:
                answer.put((True, call()))
            except MXNetError as e:
                answer.put((False, _reason(e)))


def _reason(error):
    """MXNet's error text without its stack trace lines."""
    lines = [line.strip() for line in str(error).splitlines()]
    kept = [line for line in lines if line and not line.startswith(("[bt]", "File ", "Traceback", "Stack trace"))]
    return " ".join(kept) or repr(error)
