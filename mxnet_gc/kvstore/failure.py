"""How a worker of mxnet_gc's stores ends when something fails: at once, and after the worker that
failed first."""
import os
import sys
import time

PEER_FAILURE_GRACE = 2.0  # seconds a worker failing because another one did waits before it exits


class PeerFailure(RuntimeError):
    """This worker's collective failed because another worker failed or ended first."""


def exit_at_once_on_error():
    """Makes an uncaught exception end this worker at once.

    MXNet's dist store waits at exit for every other worker (a barrier in its destructor), and Horovod's
    shutdown for every other rank; after an error the others may never get there, and the job would
    hang instead of failing.  A PeerFailure waits PEER_FAILURE_GRACE seconds first, so that the launcher
    (horovodrun names the first process to exit) names the worker that failed first, not this one.
    """
    previous = sys.excepthook
    if getattr(previous, "mxnet_gc", False):
        return

    def hook(kind, value, tb):
        previous(kind, value, tb)
        sys.stdout.flush()
        sys.stderr.flush()
        if isinstance(value, PeerFailure):
            time.sleep(PEER_FAILURE_GRACE)
        os._exit(1)

    hook.mxnet_gc = True
    sys.excepthook = hook
