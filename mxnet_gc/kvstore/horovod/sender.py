"""A push's collectives on a thread of their own, so that the push returns at once.

Horovod's MXNet allgather and alltoall return only once complete (their output's size is set by the
collective), and the compressed allreduce waits between its two halves for the owner's sum.  Made on
the caller's thread, they would hold it until the last message of a push has travelled, and nothing
after the push (the pulls' decodes, the optimizer's updates) could be queued on MXNet's engine while
later messages travel.  ``Sender`` runs each message's chain of collectives in push order on one helper
thread; a pull waits for its message's ``Ticket``.

Every blocking call inside a chain has its own deadline (timed_collectives.py), so a chain always ends.
Once a chain fails, the chains queued after it fail with its error without running (their peers are
gone, or the workers' steps no longer pair): a job does not wait out one timeout per message.  A
blocking collective made on another thread must ``drain`` first: Horovod pairs collectives by name, but
a blocking call holds its thread until every worker joins it, so two threads queueing blocking calls in
different orders on two workers would wait for each other.
"""
import queue
import threading


class Ticket:
    """The outcome of one chain: its value, or the exception it raised."""

    def __init__(self, call):
        self.call = call
        self._done = threading.Event()
        self._value = self._error = None

    def settle(self, value=None, error=None):
        self._value, self._error = value, error
        self._done.set()

    def wait(self):
        """Returns once the chain has run (its collectives have deadlines)."""
        self._done.wait()

    def result(self):
        """The chain's value once it has run; raises what it raised."""
        self.wait()
        if self._error is not None:
            raise self._error
        return self._value


class Sender:
    """Chains of collectives (callables), run one after another in the order submitted."""

    def __init__(self):
        self._chains = queue.Queue()
        self._thread = None
        self._failure = None  # the first chain's exception: every later chain fails with it
        self._last = None  # the last ticket submitted

    def submit(self, call):
        """Queues ``call()``; returns its Ticket."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mxnet_gc-sender", daemon=True)
            self._thread.start()
        ticket = self._last = Ticket(call)
        self._chains.put(ticket)
        return ticket

    def on_thread(self):
        """Whether the caller is the sender's thread (a chain's own blocking calls need no drain)."""
        return threading.current_thread() is self._thread

    def drain(self):
        """Returns once every chain submitted so far has run (their errors stay with their tickets)."""
        if self._last is not None and not self.on_thread():
            self._last.wait()

    def _run(self):
        while True:
            ticket = self._chains.get()
            if self._failure is not None:
                ticket.settle(error=self._failure)
                continue
            try:
                ticket.settle(value=ticket.call())
            except Exception as e:  # (a collective's failure, a timeout, a corrupt payload: the pull raises it)
                self._failure = e
                ticket.settle(error=e)
