"""What a parameter server of the compressed dist store does with pushes and commands (no ps-lite here).

For each message it keeps an accumulator; each worker's push is checked (dtype, size), decoded and
added; when the last worker's push of a round has arrived it writes the sum (or, with an optimizer,
the updated weight) into the value array that workers pull.  Nothing here raises into MXNet: every
failure (a bad push, a corrupt payload, an optimizer that raises, a bad command) is logged, counted,
written to the status key every worker pulls after each round, and leaves the round bookkeeping as if
the push had been received, so that the workers stay in step.  ``server.py`` connects it to ps-lite.
"""
import logging
import os
import threading

import numpy as np

from ... import _mx
from .. import agreement, protocol
from .lgc_server import LGCServer
from .message_state import MessageState
from .pull_monitor import PullMonitor
from .server_optimizer import ServerOptimizer

log = logging.getLogger("mxnet_gc.server")


class Aggregator:
    """One server's messages, values, optimizer and status; ``update`` is MXNet's updater."""

    def __init__(self, server_rank, num_servers, num_workers, secret, checkpoint_dir, pull_stats_every=0,
                 join_timeout=60.0, on_join_timeout=None):
        self.server_rank, self.num_servers, self.num_workers = server_rank, num_servers, num_workers
        self.verifier = protocol.Verifier(secret)
        self.checkpoint_dir = os.path.realpath(checkpoint_dir)
        self.joined = set()  # ranks of the workers whose 'join' proved the job's secret
        self.join_timer = threading.Timer(join_timeout, self._join_timed_out)
        self.join_timer.daemon = True
        self.on_join_timeout = on_join_timeout or (lambda: os._exit(1))
        self.pull_monitor = PullMonitor(pull_stats_every)
        self.values = {}  # value key -> the stored NDArray workers pull
        self.values_np = {}  # value key -> a numpy view of it
        self.status_key, self.counters_key = protocol.control_keys(server_rank, num_servers)
        self.expected = {self.status_key, self.counters_key}  # value keys whose next push registers them
        self.messages = {}  # push key -> MessageState
        self.status = np.zeros(protocol.STATUS_WORDS, np.float32)
        self.status[protocol.ST_MARK] = protocol.SERVER_MARK
        self.status[protocol.ST_PROOF:protocol.ST_PROOF + protocol.PROOF_WORDS] = protocol.server_proof(secret, server_rank)
        self.configs = {}  # config round -> {worker rank: config}
        self.optimizer = ServerOptimizer()
        self.pushes = 0
        self.bytes = 0
        self.lgc = LGCServer(num_workers)
        self.asynchronous = False  # dist_async: every push is a round of its own

    # ---- pushes ----

    def update(self, key, recv, stored):
        """Called by MXNet for every push after a key's first (init) push; never raises."""
        try:
            # MXNet may still be writing recv on its engine (its 2bit dequantizes asynchronously into a
            # buffer that lives only while this call runs): wait before anything returns.
            recv.wait_to_read()
            self._update(key, recv, stored)
        except Exception as e:  # noqa: BLE001  (MXNet would swallow it and the workers would not know)
            log.exception("push to key %d", key)
            self.error("push to key %d failed on server %d: %s: %s" % (key, self.server_rank, type(e).__name__, e))

    def _update(self, key, recv, stored):
        if key in self.expected:
            self._register(key, recv, stored)
            return
        if self.lgc.owns(key):
            self._lgc_push(key, recv)
            return
        message = self.messages.get(key)
        if message is None:
            self.error("push to key %d, which no layout assigns to server %d" % (key, self.server_rank))
            return
        self.pushes += 1
        self.bytes += recv.size * np.dtype(recv.dtype).itemsize
        try:
            problem = self._check_push(message, key, recv)
            if problem:
                self.error(problem)
                message.rejected = True
            else:
                message.add(_mx.host_view(recv))
        except Exception as e:  # noqa: BLE001  a corrupt payload: this round's values stay as they were
            log.exception("push to key %d", key)
            self.error("rejected a push to key %d (for keys %s): %s; the values are left unchanged this round"
                       % (key, message.keys, e))
            message.rejected = True
        message.count += 1
        if message.count == self.num_workers or self.asynchronous:
            self.finish_round(message)

    def _lgc_push(self, key, recv):
        self.pushes += 1
        self.bytes += recv.size * np.dtype(recv.dtype).itemsize
        if recv.dtype != np.float32:
            self.error("rejected a push of %s to LGC key %d: messages are float32" % (np.dtype(recv.dtype).name, key))
            words = np.zeros(0, np.float32)
        else:
            words = _mx.host_view(recv).copy()
        rounds, error = self.lgc.push(key, words)
        if error:
            self.error(error)
        for _ in range(rounds):
            self.count_round()

    def _register(self, key, recv, stored):
        if stored.dtype != np.float32 or recv.dtype != np.float32:
            self.error("key %d: registered with a %s array, pushed %s; mxnet_gc's servers hold float32"
                       % (key, np.dtype(stored.dtype).name, np.dtype(recv.dtype).name))
            return
        self.expected.discard(key)
        self.values[key] = stored
        self.values_np[key] = _mx.host_view(stored)
        if key in (self.status_key, self.counters_key):
            self.publish_status()

    @staticmethod
    def _check_push(message, key, recv):
        """Why a push cannot be added (a message), or None."""
        if recv.dtype != np.float32:
            return ("rejected a push of %s to key %d (for keys %s): payloads and values are float32; the values "
                    "are left unchanged this round" % (np.dtype(recv.dtype).name, key, message.keys))
        if recv.size != message.words:
            return ("rejected a push of %d float32 words to key %d (for keys %s), expected %d; the values are "
                    "left unchanged this round" % (recv.size, key, message.keys, message.words))
        return None

    def finish_round(self, message):
        on_weights = self.optimizer.active and not message.reduce_only
        difference = on_weights and message.pull_key is not None  # compressed weight pulls (weight_pulls.py)
        try:
            if self.asynchronous and not on_weights and not message.reduce_only:
                raise ValueError("dist_async needs the optimizer on the servers (set_optimizer)")
            weights = self.values_np[message.value_key]
            if difference:
                message.start_difference(weights)
            try:
                if message.rejected:
                    pass
                elif not on_weights:
                    weights[:] = message.acc_np
                    if message.pull_key is not None:
                        message.encode_sum(self.values_np[message.pull_key], self.pull_monitor)
                else:
                    self.optimizer.apply(self.values[message.value_key], message)
            finally:  # (a rejected or failed round sends what the workers lack so far: the gap)
                if difference:
                    message.encode_difference(weights, self.values_np[message.pull_key], self.pull_monitor)
        except Exception as e:  # noqa: BLE001
            log.exception("round of keys %s", message.keys)
            self.error("the round of keys %s failed on server %d: %s: %s"
                       % (message.keys, self.server_rank, type(e).__name__, e))
        finally:
            message.count = 0
            message.rejected = False
            self.count_round()

    def count_round(self):
        """Counts a completed round in the status every worker pulls."""
        done = (self.status[protocol.ST_ROUNDS_DONE] + 1) % protocol.ROUNDS_MODULUS
        self.status[protocol.ST_ROUNDS_DONE] = done
        for key in (self.status_key, self.counters_key):
            published = self.values_np.get(key)
            if published is not None:
                published[protocol.ST_ROUNDS_DONE] = done

    # ---- commands from workers ----

    def command(self, cmd_id, body):
        """Runs one command body from a worker; a bad one is reported, never raised."""
        try:
            try:
                decoded = self.verifier.open(body)
            except protocol.Unauthenticated as e:
                self.error("refused a command (not run): %s" % e)
                return
            if decoded is None:
                self.error("command %d is not an mxnet_gc command (is this a stock MXNet worker?)" % cmd_id)
                return
            op, fields = decoded
            handler = getattr(self, "on_" + op, None) if isinstance(op, str) else None
            if handler is None:
                raise ValueError("unknown command %r" % (op,))
            handler(**fields)
        except Exception as e:  # noqa: BLE001
            log.exception("command %d", cmd_id)
            self.error("command failed on server %d: %s: %s" % (self.server_rank, type(e).__name__, e))

    def on_join(self, rank):
        """A worker proved the job's secret.  ps-lite lets any process that reaches the scheduler first take
        a worker's place; a place whose worker never joins within the join timeout ends the job."""
        if not (isinstance(rank, int) and 0 <= rank < self.num_workers):
            raise ValueError("join from rank %r, outside this job's %d workers" % (rank, self.num_workers))
        if not self.joined:
            self.join_timer.start()
        self.joined.add(rank)
        if len(self.joined) == self.num_workers:
            self.join_timer.cancel()

    def _join_timed_out(self):
        missing = sorted(set(range(self.num_workers)) - self.joined)
        self.error("worker rank(s) %s did not join with the job's secret within %g s of the first worker "
                   "(MXNET_GC_JOIN_TIMEOUT): a process outside the job holds its place (ps-lite authenticates "
                   "nothing: any process that reaches the scheduler first becomes a worker), or that worker "
                   "failed before creating its store; server %d ends the job"
                   % (missing, self.join_timer.interval, self.server_rank))
        self.on_join_timeout()

    def checkpoint_path(self, path):
        """``path`` if it lies in the job's checkpoint folder (MXNET_GC_CHECKPOINT_DIR), else ValueError."""
        real = os.path.realpath(path)
        if os.path.commonpath([real, self.checkpoint_dir]) != self.checkpoint_dir:
            raise ValueError("%s is outside the job's checkpoint folder %s (MXNET_GC_CHECKPOINT_DIR): the servers "
                             "read and write no file elsewhere" % (path, self.checkpoint_dir))
        return real

    def on_asynchronous(self):
        """dist_async: each push is decoded and applied with the optimizer at once."""
        self.asynchronous = True

    def on_hello(self):
        """A worker's first command (MXNet's own server takes it for an optimizer: server_link.py)."""

    def on_expect(self, value_keys):
        mine = [k for k in value_keys if protocol.server_of(k, self.num_servers) == self.server_rank]
        self.expected.update(k for k in mine if k not in self.values)

    def on_layout(self, messages, dropped=()):
        """New or changed messages; ``dropped``: value keys of messages no longer sent (after a regroup)."""
        self.messages = {k: m for k, m in self.messages.items() if m.value_key not in set(dropped)}
        for desc in messages:
            if protocol.server_of(desc["value_key"], self.num_servers) != self.server_rank:
                continue
            old = next((m for m in self.messages.values() if m.value_key == desc["value_key"]), None)
            if old is None:
                self.messages[desc["push_key"]] = MessageState(desc)
                continue
            if old.count:
                self.error("layout changed in the middle of a round of keys %s"
                           % [seg["index"] for seg in desc["segments"]])
            self.messages = {k: m for k, m in self.messages.items() if m is not old}
            old.set_layout(desc)
            self.messages[desc["push_key"]] = old
        self.optimizer.alias(self.messages.values())

    def on_config(self, rank, round, config, what="compression"):
        """A worker's settings of a collective call (``what``: see agreement.SUBJECTS); the status says
        whether the workers heard so far agree."""
        self.configs = {r: c for r, c in self.configs.items() if r >= round}  # (earlier rounds are over)
        seen = self.configs.setdefault(round, {})
        seen[rank] = (what, config)
        st = self.status
        st[protocol.ST_ROUND] = round
        st[protocol.ST_RECEIVED] = len(seen)
        st[protocol.ST_CONFIG_HASH] = protocol.config_hash(seen[min(seen)][1])
        message = agreement.different_calls({r: w for r, (w, _) in seen.items()}) or \
            agreement.disagreement(what, {r: c for r, (_, c) in seen.items()})
        st[protocol.ST_MISMATCH] = message is not None
        if len(seen) == self.num_workers:
            st[protocol.ST_AGREED_ROUND] = round
            st[protocol.ST_AGREED_MISMATCH] = st[protocol.ST_MISMATCH]
            st[protocol.ST_AGREED_HASH] = st[protocol.ST_CONFIG_HASH]
        if message is not None:
            log.error(message)
            protocol.write_message(st, message)
        self.publish_status()

    def on_incomplete(self, rank):
        """Worker ``rank`` found that this server completed other rounds than it pushed: say which rounds wait."""
        waiting = ["key(s) %s hold %d of %d workers' pushes" % (m.keys, m.count, self.num_workers)
                   for m in self.messages.values() if m.count]
        self.error("worker %d pushed other rounds than server %d completed: %s" % (
            rank, self.server_rank, "; ".join(waiting) if waiting else "no round waits for pushes now (one completed "
            "with pushes of different steps: a worker skipped or repeated a key)"))

    def on_ended(self, rank):
        """A worker ends its part of the job (at its exit); counted, so that workers still pushing say why
        their round cannot complete."""
        if not self.status[protocol.ST_ENDED]:
            self.status[protocol.ST_ENDED_RANK] = rank
        self.status[protocol.ST_ENDED] += 1
        self.publish_status()

    def on_lgc(self, phase, step, options, num_workers, groups):
        """A phase of learned gradient compression starts: its groups and keys (lgc_server.py)."""
        if num_workers != self.num_workers:
            raise ValueError("lgc: workers say %d workers, this server has %d" % (num_workers, self.num_workers))
        self.lgc.configure(phase, step, options, groups, self.server_rank, self.values_np)

    def on_lgc_save(self, path):
        self.lgc.save(self.checkpoint_path(path))

    def on_lgc_load(self, path):
        self.lgc.load(self.checkpoint_path(path))

    def on_optimizer(self, optimizer):
        self.optimizer.set(optimizer, self.messages.values())

    def on_save_states(self, path, dump_optimizer):
        gaps = {seg: gap for m in self.messages.values() for seg, gap in m.segment_gaps().items()}
        self.optimizer.save(self.checkpoint_path("%s.server%d" % (path, self.server_rank)), dump_optimizer, gaps)

    def on_load_states(self, path):
        gaps = self.optimizer.load(self.checkpoint_path("%s.server%d" % (path, self.server_rank)), self.messages.values())
        for m in self.messages.values():
            m.restore_gaps(gaps, self.values_np[m.value_key])

    # ---- helpers ----

    def error(self, message):
        """Logs a server-side error and reports it to the workers through the status key."""
        log.error(message)
        self.status[protocol.ST_ERRORS] += 1
        protocol.write_message(self.status, message)
        self.publish_status()

    def publish_status(self):
        array, counters = self.values_np.get(self.status_key), self.values_np.get(self.counters_key)
        if array is not None:
            array[:] = self.status
        if counters is not None:
            counters[:] = self.status[:protocol.COUNTER_WORDS]
