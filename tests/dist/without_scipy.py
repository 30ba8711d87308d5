"""Imported first by a test worker run as a job's process: hides scipy from it, so that ``import mxnet``
skips it (a test that imports a worker file does not import this).

MXNet imports scipy when it is installed (gluoncv depends on it) for features these workers never use
(contrib.quantization's calibration, scipy.sparse conversions).  That import costs about 0.45 s of CPU
per process, and the suite starts hundreds of worker processes.  mxnet_gc does not use scipy: a worker
that needed it would fail with an ImportError, not pass by accident.  (The launcher starts mxnet_gc's
servers the same way: mxnet_gc/kvstore/ps/server_start.py.)
"""
import sys

sys.modules.setdefault("scipy", None)  # `import scipy` raises ImportError, which MXNet catches
