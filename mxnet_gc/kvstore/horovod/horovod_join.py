"""Joining a job of ``horovodrun --gloo``, with mxnet_gc's message when a rank never comes.

``hvd.init`` meets the other ranks through horovodrun's rendezvous server (HTTP) on a background thread
of Horovod's.  When a rank exited before it got there (a script that failed, or returned, before creating
its store), that thread throws gloo's IoException after HOROVOD_GLOO_TIMEOUT_SECONDS (30 by default),
which nothing catches in C++: the process aborts ("terminate called after throwing an instance of
'gloo::IoException'", exit status 134) and Python never sees an exception.  So each rank first announces
itself on the same server (scope ``mxnet_gc``, its rank as the key) and waits for every rank's
announcement for as long: a rank that never comes is named in a RuntimeError, and ``hvd.init`` runs only
once every rank is there.  Outside horovodrun's static gloo jobs (mpirun, elastic jobs), and once Horovod
runs, ``hvd.init`` is called alone.  The server is horovodrun's own, without authentication; only the
status of its answers is read.
"""
import time
import urllib.error
import urllib.request

from ... import config

SCOPE = "mxnet_gc"
REQUEST_TIMEOUT = 10.0  # seconds for one request to the rendezvous server
POLL = 0.1  # seconds between two looks for a rank not there yet


def init(hvd):
    """``hvd.init()``, after every rank of a static ``horovodrun --gloo`` job has announced itself."""
    settings = config.settings()
    if settings.rendezvous and not hvd.is_initialized():
        _wait_for_ranks("%s/%s/" % (settings.rendezvous, SCOPE), settings.horovod_rank, settings.horovod_size,
                        settings.gloo_timeout)
    hvd.init()


def _wait_for_ranks(url, rank, size, timeout):
    """Puts this rank's key under ``url``, then waits until every rank's is there (``timeout`` seconds)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # (never through an http_proxy)

    def request(key, method, data=None):
        try:
            with opener.open(urllib.request.Request(url + str(key), data=data, method=method),
                             timeout=REQUEST_TIMEOUT):
                return True
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return False
            raise RuntimeError("mxnet_gc horovod store: horovodrun's rendezvous server at %s answered %s"
                               % (url, e)) from None
        except OSError as e:
            raise RuntimeError("mxnet_gc horovod store: cannot reach horovodrun's rendezvous server at %s (%s); "
                               "did horovodrun end?" % (url, e)) from None

    request(rank, "PUT", b"1")
    deadline = time.monotonic() + timeout
    missing = [r for r in range(size) if r != rank]
    while missing:
        if request(missing[0], "GET"):
            missing.pop(0)
        elif time.monotonic() > deadline:
            missing = [r for r in missing if not request(r, "GET")]
            if missing:
                raise RuntimeError("mxnet_gc horovod store: rank(s) %s of %d did not start their store within %g s "
                                   "(HOROVOD_GLOO_TIMEOUT_SECONDS): every rank must create it "
                                   "(mxnet_gc.kvstore.create('horovod')); a rank that exited or failed before says "
                                   "why in its output" % (missing, size, timeout))
        else:
            time.sleep(POLL)
