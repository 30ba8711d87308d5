"""Builds mxnet_gc: the Python package plus src_cpp/ compiled into mxnet_gc/libmxnet_gc.so.

The library is an MXNet custom-operator library: it is compiled against the headers and lib_api.cc
that the installed mxnet wheel ships, so mxnet must be installed first and the build must see it
(pip install --no-build-isolation).  The kernels (quantizers, top-k sparsifier) are compiled once per x86-64 level
(baseline, v3 = AVX2, v4 = AVX-512) and the best one is chosen at load time.
"""
import concurrent.futures
import importlib.util
import os
import platform
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
CXXFLAGS = ["-O3", "-fno-trapping-math", "-ffp-contract=off", "-std=c++17", "-fopenmp", "-fPIC", "-Wall"]
X86_LEVELS = {"x86_64_v3": "-march=x86-64-v3", "x86_64_v4": "-march=x86-64-v4"}
# Compiled once per instruction-set level (src_cpp/kernels.def lists their entry points); every other
# src_cpp/*.cc once.
ISA_SOURCES = ("quantizer_kernels.cc", "topk_sparsifier.cc")


def _build_id():
    spec = importlib.util.spec_from_file_location("_build_id", os.path.join(ROOT, "mxnet_gc", "_build_id.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.source_hash(ROOT)


def _mxnet_dir():
    try:
        import mxnet  # noqa: F401  (only its location is needed)
    except ImportError as e:
        sys.exit("mxnet_gc: building needs mxnet==1.9.1 installed first, and pip's "
                 "--no-build-isolation so the build can see it (see README.md): %s" % e)
    return os.path.dirname(mxnet.__file__)


class BuildMXNetLibrary(build_ext):
    """Compiles src_cpp/ with g++ into the MXNet custom-operator library."""

    def get_ext_filename(self, ext_name):
        return os.path.join(*ext_name.split(".")) + ".so"

    def build_extension(self, ext):
        mx_dir = _mxnet_dir()
        src = os.path.join(ROOT, "src_cpp")
        tmp = os.path.join(self.build_temp, "mxnet_gc")
        os.makedirs(tmp, exist_ok=True)
        includes = ["-I" + src, "-I" + os.path.join(mx_dir, "include")]
        multi_isa = platform.machine() in ("x86_64", "AMD64")
        levels = {"baseline": []}
        if multi_isa:
            levels.update({name: [flag] for name, flag in X86_LEVELS.items()})
        units = [(source, "%s_%s.o" % (source[:-3], name), ["-DMXGC_ISA=" + name] + flags)
                 for source in ISA_SOURCES for name, flags in levels.items()]
        unit_flags = {"dispatch.cc": ["-DMXGC_MULTI_ISA"] if multi_isa else [],
                      "mxnet_ops.cc": ['-DMXGC_BUILD_ID="%s"' % _build_id()]}
        units += [(source, source[:-3] + ".o", unit_flags.get(source, [])) for source in sorted(os.listdir(src))
                  if source.endswith(".cc") and source not in ISA_SOURCES]
        commands = [["g++", *CXXFLAGS, *includes, *flags, "-c", os.path.join(src, source), "-o",
                     os.path.join(tmp, obj)] for source, obj, flags in units]
        # MXNet's half of the library interface, compiled as shipped (its own warnings are not ours).
        commands.append(["g++", "-O2", "-std=c++17", "-fPIC", "-I" + os.path.join(mx_dir, "include"), "-c",
                         os.path.join(mx_dir, "src", "lib_api.cc"), "-o", os.path.join(tmp, "lib_api.o")])
        objects = [command[-1] for command in commands]
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            list(pool.map(subprocess.check_call, commands))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        # -Bsymbolic: the library's own definitions serve its own references, so that libmxnet.so's copy of
        # lib_api (made global when Horovod loads its MXNet library first, with RTLD_GLOBAL) is never bound
        # to ours: import horovod.mxnet, then mxnet_gc, crashed in the operators' registration.
        subprocess.check_call(["g++", "-shared", "-fopenmp", "-Wl,-Bsymbolic", *objects, "-o", target])


setup(
    name="mxnet-gc",
    version="0.1.0",
    description="Gradient compression (4bit multi-threshold, sparsification, LGC) for MXNet 1.9.1 "
                "distributed training",
    packages=find_packages(include=["mxnet_gc", "mxnet_gc.*"]),
    ext_modules=[Extension("mxnet_gc.libmxnet_gc", sources=[])],
    cmdclass={"build_ext": BuildMXNetLibrary},
    python_requires=">=3.8",
    install_requires=["mxnet==1.9.1", "numpy<1.24"],
    # horovod: the second transport; its build needs HOROVOD_WITH_MXNET=1 HOROVOD_WITH_GLOO=1 and
    # --no-build-isolation (see the Makefile's horovod target)
    extras_require={"horovod": ["horovod==0.28.1"], "examples": ["gluoncv==0.10.5.post0"],
                    "test": ["pytest", "hypothesis", "gluoncv==0.10.5.post0"]},
    entry_points={"console_scripts": ["mxnet-gc-launch = mxnet_gc.launch:main"]},
)
