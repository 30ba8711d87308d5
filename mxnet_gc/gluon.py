"""Gluon's Trainer on mxnet_gc's dist store.

``gluon.Trainer(params, 'sgd', {...}, kvstore=mxnet_gc.kvstore.create('dist_sync'))`` works unchanged.
``mxnet_gc.gluon.Trainer`` takes the same arguments, accepts the store's name ('dist_sync') and
``compression_params={'type': '4bit', ...}``, and talks to the store in bulk: one init for all
parameters and one push and one pull per step (one synchronisation of the workers per step, where
Gluon's own trainer synchronises once per parameter), with small parameters sharing messages of up
to ``bucket_size`` values (MXNET_GC_BUCKET_SIZE when set, else 262144; 0 for one message each).
"""
import os

from mxnet import gluon

from . import kvstore as gc_kvstore
from .kvstore.dist_store import DistSyncStore


DEFAULT_BUCKET_SIZE = 262144  # values (1 MiB of float32)


class Trainer(gluon.Trainer):
    """gluon.Trainer with mxnet_gc's compressed dist store."""

    def __init__(self, params, optimizer, optimizer_params=None, kvstore="dist_sync", compression_params=None,
                 update_on_kvstore=None, bucket_size=None):
        if isinstance(kvstore, str) and kvstore in gc_kvstore.STORES:
            kvstore = gc_kvstore.create(kvstore)
        if isinstance(kvstore, DistSyncStore) and not kvstore._chunks:
            if bucket_size is None:
                bucket_size = int(os.environ.get("MXNET_GC_BUCKET_SIZE", DEFAULT_BUCKET_SIZE))
            kvstore.set_bucket_size(bucket_size)
        super().__init__(params, optimizer, optimizer_params=optimizer_params, kvstore=kvstore,
                         compression_params=compression_params, update_on_kvstore=update_on_kvstore)

    def _ours(self):
        return isinstance(self._kvstore, DistSyncStore)

    def _init_params(self):
        if not self._ours():
            return super()._init_params()
        ready = [p for p in self._params_to_init if not p._deferred_init]
        if ready:
            keys = [self._param2idx[p.name] for p in ready]
            self._kvstore.init(keys, [p.list_data()[0] for p in ready])
            self._kvstore.pull(keys, out=[p.list_data() for p in ready])
        self._params_to_init = [p for p in self._params_to_init if p._deferred_init]

    def _allreduce_grads(self):
        if not self._ours():
            return super()._allreduce_grads()
        keys, grads, outs = [], [], []
        for i, param in enumerate(self._params):
            if param.grad_req == "null":
                continue
            keys.append(i)
            grads.append(param.list_grad())
            outs.append(param.list_data() if self._update_on_kvstore else param.list_grad())
        if keys:
            self._kvstore.push(keys, grads)
            self._kvstore.pull(keys, out=outs)
