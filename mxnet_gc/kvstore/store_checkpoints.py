"""The stores' checkpoints of their error-feedback state: ``save_residuals`` and ``load_residuals``.

A file holds, per chunk of a key, its codec's state (the residual; named by key and chunk, not message:
it loads into other merge groups), the residual still owed by a replaced codec, the compression and where
the dense warm-up was, and the method's state (LGC's accumulators; its autoencoders' states go beside rank
0's file).  Arrays and JSON only (checkpoint_files.py), with a SHA-256 beside each file.
"""
import json
import os

from .. import checkpoint_files
from . import residual_file


class ResidualCheckpoints:
    """StoreBase's checkpoint calls (a part of the class: it reads the store's layout, compression,
    clock, method and owed residuals, set by StoreBase.__init__)."""

    def save_residuals(self, fname):
        """Writes this worker's error-feedback state (one array per chunk of a key; with 'lgc' also its
        accumulators and phase) and the compression it belongs to, to ``fname`` (.npz, with
        ``fname.sha256``).  Named by key and chunk, not by message: a store whose keys are grouped into
        other messages (``regroup``) loads them too.  With 'lgc', a collective call: the autoencoders'
        states go beside rank 0's file (``state_files``); on Horovod with 'compressed_pull' too: the
        owners' residuals are gathered whole."""
        arrays = {residual_file.chunk_name(k, i): r.asnumpy() for k, i, r in self._residual_items()}
        arrays.update({residual_file.owed_name(k): owed for k, owed in self._owed.items()})
        meta = {"compression": self._compression.config, "servers": self.num_servers,
                "warmup": self._clock.state_dict()}
        if self._weight_changes is not None:
            meta["weight_changes"] = self._weight_changes.state_dict()
        arrays.update(self._pull_residuals())
        method_meta, method_arrays = self._method.state()
        if method_meta is not None:
            meta["lgc"] = method_meta
        arrays.update(method_arrays)
        checkpoint_files.write_arrays(fname, meta, arrays)
        self._method.save_states(self._state_path(fname))

    def load_residuals(self, fname):
        """Restores what ``save_residuals`` wrote, into a store with the same compression and keys (with
        'lgc', on either transport: a checkpoint of one loads into the other when the groups match), and
        where the store's warm-up was: a fresh 'thresholds': 'auto' store takes the saved levels fitted
        to the gradients.  A collective call when the saved warm-up was over (the codecs start)."""
        meta, saved = checkpoint_files.read_arrays(fname)
        saved_compression = meta["compression"]
        if saved_compression != json.loads(json.dumps(self._compression.config)):
            fitted = self._compression.as_fitted(saved_compression)
            if fitted is None:
                raise ValueError("%s holds residuals of gradient compression %s; this store uses %s"
                                 % (fname, json.dumps(saved_compression, sort_keys=True),
                                    json.dumps(self._compression.config, sort_keys=True)))
            self._compression = fitted
        restarted = self._clock.load_state_dict(meta.get("warmup"))
        if self._weight_changes is not None and meta.get("weight_changes") is not None:
            self._weight_changes.load_state_dict(meta["weight_changes"])
            restarted = restarted or any(m.coded for m in self._layout.messages)  # (their pulls' levels)
        if restarted:
            self._assign_codecs(self._layout.messages)
        residual_file.restore(fname, meta, saved, self._residual_items(), self.num_servers, self._state_per_value())
        self._owed = {k: saved[residual_file.owed_name(k)] for k in self._shapes if residual_file.owed_name(k) in saved}
        self._restore_pull_residuals(saved, fname)
        self._method.load_state(meta, saved, self._state_path(fname))

    def _pull_residuals(self):
        """{name: array} of the compressed pull's residuals that a worker saves (the Horovod store's owners';
        a parameter server's servers keep theirs, not saved)."""
        return {}

    def _restore_pull_residuals(self, saved, source):
        """Takes ``_pull_residuals``' arrays from ``saved`` (read from ``source``)."""

    def state_files(self, fname):
        """The files ``save_residuals`` writes beside rank 0's residual file ``fname`` (with 'lgc', the
        autoencoders' states; none otherwise)."""
        return self._method.state_files(os.path.abspath(fname))

    def _state_path(self, fname):
        """Where the autoencoders' states of this residual file are: beside rank 0's (``fname`` is this
        rank's)."""
        return os.path.abspath(fname).replace(".rank%d." % self.rank, ".rank0.")

    def _residual_items(self):
        """(key, chunk index, residual NDArray) of every chunk that has error-feedback state."""
        return [(k, i, c.residual) for k, cs in self._layout.chunks.items() for i, c in enumerate(cs)
                if c.residual is not None]
