"""mxnet-gc: gradient compression for Apache MXNet 1.9.1 distributed training.

``import mxnet_gc`` loads the C++ codec operators into MXNet (mx.nd.mxgc_*) and exposes the codecs:

    codec = mxnet_gc.codecs.create({'type': '4bit', 'thresholds': [t1, ..., t7]})
    payload = codec.encode(grad, residual)   # residual updated in place
    codec.decode(payload, out)
"""
from . import config

if config.settings().role == "server":
    # A parameter-server process.  MXNet would run its stock server inside `import mxnet`; hide the
    # role during that import so that mxnet_gc's server (mxnet_gc.kvstore.server) runs instead.
    with config.temporary_variable("DMLC_ROLE", "worker"):
        import mxnet  # noqa: F401

from ._library import get_num_threads, kernel_isa, load as _load, set_num_threads

_load()

from . import codecs  # noqa: E402  (needs the operators loaded above)
from .codecs import ThresholdGroup  # noqa: E402
from . import kvstore  # noqa: E402
from . import gluon  # noqa: E402
from . import checkpoint  # noqa: E402  (export: a checkpoint's weights for net.load_parameters)

__version__ = "0.1.0"
__all__ = ["codecs", "kvstore", "gluon", "checkpoint", "ThresholdGroup", "set_num_threads", "get_num_threads", "kernel_isa"]
