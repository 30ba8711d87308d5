"""One engine operation per message: a message's segments encoded, decoded or copied by one C++ call.

A message (kvstore/layout.py) is a run of segments, a chunk of a key each.  Its plan
(src_cpp/message_plan.cc) holds every segment's codec (by its kernel name and parameters, made from the
C++ codec table, src_cpp/codecs.def) and offsets once; then

- a worker pushes one operation per message to MXNet's engine (``push_encode``, ``push_decode``), with
  only the arrays as its dependencies: no temporary-space resource (which MXNet's operators share,
  four by default), so it runs beside backward with MXNet's defaults, and no Python per key;
- a server decodes a worker's whole payload into the message's accumulator in one call
  (``decode_now``) and re-encodes the sum for a compressed pull in another (``encode_sum_now``);
- a codec's numpy calls (``Codec.encode_numpy``, ``decode_numpy``) are a plan of one segment.
"""
import ctypes

from ._library import load

_ERROR_SIZE = 512


def _handles(arrays):
    """A C array of NDArray handles (null for None)."""
    return (ctypes.c_void_p * len(arrays))(*[None if a is None else a.handle.value for a in arrays])


def _pointer(array):
    return array.ctypes.data_as(ctypes.c_void_p)


class MessagePlan:
    """The segments of one message: ``segments`` is a list of (codec or None for dense float32, values,
    first value in the message, first value in the key, first payload word).  ``drop_nonfinite``: the
    dense segments send NaN and inf values as 0 (the codecs drop them too)."""

    def __init__(self, segments, drop_nonfinite=False):
        self._lib = load()
        names, params, counts = [], [], []
        for codec, n, _, _, _ in segments:
            name, p = ("dense", [1.0] if drop_nonfinite else []) if codec is None else (
                codec.kernel_name, codec.kernel_params(n))
            names.append(name.encode())
            params += p
            counts.append(len(p))
        columns = list(zip(*[s[1:] for s in segments]))
        int64s = [(ctypes.c_int64 * len(segments))(*column) for column in columns]
        error = ctypes.create_string_buffer(_ERROR_SIZE)
        handle = self._lib.mxgc_plan_new(len(segments), (ctypes.c_char_p * len(names))(*names), *int64s,
                                         (ctypes.c_int * len(counts))(*counts),
                                         (ctypes.c_double * max(1, len(params)))(*params), error, _ERROR_SIZE)
        if not handle:
            raise ValueError("mxnet_gc message plan: %s" % error.value.decode())
        self._handle = ctypes.c_void_p(handle)
        self.size = len(segments)

    def __del__(self):
        if getattr(self, "_handle", None):
            self._lib.mxgc_plan_free(self._handle)

    def _check(self, code, error):
        if code != 0:
            raise RuntimeError("mxnet_gc message plan: %s" % error.value.decode())

    def push_encode(self, values, states, payload, priority=0, counts=None):
        """Engine operation: encodes each segment of ``values`` (per segment its key's whole NDArray) with
        its state (an NDArray, or None when dense) into the ``payload`` NDArray; with ``counts`` (a float64
        NDArray, one value per segment) also writes each segment's number of NaN and inf values of its
        gradient, counted in the encode's own pass over it."""
        error = ctypes.create_string_buffer(_ERROR_SIZE)
        self._check(self._lib.mxgc_plan_push_encode(self._handle, _handles(values), _handles(states), payload.handle,
                                                    None if counts is None else counts.handle,
                                                    ctypes.c_int(priority), error, _ERROR_SIZE), error)

    def push_decode(self, payload, outputs, token=None, priority=0, count=1, stride=0, accumulate=False):
        """Engine operation: decodes the ``payload`` NDArray into ``outputs`` (per segment its key's whole
        NDArray, or None to skip it) and writes ``token``, a one-value NDArray to wait on (or None).
        ``count`` payloads ``stride`` words apart in ``payload`` are summed in order; ``accumulate``: added
        to the outputs' values."""
        error = ctypes.create_string_buffer(_ERROR_SIZE)
        self._check(self._lib.mxgc_plan_push_decode(self._handle, payload.handle, ctypes.c_int(count),
                                                    ctypes.c_int64(stride), ctypes.c_int(bool(accumulate)),
                                                    _handles(outputs),
                                                    None if token is None else token.handle,
                                                    ctypes.c_int(priority), error, _ERROR_SIZE), error)

    def raise_engine_error(self, what="pulled payload"):
        """Raises for the first corrupt payload a ``push_decode`` met since the last call (``what``: what
        the payloads were; with ``count`` > 1 the message names which of them)."""
        error = ctypes.create_string_buffer(_ERROR_SIZE)
        if self._lib.mxgc_plan_take_error(self._handle, error, _ERROR_SIZE):
            raise ValueError("mxnet_gc: corrupt %s: %s" % (what, error.value.decode()))

    def decode_now(self, payload, values, add):
        """Decodes a whole payload (numpy float32) into the message's values (numpy float32) at once,
        adding with ``add``; raises ValueError for a corrupt payload (values then partly written)."""
        error = ctypes.create_string_buffer(_ERROR_SIZE)
        if self._lib.mxgc_plan_decode_now(self._handle, _pointer(payload), _pointer(values), ctypes.c_int(bool(add)),
                                          error, _ERROR_SIZE) != 0:
            raise ValueError("corrupt payload: %s" % error.value.decode())

    def encode_sum_now(self, values, residual, payload):
        """Re-encodes the message's summed values for a compressed pull (numpy float32 arrays) at once."""
        error = ctypes.create_string_buffer(_ERROR_SIZE)
        if self._lib.mxgc_plan_encode_sum_now(self._handle, _pointer(values), _pointer(residual), _pointer(payload),
                                              error, _ERROR_SIZE) != 0:
            raise ValueError(error.value.decode())
