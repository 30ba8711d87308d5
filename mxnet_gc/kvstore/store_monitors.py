"""What the stores watch in the gradients pushed: their non-finite values (nonfinite.py) and each coded
key's residual against its gradient (residual_monitor.py)."""
import json

from .nonfinite import NonFiniteMonitor
from .residual_monitor import ResidualMonitor


class StoreMonitors:
    """StoreBase's monitor calls (a part of the class: ``_start_monitors`` in its __init__)."""

    def _start_monitors(self):
        self._counts = {}  # Message -> its pushes' non-finite counts (float64 NDArray, one per chunk)
        self._nonfinite = NonFiniteMonitor()
        self._residuals = ResidualMonitor()
        self._residuals.names = self._nonfinite.names
        self._residuals.describe = lambda k: "; its codec: %s" % json.dumps(self.codec_for(k).config())
        self._residuals.fitted = lambda k: self._compression.fits_levels

    def set_nonfinite(self, policy):
        """What a push of NaN or inf gradient values does: 'warn' (default: once per key), 'raise'
        (NonFiniteGradientError at the next push) or 'ignore' (no counting)."""
        self._nonfinite.set_policy(policy)

    def set_key_names(self, names):
        """Names for keys in messages ({key: name}; the Gluon trainer gives parameter names)."""
        self._nonfinite.names.update(names)

    @property
    def nonfinite_counts(self):
        """{key: NaN and inf values pushed so far}, for the keys that had any (counted until the last push
        but one)."""
        return dict(self._nonfinite.counts)

    def _record_nonfinite(self, grads, messages):
        """After a push's encodes (``messages``): its non-finite counts, with what the push does with such
        values, to the monitor (every key travels in a message, but LGC's coded keys in its train and lgc
        steps, which its accumulation counts: ``_method_send``)."""
        def treatment(k):
            if k in self._reduce_only or self._compression.type == "none":
                return "spread"
            return "mxnet_2bit" if self._compression.is_mxnet else "dropped"
        counted = [([c.key for c in m.chunks], self._counts[m]) for m in messages] if self._nonfinite.counting else []
        self._nonfinite.record(counted, {k: treatment(k) for k in grads})

    def _drops_nonfinite(self, message):
        """Whether a message's dense pushes drop NaN and inf values as its codecs do: under mxnet_gc's
        compressions (their dense warm-up, LGC's dense phase), not uncompressed or under MXNet's 2bit (as
        MXNet) nor for statistics (``reduce_only``)."""
        return not self._compression.is_mxnet and message.chunks[0].key not in self._reduce_only

    @property
    def residual_history(self):
        """{key: [(push number, gradient norm, residual norm)]}: every 10th push of each coded key, the norm
        of this worker's gradient and of its residual after the encode (residual_monitor.py)."""
        return {k: list(rows) for k, rows in self._residuals.history.items()}

    def _watch_residuals(self, keys, grads):
        """After a push's encodes: samples the residual against the gradient of each coded key."""
        for k in keys:
            chunks = self._layout.chunks[k]
            if all(c.codec is not None and c.residual is not None and c.residual.size == c.size for c in chunks):
                self._residuals.sample(k, grads[k], [c.residual for c in chunks])
