"""Every use of MXNet 1.9.1's private API (names with a leading underscore), in one place.

Porting mxnet_gc to another MXNet version means checking this file (and the NDArray reads of the C++
library, src_cpp/mxnet_ops.cc).  Each function says why no public API serves.  The C functions called
through ``mxnet.base._LIB`` are MXNet's public C API (include/mxnet/c_api.h); only the Python handle to
the library is private.
"""
import ctypes

import mxnet as mx
import numpy as np
from mxnet.base import _LIB, check_call
from mxnet.kvstore.kvstore_server import KVStoreServer


def c_function(name):
    """The address of MXNet's C API function ``name``: the C++ library calls the engine through these
    (it is loaded beside MXNet and does not link against libmxnet.so)."""
    return ctypes.cast(getattr(_LIB, name), ctypes.c_void_p)


def data_pointer(array):
    """The address of an NDArray's memory (the servers read payloads in place, outside the engine; the
    Python API offers only copies)."""
    ptr = ctypes.c_void_p()
    check_call(_LIB.MXNDArrayGetData(array.handle, ctypes.byref(ptr)))
    return ptr


def host_view(array):
    """A numpy float32 array over a float32 NDArray's memory, without a copy (where ``asnumpy`` copies),
    once its pending writes are done.

    The servers read payloads and sums on their own thread, outside MXNet's engine (a received push
    lives in ps-lite's message buffer only while the updater runs, and an engine round trip per push
    would cost more than the decoding); LGC's workers read gradients in place.  The engine does not see
    these accesses: callers keep engine operations on the same arrays finished before touching them.
    """
    if array.dtype != np.float32:
        raise TypeError("host_view needs a float32 array, got %s" % np.dtype(array.dtype).name)
    array.wait_to_read()
    return np.ctypeslib.as_array(ctypes.cast(data_pointer(array), ctypes.POINTER(ctypes.c_float)), (array.size,))


def array(values):
    """A new float32 NDArray holding a copy of ``values`` (numpy), written through its memory: several times
    cheaper than ``mx.nd.array`` (its indexing path and a synchronous copy through the engine), which LGC's
    per-step messages and autoencoder inputs paid several times a step (tools/bench_codecs.py, per-call
    rows)."""
    values = np.asarray(values, np.float32)
    out = mx.nd.empty(values.shape)
    if values.size:
        host_view(out)[:] = values.reshape(-1)
    return out


def write(array, values):
    """Writes ``values`` (numpy) into a float32 NDArray through its memory.  The engine does not see it: the
    caller keeps every engine operation on ``array`` (such as a push still sending it) finished before."""
    if array.size:
        host_view(array)[:] = np.asarray(values, np.float32).reshape(-1)


def wait_to_write(array):
    """Waits until every pending read of ``array`` (such as a push sending it) has finished: the Python
    API waits for writes only (``wait_to_read``)."""
    check_call(_LIB.MXNDArrayWaitToWrite(array.handle))


def free_kvstore(kv):
    """Frees a dist store now (a barrier, rank 0 stops the servers, ps-lite shuts down), as MXNet does
    when the store is garbage-collected; mxnet_gc ends its jobs in a known order instead."""
    check_call(_LIB.MXKVStoreFree(kv.handle))
    kv.handle = None


def barrier(kv):
    """ps-lite's barrier of all workers (``KVStore._barrier``; no public name in 1.9.1)."""
    kv._barrier()


def send_command_to_servers(kv, head, body):
    """A command to every server (``KVStore._send_command_to_servers``: MXNet's own channel for
    ``set_optimizer``, the only way a worker reaches the servers' controller)."""
    kv._send_command_to_servers(head, body)


def set_server_updater(kv, updater):
    """The function a server applies to every push (``KVStore._set_updater``: MXNet's public
    ``set_updater`` takes float32 values and pickles, not the raw payloads mxnet_gc sends)."""
    kv._set_updater(updater)


def updater_states(trainer):
    """A gluon.Trainer's optimizer states ({index: state}) when it runs on the workers (``Trainer.save_states``
    pickles them to a file; its updaters are private)."""
    return trainer._updaters[0].states


def set_updater_states(trainer, load):
    """Gives every updater of ``trainer`` the states ``load()`` returns (a new copy each, as
    ``Trainer.load_states`` does), to be moved to its device at its next update."""
    for updater in trainer._updaters:
        updater.states = load()
        updater.states_synced = dict.fromkeys(updater.states, False)


class TrainerBase(mx.gluon.Trainer):
    """gluon.Trainer with the state a subclass needs under public names.

    gluon.Trainer keeps its store, its parameters' keys and its optimizer's updaters in private
    attributes, and calls two private hooks (``_init_params``, ``_allreduce_grads``); mxnet_gc's Trainer
    replaces the hooks (``init_parameters``, ``reduce_gradients``) and reads the state through the
    properties below.
    """

    def _init_params(self):
        self.init_parameters()

    def _allreduce_grads(self):
        self.reduce_gradients()

    def init_parameters(self):
        """Initializes the parameters that are ready in the store (MXNet's way)."""
        mx.gluon.Trainer._init_params(self)

    def reduce_gradients(self):
        """Sums the gradients over the workers (MXNet's way: a push and a pull per parameter)."""
        mx.gluon.Trainer._allreduce_grads(self)

    def ensure_store(self):
        """Creates the store as the first step would (``_init_kvstore``), if not done yet."""
        if not self._kv_initialized:
            self._init_kvstore()

    @property
    def active_store(self):
        """The store the trainer talks to (None without one)."""
        return self._kvstore

    @property
    def parameter_list(self):
        """The parameters in the trainer's order (its store keys are their indices)."""
        return self._params

    def key_of(self, name):
        """The store key of the parameter ``name``."""
        return self._param2idx[name]

    @property
    def updates_on_store(self):
        """Whether the optimizer runs on the store (the servers)."""
        return bool(self._update_on_kvstore)

    @property
    def waiting_parameters(self):
        """The parameters not yet initialized in the store."""
        return self._params_to_init

    @waiting_parameters.setter
    def waiting_parameters(self, params):
        self._params_to_init = params

    @staticmethod
    def is_deferred(param):
        """Whether ``param`` still waits for its shape (deferred initialization)."""
        return bool(param._deferred_init)



class ServerBase(KVStoreServer):
    """MXNet's parameter server process, with the hook that makes its command handler (``_controller``)
    under a public name: mxnet_gc's server handles the workers' commands itself."""

    def _controller(self):
        return self.command_handler()

    def command_handler(self):
        """A function (command id, body, server) run for each command a worker sends."""
        return KVStoreServer._controller(self)


def load_operator_library(path, prefix):
    """Loads an MXNet custom-operator library and adds ``mx.nd.<name>`` for its operators, those whose
    names start with ``prefix``.  ``mx.library.load`` does the same but regenerates the Python function of
    every one of MXNet's operators, for the ndarray and symbol APIs: about a second in every process of a
    job (scheduler, servers, workers); this makes only ours (MXNet's ``_make_ndarray_function``)."""
    from mxnet.base import OpHandle, c_str, mx_uint, py_str
    from mxnet.ndarray.register import _make_ndarray_function

    check_call(_LIB.MXLoadLib(c_str(path), mx_uint(0)))
    size, names = mx_uint(), ctypes.POINTER(ctypes.c_char_p)()
    check_call(_LIB.MXListAllOpNames(ctypes.byref(size), ctypes.byref(names)))
    for name in [py_str(names[i]) for i in range(size.value)]:
        if name.startswith(prefix):
            handle = OpHandle()
            check_call(_LIB.NNGetOpHandle(c_str(name), ctypes.byref(handle)))
            function = _make_ndarray_function(handle, name, name)
            setattr(mx.nd.op, name, function)
            setattr(mx.nd, name, function)
