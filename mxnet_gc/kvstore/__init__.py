"""Distributed kvstores with gradient compression, on MXNet's own parameter server (ps-lite).

    kv = mxnet_gc.kvstore.create('dist_sync')
    kv.set_gradient_compression({'type': '4bit', 'thresholds': [...]})

``create('dist_async')``: the servers apply each worker's push with the optimizer at once (no barrier).
``create('horovod')`` is the same API over Horovod's collectives (processes started by horovodrun).
After ``import mxnet_gc`` the stores are also ``mx.kv.create('gc_dist_sync')``, ``'gc_dist_async'`` and
``'gc_horovod'``.  MXNet's single-process stores ('local', 'device') are returned as MXNet creates them
(MXNet compresses nothing there); any other name raises ValueError saying what to use.

This folder holds what both transports share (``base.StoreBase``, the layout of keys into messages, the
compression settings, the workers' agreement, LGC's rounds); ``ps/`` holds the parameter server's store
and server processes, ``horovod/`` Horovod's store.  Each module in one line: docs/usage.md's module
index (made from their docstrings).
"""
import difflib

import mxnet as mx
from mxnet.kvstore import KVStoreBase

from .compression import Compression, supported_types
from .ps.dist_store import DistAsyncStore, DistSyncStore
from .horovod.horovod_store import HorovodStore
from .nonfinite import NonFiniteGradientError

STORES = {"dist_sync": DistSyncStore, "dist_async": DistAsyncStore, "horovod": HorovodStore}
MX_NAMES = {"gc_" + name: cls for name, cls in STORES.items()}
NAMES = tuple(STORES) + tuple(MX_NAMES)  # every name of mxnet_gc's stores
LOCAL_NAMES = ("local", "device")  # MXNet's single-process stores, passed through
# MXNet's other store names, and what to use instead
MXNET_NAMES = {name: "on CPUs 'dist_sync' does what it does; mx.kv.create(%r) gives MXNet's own store" % name
               for name in ("dist_device_sync", "dist_sync_device", "dist_device_async", "dist_async_device")}
MXNET_NAMES["nccl"] = "MXNet's NCCL store needs GPUs; across processes use 'dist_sync' or 'horovod'"


def create(name="dist_sync"):
    """mxnet_gc's store for 'dist_sync', 'dist_async' or 'horovod' (or their ``gc_`` names); MXNet's
    single-process 'local' or 'device' as MXNet creates it; ValueError for any other name."""
    if name in STORES:
        return STORES[name]()
    if name in MX_NAMES:
        return MX_NAMES[name]()
    if name in LOCAL_NAMES:
        return mx.kv.create(name)
    raise ValueError(unknown_store(name))


def unknown_store(name):
    """What to say of a store name that is not one of mxnet_gc's (nor MXNet's single-process ones)."""
    ours = "mxnet_gc's stores: %s; MXNet's single-process %s" % (", ".join(map(repr, NAMES)),
                                                                  " and ".join(map(repr, LOCAL_NAMES)))
    if name in MXNET_NAMES:
        return "kvstore %r is MXNet's (%s); %s" % (name, MXNET_NAMES[name], ours)
    close = difflib.get_close_matches(str(name), NAMES + LOCAL_NAMES, 1)
    return "unknown kvstore %r%s; %s" % (name, " (did you mean %r?)" % close[0] if close else "", ours)


for _name, _cls in MX_NAMES.items():
    KVStoreBase.kv_registry[_name] = _cls

__all__ = ["create", "DistSyncStore", "DistAsyncStore", "HorovodStore", "Compression", "supported_types", "NonFiniteGradientError"]
