"""Distributed kvstores with gradient compression, on MXNet's own parameter server (ps-lite).

    kv = mxnet_gc.kvstore.create('dist_sync')
    kv.set_gradient_compression({'type': '4bit', 'thresholds': [...]})

``create('dist_async')``: the servers apply each worker's push with the optimizer at once (no barrier).
``create('horovod')`` is the same API over Horovod's collectives (processes started by horovodrun).
After ``import mxnet_gc`` the stores are also ``mx.kv.create('gc_dist_sync')``, ``'gc_dist_async'`` and
``'gc_horovod'``.  MXNet's single-process stores ('local', 'device') are returned as MXNet creates them
(MXNet compresses nothing there); any other name raises ValueError saying what to use.

base.py           what both stores share (StoreBase: codecs of the messages, checks, residual state, pushpull)
store_clock.py    the step clock: the schedule (the compression's, or a trainer's), steps counted from pushes
residual_file.py  the file of a worker's error-feedback state (save_residuals, load_residuals)
failure.py        a worker that fails ends at once (after the worker that failed first)
agreement.py      what the workers must agree on (keys, compression, groups) and how a difference is said
arguments.py      the key and value arguments of a call, checked and normalized as MXNet takes them
dist_store.py     the parameter server's worker side (DistSyncStore, DistAsyncStore)
horovod_store.py  the Horovod transport (HorovodStore: allgather of payloads, allreduce when dense)
horovod_join.py   joining a horovodrun job, naming a rank that never creates its store
step_order.py     a worker's pushes and pulls in step order, refused where they would pair other steps
ring_scatter.py   the parts of its compressed allreduce (2bit and 4bit with 'compressed_pull')
collective_wait.py  waiting for Horovod's collectives with a timeout (a helper thread)
timed_collectives.py Horovod's collectives by name, each wait within the timeout; stall reports
server.py         the server process (CompressedServer; ``python -m mxnet_gc.kvstore.server``)
server_start.py   how the launcher starts it (by its path, without scipy)
aggregator.py     what a server does with pushes and commands (decode, sum, optimizer, status)
server_optimizer.py  the optimizer on the servers (applied per segment; its states saved and loaded)
scheduler.py      the job's scheduler (ps-lite's, through libmxnet's C API; run by its path)
protocol.py       key placement, commands and status shared by workers and servers
layout.py         keys cut into chunks and grouped into messages
ps_port.py        the parameter server's transport calls (ps-lite keys, pushes, pulls, commands)
ps_buffers.py     a dist-store worker's arrays and ps-lite keys for each message
server_link.py    a worker's link to the servers (commands, status checks)
pull_stages.py    when pushes go out and in which stages a pull brings them back
residual_monitor.py  the warning for a residual that keeps growing against the gradient
pull_monitor.py   what the servers' compressed pulls carry and leave in their residual (MXNET_GC_PULL_STATS)
lgc_rounds.py     learned gradient compression's phases in a store
lgc_ps.py         LGC's rounds on the parameter server (the servers' side: lgc_server.py)
lgc_ring.py       LGC's rounds on Horovod
compression.py    the accepted compression settings
nonfinite.py      counting NaN and inf gradient values
"""
import difflib

import mxnet as mx
from mxnet.kvstore import KVStoreBase

from .compression import Compression, supported_types
from .dist_store import DistAsyncStore, DistSyncStore
from .horovod_store import HorovodStore
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
