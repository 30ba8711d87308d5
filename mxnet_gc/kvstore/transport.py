"""The interface of a transport: what a store and a compression method's own rounds send through.

A transport is a folder of this package (``ps/``: ps-lite's parameter server; ``horovod/``: Horovod's ring
collectives) holding three things: a ``Transport`` subclass (this worker's connection to the job), a
``StoreBase`` subclass (the kvstore API over it) and the rounds of the methods that send messages of their
own (LGC's ``LGCRounds`` subclass).  The store's name goes into ``STORES`` of ``kvstore/__init__.py``.

Every transport gives what is here.  What moves data differs (a parameter server pushes to and pulls
from keys on servers; a ring starts named collectives that every worker joins), so those calls are each
transport's own; every one of them has a deadline or ends with the job (no call waits forever).
"""


class Transport:
    """A worker's connection to the other processes of a job (made by a collective call)."""

    @property
    def rank(self):
        """This worker's rank, 0 to ``num_workers`` - 1."""
        raise NotImplementedError

    @property
    def num_workers(self):
        raise NotImplementedError

    def agree(self, what, config):
        """Raises on every worker, saying how the workers differ, unless every worker passes the same
        JSON-serializable ``config`` (``what``: one of agreement.SUBJECTS).  A collective call."""
        raise NotImplementedError

    def barrier(self):
        """Returns when every worker has called it."""
        raise NotImplementedError
