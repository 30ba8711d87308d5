"""Loads the C++ library (libmxnet_gc.so) into MXNet, so its operators appear as mx.nd.mxgc_*.

A missing library, or one built from other sources than src_cpp/ now holds, is refused with an
ImportError that says how to rebuild.
"""
import ctypes
import os

from . import _build_id, _mx, config

LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libmxnet_gc.so")
REBUILD = "run `make install` in the mxnet-gc source tree (or `pip install --no-build-isolation -e .`)"

_handle = None


def load():
    """Checks and loads the library once per process; returns its ctypes handle."""
    global _handle
    if _handle is not None:
        return _handle
    if not os.path.exists(LIBRARY_PATH):
        raise ImportError("mxnet_gc: the C++ library %s is not built; %s" % (LIBRARY_PATH, REBUILD))
    handle = ctypes.CDLL(LIBRARY_PATH)
    handle.mxgc_build_id.restype = ctypes.c_char_p
    handle.mxgc_kernel_isa.restype = ctypes.c_char_p
    built_from = handle.mxgc_build_id().decode()
    if os.path.isdir(_build_id.SRC_DIR):
        expected = _build_id.source_hash()
        if built_from != expected:
            raise ImportError("mxnet_gc: %s is stale (built from sources %s, src_cpp/ and setup.py are now %s); "
                              "%s" % (LIBRARY_PATH, built_from, expected, REBUILD))
    settings = config.settings()
    if handle.mxgc_select_isa(settings.isa.encode()) != 0:
        raise ImportError("mxnet_gc: MXNET_GC_ISA=%s is not available on this CPU (best: %s; levels: %s)"
                          % (settings.isa, handle.mxgc_kernel_isa().decode(), ", ".join(config.ISAS)))
    handle.mxgc_set_num_threads(settings.num_threads)
    handle.mxgc_plan_new.restype = ctypes.c_void_p
    handle.mxgc_dgc_velocity.restype = ctypes.c_int64
    handle.mxgc_engine_bind(*[_mx.c_function(name) for name in
                              ("MXEnginePushSyncND", "MXNDArrayGetData", "MXNDArrayDetach", "MXNDArrayFree")])
    _mx.load_operator_library(LIBRARY_PATH, "mxgc_")
    _handle = handle
    return handle


def set_num_threads(n):
    """Threads the codec kernels use (default: MXNET_GC_NUM_THREADS, OMP_NUM_THREADS or all cores).

    n = 0 restores the default.
    """
    if not isinstance(n, int) or not 0 <= n <= config.MAX_THREADS:
        raise ValueError("num_threads must be an int in 0..%d (mxnet_gc/config.py's MAX_THREADS), got %r"
                         % (config.MAX_THREADS, n))
    load().mxgc_set_num_threads(n or config.settings().num_threads)


def get_num_threads():
    """Threads the codec kernels use."""
    return load().mxgc_get_num_threads()


def kernel_isa():
    """The instruction-set level of the kernels chosen for this CPU ('x86-64-v4', 'x86-64-v3', 'baseline')."""
    return load().mxgc_kernel_isa().decode()
