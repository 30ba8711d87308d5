"""Loading the C++ library: kernels are found, and a missing or stale build is refused with the fix."""
import os
import shutil
import subprocess
import sys

import pytest
import mxnet as mx

import mxnet_gc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_operators_are_registered():
    for bits in (2, 4):
        for op in ("encode", "decode", "decode_add"):
            assert hasattr(mx.nd, "mxgc_%dbit_%s" % (bits, op))


def test_kernel_isa_and_threads():
    assert mxnet_gc.kernel_isa() in ("baseline", "x86-64-v3", "x86-64-v4")
    mxnet_gc.set_num_threads(1)
    assert mxnet_gc.get_num_threads() == 1
    mxnet_gc.set_num_threads(0)
    assert mxnet_gc.get_num_threads() >= 1
    with pytest.raises(ValueError, match="num_threads"):
        mxnet_gc.set_num_threads(-1)


def import_copy(tmp_path, change=lambda copy: None):
    """Imports mxnet_gc from a copy of the source tree after ``change(copy_root)``: (process, copy root)."""
    copy = tmp_path / "tree"
    shutil.copytree(os.path.join(ROOT, "mxnet_gc"), copy / "mxnet_gc",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(ROOT, "src_cpp"), copy / "src_cpp")
    shutil.copy(os.path.join(ROOT, "setup.py"), copy / "setup.py")
    change(copy)
    proc = subprocess.run([sys.executable, "-c", "import mxnet_gc; print(mxnet_gc.__file__)"], cwd=str(copy),
                          env=dict(os.environ, PYTHONPATH=str(copy)), capture_output=True, text=True,
                          timeout=120)
    return proc, copy


def test_unchanged_copy_imports(tmp_path):
    proc, copy = import_copy(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(str(copy))


def test_missing_library_names_the_fix(tmp_path):
    proc, _ = import_copy(tmp_path, lambda copy: os.remove(copy / "mxnet_gc" / "libmxnet_gc.so"))
    err = proc.stderr
    assert proc.returncode != 0 and "ImportError" in err and "is not built" in err and "make install" in err


def test_stale_library_names_the_fix(tmp_path):
    def edit_source(copy):
        with open(copy / "src_cpp" / "dispatch.cc", "a") as f:
            f.write("\n// edited after the build\n")

    proc, _ = import_copy(tmp_path, edit_source)
    err = proc.stderr
    assert proc.returncode != 0 and "ImportError" in err and "is stale" in err and "make install" in err


def test_loads_after_horovod():
    """Horovod loads its MXNet library with RTLD_GLOBAL, which makes libmxnet.so's own copy of MXNet's
    library interface global; the library must still register its operators (it used to crash)."""
    proc = subprocess.run([sys.executable, "-c", "import horovod.mxnet, mxnet as mx, mxnet_gc; "
                           "c = mxnet_gc.codecs.create({'type': '4bit'}); out = mx.nd.zeros(4); "
                           "c.decode(c.encode(mx.nd.array([1, -1, 0, 0]), mx.nd.zeros(4)), out); "
                           "print(out.asnumpy())"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "[ 1. -1.  0.  0.]" in proc.stdout, proc.stdout + proc.stderr[-2000:]
