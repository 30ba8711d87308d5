#!/usr/bin/env python
"""``python tools/launch.py ARGS`` runs ``python -m mxnet_gc.launch ARGS`` from a source tree (mxnet_gc's package
then skips MXNet and the library, as for ``python -m mxnet_gc.launch``: the launcher starts at once)."""
import os
import runpy
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    runpy.run_module("mxnet_gc.launch", run_name="__main__", alter_sys=True)
