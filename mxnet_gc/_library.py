"""Loads the C++ library (libmxnet_gc.so) into MXNet, so its operators appear as mx.nd.mxgc_*.

A missing library, or one built from other sources than src_cpp/ now holds, is refused with an
ImportError that says how to rebuild.
"""
import ctypes
import os

import mxnet as mx

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
    handle.mxgc_engine_bind(*[_mx.c_function(name) for name in
                              ("MXEnginePushSyncND", "MXNDArrayGetData", "MXNDArrayDetach", "MXNDArrayFree")])
    mx.library.load(LIBRARY_PATH, verbose=False)
    _handle = handle
    return handle


def _floats(array):
    return array.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def encode_now(bits, grad, residual, payload, levels, bounds):
    """Encodes numpy arrays on this thread, at once (see decode_now); updates residual in place.  ``bounds``:
    the encoder's decision bounds, one float32 per level."""
    load().mxgc_encode_now(ctypes.c_int(bits), _floats(grad), _floats(residual), payload.ctypes.data_as(ctypes.c_void_p),
                           ctypes.c_int64(grad.size), _floats(levels), _floats(bounds), ctypes.c_int(levels.size))


def decode_now(bits, payload, out, levels, add):
    """Decodes a payload held in numpy arrays into ``out`` (or adds to it) on this thread, at once.

    For code that runs outside MXNet's engine (the parameter server's updater); payload and out must
    be C-contiguous, out float32 of the decoded size; levels a float32 array.
    """
    out_ptr = _floats(out)
    load().mxgc_decode_now(ctypes.c_int(bits), payload.ctypes.data_as(ctypes.c_void_p), out_ptr if add else None,
                           out_ptr, ctypes.c_int64(out.size), _floats(levels), ctypes.c_int(levels.size))


def topk_decode_now(payload, capacity, out, add):
    """decode_now for 'layerwise_topk' payloads; raises ValueError for a corrupt payload (out untouched)."""
    error = ctypes.create_string_buffer(256)
    out_ptr = _floats(out)
    code = load().mxgc_topk_decode_now(_floats(payload), ctypes.c_int64(capacity), out_ptr if add else None, out_ptr,
                                       ctypes.c_int64(out.size), error, ctypes.c_int(len(error)))
    if code != 0:
        raise ValueError("layerwise_topk: corrupt payload: %s" % error.value.decode())


def sparse_pack_now(values, capacity, payload):
    """Packs the nonzeros of numpy ``values`` into a 'layerwise_topk' payload, losslessly, at once."""
    error = ctypes.create_string_buffer(256)
    if load().mxgc_sparse_pack_now(_floats(values), ctypes.c_int64(values.size), ctypes.c_int64(capacity),
                                   _floats(payload), error, ctypes.c_int(len(error))) != 0:
        raise ValueError("layerwise_topk: %s" % error.value.decode())


def set_num_threads(n):
    """Threads the codec kernels use (default: MXNET_GC_NUM_THREADS, OMP_NUM_THREADS or all cores).

    n = 0 restores the default.
    """
    if not isinstance(n, int) or n < 0:
        raise ValueError("num_threads must be an int >= 0, got %r" % (n,))
    load().mxgc_set_num_threads(n or config.settings().num_threads)


def get_num_threads():
    """Threads the codec kernels use."""
    return load().mxgc_get_num_threads()


def kernel_isa():
    """The instruction-set level of the kernels chosen for this CPU ('x86-64-v4', 'x86-64-v3', 'baseline')."""
    return load().mxgc_kernel_isa().decode()
