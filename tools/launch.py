#!/usr/bin/env python
"""``python tools/launch.py ARGS`` runs ``python -m mxnet_gc.launch ARGS`` from a source tree (the launcher's
file alone: without importing mxnet_gc, and so MXNet, it starts at once)."""
import os
import runpy

if __name__ == "__main__":
    runpy.run_path(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mxnet_gc", "launch.py"),
                   run_name="__main__")
