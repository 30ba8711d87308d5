"""A worker's control plane to the servers of the compressed dist store: commands, value-key
registration, and each server's status (errors, configuration agreement, completed rounds).

Every server has a status key (protocol.STATUS_WORDS float32) and a counters key (its numbers) that
workers pull after each round; a worker raises, with the status's message, when a server reports a new
error, when the workers' configurations differ, or when a server completed other rounds of pushes than
this worker sent it.
"""
import mxnet as mx

from ... import _mx, config
from .. import protocol


class ServerLink:
    """Commands to, and status from, every server of a job (through MXNet's dist store ``kv``)."""

    def __init__(self, kv, num_servers, allocator):
        self.kv, self.num_servers = kv, num_servers
        self.rank = kv.rank
        # (protocol.control_keys: the first two keys of each server)
        self.status_keys = [allocator.on_server(s) for s in range(num_servers)]
        self.counter_keys = [allocator.on_server(s) for s in range(num_servers)]
        self.status = [mx.nd.zeros(protocol.STATUS_WORDS) for _ in range(num_servers)]
        self.counters = [mx.nd.zeros(protocol.COUNTER_WORDS) for _ in range(num_servers)]
        self.errors_seen = [0] * num_servers
        self.rounds_pushed = [0] * num_servers  # rounds of messages this worker pushed to each server
        self.count_rounds = True  # (dist_async: a round is one worker's push, of any worker)
        self.servers_are_ours = False  # (MXNet's own servers take every command for an optimizer)
        secret = config.settings().job_secret
        self.signer = protocol.Signer(secret, self.rank)
        if self.rank == 0:
            _mx.send_command_to_servers(kv, 0, self.signer.hello())
        _mx.send_command_to_servers(kv, 0, self.signer.command("join", rank=self.rank))
        kv.init(self.status_keys + self.counter_keys, [mx.nd.zeros(protocol.STATUS_WORDS)] * num_servers
                + [mx.nd.zeros(protocol.COUNTER_WORDS)] * num_servers)
        self.register(self.status_keys + self.counter_keys,
                      [protocol.STATUS_WORDS] * num_servers + [protocol.COUNTER_WORDS] * num_servers)
        kv.pull(self.status_keys, out=self.status)
        stock = [s for s, status in enumerate(self.status) if status[protocol.ST_MARK].asscalar() != protocol.SERVER_MARK]
        if stock:
            from ...launch import HOW_TO_LAUNCH  # (here: `python -m mxnet_gc.launch` runs that module unimported)
            self.end_job()
            raise RuntimeError(
                "mxnet_gc: server(s) %s run MXNet's own parameter server, not mxnet_gc's (`python -m "
                "mxnet_gc.kvstore.ps.server`).  Start the job with mxnet_gc's launcher (`%s`), which runs mxnet_gc's "
                "server on the server hosts; MXNet's launcher runs the training script there, and `import mxnet` "
                "starts MXNet's server." % (stock, HOW_TO_LAUNCH))
        self.servers_are_ours = True
        strangers = [s for s, status in enumerate(self.status) if list(status[protocol.ST_PROOF:protocol.ST_PROOF +
                     protocol.PROOF_WORDS].asnumpy().astype(int)) != protocol.server_proof(secret, s)]
        if strangers:
            self.end_job()
            raise RuntimeError("mxnet_gc: server(s) %s do not hold this job's secret (MXNET_GC_JOB_SECRET): processes "
                               "outside the job took the servers' places (ps-lite authenticates nothing: any process "
                               "that reaches the scheduler first becomes a server), or they belong to another job"
                               % strangers)

    def end_job(self):
        """Ends this worker's part of the job in order (as MXNet does when its store is freed: a barrier,
        rank 0 stops the servers, ps-lite shuts down), so that no process of the job waits for it."""
        if self.kv.handle is None:
            return
        if self.servers_are_ours:
            self.command("ended", rank=self.rank, all_ranks=True)
        _mx.free_kvstore(self.kv)

    def command(self, op, all_ranks=False, **fields):
        """Sends a command to every server (rank 0 only, unless ``all_ranks``)."""
        if all_ranks or self.rank == 0:
            _mx.send_command_to_servers(self.kv, 0, self.signer.command(op, **fields))

    def register(self, value_keys, sizes):
        """Lets each server keep a handle on the value arrays it will write (one push each, by rank 0)."""
        if self.rank == 0:
            self.command("expect", value_keys=value_keys)
            zeros = [mx.nd.zeros(n) for n in sizes]
            for k, z in zip(value_keys, zeros):
                self.kv.push(k, z)
            for z in zeros:
                _mx.wait_to_write(z)
        _mx.barrier(self.kv)

    def synchronize(self, config=None, round=None):
        """A barrier of all workers, then every server's status, checked (see ``check``)."""
        _mx.barrier(self.kv)
        self.kv.pull(self.counter_keys, out=self.counters)
        self.check(config, round)

    def check(self, config=None, round=None):
        """Raises on a disagreement of the workers' settings in configuration round ``round`` (when ``config``,
        this worker's, is given; the servers' message says how they differ, agreement.py), on a new
        server-side error, or (with
        ``count_rounds``) on a server that completed other rounds than this worker pushed (the counters
        pulled already; a server's message is pulled when needed)."""
        for server, counters in enumerate(self.counters):
            s = counters.asnumpy()
            message = _Message(self, server)
            if config is not None:  # (after the barrier every worker's config of ``round`` has arrived)
                if s[protocol.ST_AGREED_ROUND] != round % protocol.ROUNDS_MODULUS:
                    raise RuntimeError("mxnet_gc: server %d has no verdict on configuration round %d (its last: %d): "
                                       "the workers' collective calls are out of step"
                                       % (server, round, s[protocol.ST_AGREED_ROUND]))
                if s[protocol.ST_AGREED_MISMATCH] or s[protocol.ST_AGREED_HASH] != protocol.config_hash(config):
                    raise ValueError("mxnet_gc: %s (this worker is rank %d; from server %d)"
                                     % (message, self.rank, server))
            errors = int(s[protocol.ST_ERRORS])
            if errors > self.errors_seen[server]:
                self.errors_seen[server] = errors
                raise RuntimeError("mxnet_gc server %d: %s" % (server, message))
            pushed = self.rounds_pushed[server] % protocol.ROUNDS_MODULUS
            if self.count_rounds and int(s[protocol.ST_ROUNDS_DONE]) != pushed and s[protocol.ST_ENDED]:
                raise RuntimeError("mxnet_gc: worker %d ended its part of the job (its process exited, or it freed its "
                                   "store) while this worker (rank %d) still pushes; server %d completed %d rounds where "
                                   "this worker pushed %d: the job cannot go on (every worker must run the same steps)"
                                   % (int(s[protocol.ST_ENDED_RANK]), self.rank, server, int(s[protocol.ST_ROUNDS_DONE]),
                                      pushed))
            if self.count_rounds and int(s[protocol.ST_ROUNDS_DONE]) != pushed:
                raise RuntimeError("mxnet_gc server %d completed %d rounds of pushes where this worker (rank %d) pushed "
                                   "%d: %s.  The workers did not push the same messages: every worker must push each "
                                   "key once per step and make the same collective calls (set_gradient_compression, "
                                   "init, regroup, save_residuals) at the same steps (a push of another dtype by a "
                                   "process that bypasses mxnet_gc's store is lost too); the pulled values cannot be "
                                   "trusted" % (server, int(s[protocol.ST_ROUNDS_DONE]), self.rank, pushed,
                                                self.incomplete_rounds(server)))

    def message(self, server):
        """The last message of ``server``'s status (pulled now)."""
        self.kv.pull(self.status_keys[server], out=self.status[server])
        return protocol.read_message(self.status[server].asnumpy())

    def incomplete_rounds(self, server):
        """What ``server`` says of its rounds that hold fewer pushes than workers (asked for now)."""
        self.command("incomplete", rank=self.rank, all_ranks=True)
        self.kv.pull(self.status_keys[server], out=self.status[server])
        s = self.status[server].asnumpy()
        self.errors_seen[server] = int(s[protocol.ST_ERRORS])
        return protocol.read_message(s)


class _Message:
    """A server's status message, pulled when it is formatted (most checks raise nothing)."""

    def __init__(self, link, server):
        self.link, self.server = link, server

    def __str__(self):
        return self.link.message(self.server)
