"""What mxnet_gc's two stores (the parameter server and Horovod) share above their transports."""
from mxnet.kvstore import KVStoreBase

from .nonfinite import NonFiniteMonitor


class StoreBase(KVStoreBase):
    """MXNet's KVStoreBase plus the calls both of mxnet_gc's stores implement the same way."""

    def __init__(self):
        self._nonfinite = NonFiniteMonitor()

    def broadcast(self, key, value, out, priority=0):
        self.init(key, value)
        self.pull(key, out=out, priority=priority)

    def pushpull(self, key, value, out=None, priority=0):
        self.push(key, value, priority=priority)
        self.pull(key, out=value if out is None else out, priority=priority)

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
