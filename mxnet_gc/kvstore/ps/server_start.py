"""How the launcher starts a server: ``python -m mxnet_gc.kvstore.ps.server`` without scipy.

``import mxnet`` imports scipy when it is installed (gluoncv depends on it) for features a server never
uses (contrib.quantization's calibration, scipy.sparse conversions); that import costs about 0.45 s of
CPU at every server start (``python -X importtime -c "import mxnet"``).  The launcher runs this file by
its path: it hides scipy from the process (MXNet then leaves those features off) and runs the server
module.  An optimizer sent to the servers that needs scipy would fail there with an ImportError.
"""
import runpy
import sys

if __name__ == "__main__":
    del sys.path[0]  # (this file's folder, put first by the interpreter: the server imports mxnet_gc as a package)
    sys.modules.setdefault("scipy", None)  # `import scipy` raises ImportError, which MXNet catches
    runpy.run_module("mxnet_gc.kvstore.ps.server", run_name="__main__", alter_sys=True)
