"""What every codec offers, and the checks on the arrays it is given.

A codec turns one float32 gradient (with its per-worker residual, for error feedback) into a payload,
a float32 NDArray whose bytes are the codec's wire format, and turns a payload back into values.
Codecs know nothing of transports; transports know nothing of codec internals.

Every codec runs on its C++ description (src_cpp/codecs.def): ``kernel_name`` names it and
``kernel_params(n)`` gives its parameters as numbers.  From those two this class runs it everywhere:
the MXNet operators ``mxgc_<kernel_name>_encode/_decode/_decode_add`` (on the engine), a one-segment
message plan (numpy, at once) and the stores' message plans.
"""
import numpy as np
import mxnet as mx

from ..message_plan import MessagePlan

_PLANS_KEPT = 64  # one-segment plans kept per codec (one per size) for the numpy calls


class LevelFit:
    """How a store fits a codec's levels to each key's gradients (its ``'auto'``): the parameter it fills
    (``field``; ``multi``: a list of levels, else one number), a value standing for it while the other
    parameters are checked before the fit, the levels from a key's largest gradient values (``levels_of``,
    mxnet_gc/level_fit.py), and how the parameter is described in an error."""

    def __init__(self, field, multi, placeholder, levels_of, described):
        self.field, self.multi, self.placeholder = field, multi, placeholder
        self.levels_of, self.described = levels_of, described

    def param(self, levels):
        """The parameter's value for ``levels``."""
        return list(levels) if self.multi else levels[0]

    def levels(self, config):
        """The levels a codec's ``config`` holds, as a list."""
        return list(config[self.field]) if self.multi else [config[self.field]]


class Codec:
    """Interface of a gradient codec.  Subclasses set ``type`` and ``kernel_name`` and implement
    ``config``, ``payload_size`` and ``kernel_params``; a codec with state other than one residual
    value per gradient value overrides ``state_shape``."""

    type = None
    kernel_name = None
    # Whether a payload can be cut on word boundaries into parts that decode alone, and the sum of W
    # decoded parts re-encoded by the same codec (``pull_codec``): what the compressed allreduce needs
    # (kvstore/horovod/ring_scatter.py).  A codec whose payload has a header or a scale for the whole array cannot.
    cuttable = False
    level_fit = None  # a LevelFit when a store can fit the codec's levels to each key ('auto')
    fitted_by_default = False  # whether a store fits them when the params do not give the levels
    default_rounding = "nearest"  # (a threshold codec's, when the params do not say)
    pulls_compressed_by_default = False  # whether a store compresses the pulls too unless told not to
    scales_itself = False  # whether it scales each array itself (needs no levels fitted for any values)
    example = {}  # valid parameters for gradients of about unit scale: the suite-wide tests run each codec so

    def config(self):
        """The params dict that recreates this codec with ``codecs.create`` (JSON-serializable)."""
        raise NotImplementedError

    def payload_size(self, n):
        """Number of float32 words in the payload of an n-value gradient."""
        raise NotImplementedError

    def kernel_params(self, n):
        """The parameters of this codec's C++ description for n values: a list of numbers."""
        raise NotImplementedError

    def check_size(self, n):
        """Raises ValueError if this codec cannot encode n values (n >= 1)."""

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

    def _params(self, n):
        return ",".join(repr(float(v)) for v in self.kernel_params(n))

    def _operator(self, step):
        return getattr(mx.nd, "mxgc_%s_%s" % (self.kernel_name, step))

    def encode(self, grad, residual, out=None):
        """Compresses ``grad`` with error feedback, updating ``residual`` in place; returns the payload.

        ``out``, if given, is a float32 NDArray of ``payload_size(grad.size)`` words to write into.
        """
        check_dense_float32("gradient", grad)
        check_dense_float32("residual", residual)
        if grad.size == 0:
            raise ValueError("cannot encode an empty gradient")
        self.check_size(grad.size)
        want = self.state_shape(grad.shape)
        if residual.shape != want:
            raise ValueError("%s: the state for %d values must have shape %s (new_residual), got %s"
                             % (self.type, grad.size, want, residual.shape))
        if grad is residual:
            raise ValueError("the residual must be a separate array from the gradient")
        kwargs = {"params": self._params(grad.size)}
        if out is not None:
            check_payload(self, out, grad.size)
            kwargs["out"] = out
        return self._operator("encode")(grad, residual, **kwargs)

    def decode(self, payload, out):
        """Writes the dequantized values of ``payload`` into ``out``; returns ``out``."""
        check_dense_float32("out", out)
        check_payload(self, payload, out.size)
        return self._operator("decode")(payload, params=self._params(out.size), shape=",".join(map(str, out.shape)),
                                        out=out)

    def decode_add(self, payload, acc):
        """Adds the dequantized values of ``payload`` to ``acc`` in place; returns ``acc``."""
        check_dense_float32("acc", acc)
        check_payload(self, payload, acc.size)
        return self._operator("decode_add")(payload, acc, params=self._params(acc.size), out=acc)

    def _plan(self, n):
        plans = self.__dict__.setdefault("_numpy_plans", {})
        if n not in plans:
            if len(plans) >= _PLANS_KEPT:
                plans.clear()
            plans[n] = MessagePlan([(self, n, 0, 0, 0)])
        return plans[n]

    def _check_numpy(self, payload, values):
        if payload.dtype != np.float32 or payload.shape != (self.payload_size(values.size),):
            raise ValueError("%s payload for %d values must be float32 of shape (%d,), got %s %s"
                             % (self.type, values.size, self.payload_size(values.size), payload.dtype, payload.shape))
        if values.dtype != np.float32 or not values.flags.c_contiguous or not payload.flags.c_contiguous:
            raise ValueError("the numpy codec calls need C-contiguous float32 arrays")

    def encode_numpy(self, grad, residual, out):
        """A server's re-encoding of a sum (numpy arrays) for a compressed pull, synchronously on this
        thread, with the server's ``residual`` (one value per value; top-k packs without loss and leaves
        it untouched); returns ``out`` (the payload)."""
        self._check_numpy(out, grad)
        if residual.shape != grad.shape or residual.dtype != np.float32 or not residual.flags.c_contiguous:
            raise ValueError("residual must be a C-contiguous float32 array shaped like the values")
        self._plan(grad.size).encode_sum_now(grad.reshape(-1), residual.reshape(-1), out)
        return out

    def decode_numpy(self, payload, out, add=False):
        """``decode`` (or, with ``add``, ``decode_add``) on numpy arrays, synchronously on this thread;
        raises ValueError for a corrupt payload."""
        self._check_numpy(payload, out)
        self._plan(out.size).decode_now(payload, out.reshape(-1), add)
        return out

    def __getstate__(self):  # the plans hold C++ handles: made again where needed
        return {k: v for k, v in self.__dict__.items() if k != "_numpy_plans"}

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
