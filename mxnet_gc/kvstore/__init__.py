"""Distributed kvstores with gradient compression, on MXNet's own parameter server (ps-lite).

    kv = mxnet_gc.kvstore.create('dist_sync')
    kv.set_gradient_compression({'type': '4bit', 'thresholds': [...]})

``create('dist_async')``: the servers apply each worker's push with the optimizer at once (no barrier).
``create('horovod')`` is the same API over Horovod's collectives (processes started by horovodrun).
After ``import mxnet_gc`` the stores are also ``mx.kv.create('gc_dist_sync')``, ``'gc_dist_async'`` and
``'gc_horovod'``.
Other names are MXNet's own stores, returned as MXNet creates them.

base.py           what both stores share (StoreBase: residual files, non-finite counting, pushpull)
arguments.py      the key and value arguments of a call, checked and normalized as MXNet takes them
dist_store.py     the parameter server's worker side (DistSyncStore, DistAsyncStore)
horovod_store.py  the Horovod transport (HorovodStore: allgather of payloads, allreduce when dense)
server.py         the server process (CompressedServer; ``python -m mxnet_gc.kvstore.server``)
aggregator.py     what a server does with pushes and commands (decode, sum, optimizer, status)
protocol.py       key placement, commands and status shared by workers and servers
layout.py         keys cut into chunks and grouped into messages
message_plan.py   one C++ call per message: encode, decode or copy all of its segments
compression.py    the accepted compression settings
nonfinite.py      counting NaN and inf gradient values
"""
import mxnet as mx
from mxnet.kvstore import KVStoreBase

from .compression import Compression, supported_types
from .dist_store import DistAsyncStore, DistSyncStore
from .horovod_store import HorovodStore
from .nonfinite import NonFiniteGradientError

STORES = {"dist_sync": DistSyncStore, "dist_async": DistAsyncStore, "horovod": HorovodStore}
MX_NAMES = {"gc_" + name: cls for name, cls in STORES.items()}
NAMES = tuple(STORES) + tuple(MX_NAMES)  # every name of mxnet_gc's stores


def create(name="dist_sync"):
    """mxnet_gc's store for 'dist_sync', 'dist_async' or 'horovod'; any other name is passed to
    ``mx.kv.create``."""
    if name in STORES:
        return STORES[name]()
    if name in MX_NAMES:
        return MX_NAMES[name]()
    return mx.kv.create(name)


for _name, _cls in MX_NAMES.items():
    KVStoreBase.kv_registry[_name] = _cls

__all__ = ["create", "DistSyncStore", "DistAsyncStore", "HorovodStore", "Compression", "supported_types", "NonFiniteGradientError"]
