"""The job's scheduler: ps-lite's scheduler node, run through libmxnet's C API.

The scheduler only introduces the nodes to each other and runs the job's barriers; it needs none of
MXNet's Python package, whose import costs about 1.7 s of CPU (MXNet starts its scheduler inside
``import mxnet``).  This file loads libmxnet.so from the installed mxnet package and calls
``MXKVStoreCreate("dist")`` and ``MXKVStoreRunServer`` (MXNet's C API, c_api.h), which return when the
job ends.  It imports nothing of mxnet_gc either: the launcher (mxnet_gc/launch.py) runs it by its path
with the DMLC_* environment of the scheduler's role.
"""
import ctypes
import importlib.util
import os
import sys

# MXNet's command handler type (MXKVStoreServerController); the scheduler receives no commands.
CONTROLLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


def load_libmxnet():
    """The installed mxnet package's libmxnet.so, loaded as MXNet's Python package loads it."""
    spec = importlib.util.find_spec("mxnet")  # (finds the package without importing it)
    if spec is None or not spec.submodule_search_locations:
        sys.exit("mxnet_gc scheduler: the mxnet package is not installed in %s" % sys.executable)
    return ctypes.CDLL(os.path.join(spec.submodule_search_locations[0], "libmxnet.so"), ctypes.RTLD_LOCAL)


def run():
    if os.environ.get("DMLC_ROLE") != "scheduler":
        sys.exit("mxnet_gc scheduler: DMLC_ROLE must be 'scheduler', got %r" % os.environ.get("DMLC_ROLE"))
    lib = load_libmxnet()
    lib.MXGetLastError.restype = ctypes.c_char_p

    def check(status):
        if status != 0:
            sys.exit("mxnet_gc scheduler: %s" % lib.MXGetLastError().decode(errors="replace"))

    handle = ctypes.c_void_p()
    check(lib.MXKVStoreCreate(b"dist", ctypes.byref(handle)))
    no_commands = CONTROLLER(lambda head, body, server: None)
    check(lib.MXKVStoreRunServer(handle, no_commands, None))
    check(lib.MXKVStoreFree(handle))
    lib.MXNotifyShutdown()


if __name__ == "__main__":
    run()
