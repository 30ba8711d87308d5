"""The dist store with the optimizer on its servers (``set_optimizer``, MXNet's update_on_kvstore): the
optimizer sent to the servers, their states saved and loaded, and the compressed pulls of the weights'
differences (weight_pulls.py) started once their levels are fitted."""
import os

from ... import log, optimizer_state
from .. import agreement
from . import weight_pulls


class ServerOptimizerCalls:
    """DistSyncStore's calls of an optimizer on the servers (a part of the class: it reads the store's
    port, compression, layout and ``_optimizer_on_servers``, set by DistSyncStore.__init__)."""

    def set_optimizer(self, optimizer):
        """Sends the optimizer to the servers, which then apply it to the summed gradients (a collective).
        With 'compressed_pull' the servers then send the weights' differences (weight_pulls.py): call it
        before the codecs start (Gluon and Module.fit do, before their first step)."""
        if not self._method.optimizer_on_servers:
            raise ValueError("'lgc' needs the optimizer on the workers (update_on_kvstore=False)")
        compression = weight_pulls.applied(self._compression, self.asynchronous)
        if compression.compressed_pull and self._buffers.pulls_compressed():
            raise ValueError("set_optimizer with 'compressed_pull' must come before the compressed steps start (the "
                             "pulls then carry the weights' differences, not the sums): call it before the first push")
        description = optimizer_state.for_servers(optimizer)  # (refused here, on every worker, if it cannot be sent)
        self._send(everything=True)
        if self.rank == 0:
            self._port.command("optimizer", optimizer=description)
        self._optimizer_on_servers = True
        self._weight_changes = weight_pulls.WeightChanges()
        self._port.synchronize()
        if compression is not self._compression:  # (float32 weight pulls where the default could not run)
            self._compression = compression
            self._assign_codecs(self._layout.messages)

    def optimizer_state_files(self, fname):
        """The files ``save_optimizer_states(fname)`` writes: one per server."""
        return ["%s.server%d" % (os.path.abspath(fname), s) for s in range(self._num_servers)]

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Each server writes its optimizer states to ``fname.server<rank>`` (a shared file system)."""
        self._require_server_optimizer()
        self._send(everything=True)
        if self.rank == 0:
            self._port.command("save_states", path=os.path.abspath(fname), dump_optimizer=dump_optimizer)
        self._port.synchronize()

    def load_optimizer_states(self, fname):
        """Each server reads its states back from ``fname.server<rank>``."""
        self._require_server_optimizer()
        self._send(everything=True)
        if self.rank == 0:
            self._port.command("load_states", path=os.path.abspath(fname))
        self._port.synchronize()

    def _check_weight_pulls(self, messages):
        """Before a push of ``messages``: raises if compressed weight pulls are asked for but could not start
        (no dense step measured the weights' changes before the codecs started), rather than pulling float32
        silently."""
        changes = self._weight_changes
        if changes is not None and changes.largest is None and self._compression.compressed_pull and \
                any(c.codec is not None for m in messages for c in m.chunks):
            raise RuntimeError("'compressed_pull' with the optimizer on the servers fits its levels to the weights' "
                               "changes in dense steps (a push and a pull each) before the codecs start, and none "
                               "was measured: give the compression a warm-up ('warmup_steps' >= 1, or the trainer's "
                               "dense steps), or resume with load_residuals")

    def _weight_pull_codec(self):
        changes = self._weight_changes
        if changes is None or changes.largest is None:
            return None
        return lambda key, codec: changes.codec(self._compression, key)

    def _require_server_optimizer(self):
        if not self._optimizer_on_servers:
            raise RuntimeError("no optimizer runs on the servers (call set_optimizer first)")

    def _weights_before(self, targets, pushed):
        """{key: a copy of the weights this worker holds} for the keys whose change this pull measures (a
        dense step's pull, after a push, until compressed weight pulls have their levels: whatever the
        compression of the dense steps, which a trainer may set to 'none')."""
        changes = self._weight_changes
        if not (pushed and changes is not None and changes.largest is None):
            return {}
        return {k: self._staging[k].copy() for k in targets if k in self._staging and k not in self._reduce_only
                and not any(c.codec is not None for c in self._layout.chunks[k])}

    def _pulls_compressed(self, messages):
        """Whether the pulls of ``messages`` (getting their codecs now) are compressed; with the optimizer on
        the servers, once the weights' changes are fitted (a collective call when the codecs start after
        the measuring steps) or restored (load_residuals)."""
        changes = self._weight_changes
        pull = self._compression.compressed_pull
        if pull and changes is not None and changes.largest is None:
            if changes.measured and any(self.codec_for(c.key) is not None for m in messages for c in m.chunks):
                keys = sorted((k for k in self._shapes if k not in self._reduce_only), key=agreement.key_order)
                table = changes.fit(self, keys, [self._nonfinite.names.get(k, str(k)) for k in keys])
                log.logger.info("compressed weight pulls: each key's largest change of its weights in a step over "
                                "the last dense steps (the workers' mean), which its levels are fitted to:\n%s", table)
            pull = changes.largest is not None
        return pull
