"""mxnet-gc: gradient compression for Apache MXNet 1.9.1 distributed training.

``import mxnet_gc`` loads the C++ codec operators into MXNet (mx.nd.mxgc_*) and exposes the codecs:

    codec = mxnet_gc.codecs.create({'type': '4bit', 'thresholds': [t1, ..., t7]})
    payload = codec.encode(grad, residual)   # residual updated in place
    codec.decode(payload, out)
"""
import os
import sys

from . import config


def _starts_the_launcher():
    """Whether this import is the package's, on the way to ``python -m mxnet_gc.launch`` (Python sets
    sys.argv[0] to '-m' while it finds the module) or to the source tree's tools/launch.py, which runs it:
    the launcher needs neither MXNet nor the library, and starts in a tenth of a second instead of the
    seconds ``import mxnet`` takes."""
    argv = getattr(sys, "orig_argv", [])
    if sys.argv[:1] == ["-m"]:
        return any(a == "-m" and b == "mxnet_gc.launch" for a, b in zip(argv, argv[1:]))
    tools_launch = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "launch.py")
    return bool(sys.argv[:1]) and os.path.realpath(sys.argv[0]) == os.path.realpath(tools_launch)


if config.settings().role == "server":
    # A parameter-server process.  MXNet would run its stock server inside `import mxnet`; hide the
    # role during that import so that mxnet_gc's server (mxnet_gc.kvstore.ps.server) runs instead.
    with config.temporary_variable("DMLC_ROLE", "worker"):
        import mxnet  # noqa: F401

__version__ = "0.1.0"
__all__ = ["codecs", "kvstore", "gluon", "checkpoint", "ThresholdGroup", "set_num_threads", "get_num_threads", "kernel_isa"]

if not _starts_the_launcher():
    from ._library import get_num_threads, kernel_isa, load as _load, set_num_threads

    _load()

    from . import codecs  # noqa: E402  (needs the operators loaded above)
    from .codecs import ThresholdGroup  # noqa: E402
    from . import kvstore  # noqa: E402
    from . import gluon  # noqa: E402
    from . import checkpoint  # noqa: E402  (export: a checkpoint's weights for net.load_parameters)
