"""What every codec offers, and the checks on the arrays it is given.

A codec turns one float32 gradient (with its per-worker residual, for error feedback) into a payload,
a float32 NDArray whose bytes are the codec's wire format, and turns a payload back into values.
Codecs know nothing of transports; transports know nothing of codec internals.
"""
import numpy as np
import mxnet as mx


class Codec:
    """Interface of a gradient codec.  Subclasses set ``type`` and implement the four methods."""

    type = None

    def config(self):
        """The params dict that recreates this codec with ``codecs.create`` (JSON-serializable)."""
        raise NotImplementedError

    def payload_size(self, n):
        """Number of float32 words in the payload of an n-value gradient."""
        raise NotImplementedError

    def state_shape(self, shape):
        """The shape of the per-worker state ``encode`` takes as its residual, for a gradient of ``shape``
        (by default the gradient's: one residual value per gradient value)."""
        return tuple(shape)

    def new_residual(self, shape):
        """The zeroed per-worker state ``encode`` takes as its residual, for a gradient of ``shape``."""
        return mx.nd.zeros(self.state_shape(shape))

    def pull_codec(self, num_workers):
        """The codec of a compressed pull: the servers' sum of num_workers pushes (by default this one)."""
        return self

    def kernel_params(self, n):
        """(kind, parameters) of this codec's C++ kernels for n values, as a message plan takes them
        (src_cpp/message_plan.cc): kind 1 for top-k, else the bits per value."""
        raise NotImplementedError

    def encode(self, grad, residual, out=None):
        """Compresses ``grad`` with error feedback, updating ``residual`` in place; returns the payload.

        ``out``, if given, is a float32 NDArray of ``payload_size(grad.size)`` words to write into.
        """
        raise NotImplementedError

    def decode(self, payload, out):
        """Writes the dequantized values of ``payload`` into ``out``; returns ``out``."""
        raise NotImplementedError

    def decode_add(self, payload, acc):
        """Adds the dequantized values of ``payload`` to ``acc`` in place; returns ``acc``."""
        raise NotImplementedError

    def encode_numpy(self, grad, residual, out):
        """``encode`` on numpy arrays, synchronously on this thread; returns ``out`` (the payload).

        For code outside MXNet's engine, such as the parameter server's updater.
        """
        raise NotImplementedError

    def decode_numpy(self, payload, out, add=False):
        """``decode`` (or, with ``add``, ``decode_add``) on numpy arrays, synchronously on this thread."""
        raise NotImplementedError

    def __eq__(self, other):
        return isinstance(other, Codec) and self.config() == other.config()

    def __hash__(self):
        return hash(repr(sorted(self.config().items())))

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, self.config())


def check_dense_float32(name, array):
    """Raises TypeError unless ``array`` is a dense float32 NDArray on the CPU."""
    if not isinstance(array, mx.nd.NDArray):
        raise TypeError("%s must be an mxnet NDArray, got %s" % (name, type(array).__name__))
    if array.stype != "default":
        raise TypeError("%s must be a dense NDArray, got storage type %r" % (name, array.stype))
    if array.dtype != np.float32:
        raise TypeError("%s must be float32, got %s (cast it with .astype('float32'))"
                        % (name, np.dtype(array.dtype).name))
    if array.context.device_type != "cpu":
        raise TypeError("%s must be on the CPU, got %s" % (name, array.context))


def check_payload(codec, payload, n):
    """Raises ValueError unless ``payload`` is a float32 vector of the size ``codec`` gives n values."""
    check_dense_float32("payload", payload)
    want = codec.payload_size(n)
    if payload.shape != (want,):
        raise ValueError("%s payload for %d values must have shape (%d,), got %s"
                         % (codec.type, n, want, payload.shape))
