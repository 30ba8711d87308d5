"""Distributed kvstores with gradient compression, on MXNet's own parameter server (ps-lite).

    kv = mxnet_gc.kvstore.create('dist_sync')
    kv.set_gradient_compression({'type': '4bit', 'thresholds': [...]})

After ``import mxnet_gc`` the same store is ``mx.kv.create('gc_dist_sync')``.  Other names are MXNet's
own stores, returned as MXNet creates them.

dist_store.py   the worker side (DistSyncStore)
server.py       the server side (CompressedServer; ``python -m mxnet_gc.kvstore.server``)
protocol.py     key placement, commands and status shared by both
compression.py  the accepted compression settings
"""
import mxnet as mx
from mxnet.kvstore import KVStoreBase

from .compression import Compression, supported_types
from .dist_store import DistSyncStore

STORES = {"dist_sync": DistSyncStore}
MX_NAMES = {"gc_" + name: cls for name, cls in STORES.items()}


def create(name="dist_sync"):
    """mxnet_gc's store for 'dist_sync'; any other name is passed to ``mx.kv.create``."""
    if name in STORES:
        return STORES[name]()
    if name in MX_NAMES:
        return MX_NAMES[name]()
    return mx.kv.create(name)


for _name, _cls in MX_NAMES.items():
    KVStoreBase.kv_registry[_name] = _cls

__all__ = ["create", "DistSyncStore", "Compression", "supported_types"]
