"""The parameter server as a transport: what the dist store's rounds and LGC's rounds send through.

A ``PSPort`` owns MXNet's dist store (ps-lite's connections), the allocation of internal keys on a
chosen server and the control plane (server_link.py: commands, status, configuration agreement).
Rounds use it to make keys, push payloads, pull values, wait at a barrier and command the servers;
nothing else of the store touches ps-lite.
"""
import mxnet as mx

from ... import _mx, config
from .. import protocol
from ..transport import Transport
from .server_link import ServerLink


class PSPort(Transport):
    """A worker's connection to the servers of a job (a collective to create: every worker does)."""

    def __init__(self, num_servers):
        with config.kvstore_environ(protocol.MXNET_BIGARRAY_BOUND):  # MXNet never splits: we place keys
            self._kv = mx.kv.create("dist_async")
        if self._kv.type != "dist_async":
            raise RuntimeError("mxnet_gc dist store: MXNet did not create a dist store (got %r)" % self._kv.type)
        self.num_servers = num_servers
        self.allocator = protocol.KeyAllocator(num_servers)
        self._link = None
        self._agreements = 0  # configuration rounds so far (agree)

    def connect(self):
        """Greets the servers (rank 0) and sets up the status keys (a collective call)."""
        self._link = ServerLink(self._kv, self.num_servers, self.allocator)

    @property
    def rank(self):
        return self._kv.rank

    @property
    def num_workers(self):
        return self._kv.num_workers

    # ---- data ----

    def key_on(self, server):
        """A new internal key that lives on ``server``."""
        return self.allocator.on_server(server)

    def init(self, keys, arrays):
        """Creates ``keys`` on their servers with rank 0's ``arrays`` (a collective call)."""
        self._kv.init(keys, arrays)

    def push(self, keys, arrays, priority=0):
        """Sends ``arrays`` to ``keys`` (asynchronously: the engine reads the arrays later)."""
        self._kv.push(keys, arrays, priority=priority)

    def pull(self, keys, outs, priority=0):
        """Fetches the servers' values of ``keys`` into ``outs`` (asynchronously)."""
        self._kv.pull(keys, out=outs, priority=priority)

    def barrier(self):
        """Returns when every worker has called it."""
        _mx.barrier(self._kv)

    def agree(self, what, config):
        """Every worker's ``config`` compared on the servers (``Aggregator.on_config``), then a barrier and
        their status: raises on every worker when they differ."""
        self._agreements += 1
        self.command("config", rank=self.rank, round=self._agreements, config=config, what=what, all_ranks=True)
        self.synchronize(config=config, round=self._agreements)

    def set_mxnet_compression(self, params):
        """MXNet's own gradient compression on the pushes (its 2bit)."""
        self._kv.set_gradient_compression(params)

    # ---- control (server_link.py) ----

    def register(self, value_keys, sizes):
        """Lets the servers write the value arrays of ``value_keys`` (a collective call)."""
        self._link.register(value_keys, sizes)

    def command(self, op, all_ranks=False, **fields):
        """Sends a command to every server (rank 0 only, unless ``all_ranks``)."""
        self._link.command(op, all_ranks=all_ranks, **fields)

    def synchronize(self, config=None, round=None):
        """A barrier, then every server's status, checked (``config``: this worker's settings to agree on in
        configuration round ``round``)."""
        self._link.synchronize(config, round)

    def check(self):
        """Checks the status last pulled with ``status_keys`` (a server's error, a lost push)."""
        self._link.check()

    def count_round(self, server, rounds=1):
        """Counts rounds of pushes sent to ``server`` (the servers' status must show as many done)."""
        self._link.rounds_pushed[server] += rounds

    def stop_counting_rounds(self):
        """dist_async: a server's round is any one worker's push, so rounds are not compared."""
        self._link.count_rounds = False

    @property
    def status(self):
        """(the servers' counters keys, arrays to pull them into): pulled with a round's last values, then
        ``check``."""
        return self._link.counter_keys, self._link.counters

    def end_job(self):
        """Ends this worker's part of the job in order (server_link.py)."""
        self._link.end_job()
