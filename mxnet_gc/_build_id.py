"""The identity of a build of the C++ library: a hash of its sources (src_cpp/ and setup.py's flags).

setup.py bakes it into the library; ``import mxnet_gc`` recomputes it when the package runs from a
source tree and refuses a library that was built from other sources.
"""
import hashlib
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC_DIR = os.path.join(ROOT, "src_cpp")


def source_hash(root=ROOT):
    """Hex digest over the names and contents of src_cpp/* and setup.py under root."""
    src = os.path.join(root, "src_cpp")
    files = [os.path.join(src, name) for name in sorted(os.listdir(src))] + [os.path.join(root, "setup.py")]
    h = hashlib.sha256()
    for path in files:
        h.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]
