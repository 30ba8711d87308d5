"""The C++ kernels under AddressSanitizer and UndefinedBehaviorSanitizer (`make asan`): random and
adversarial payloads (counts out of range, indices out of range or not ascending, NaN and inf bit
patterns, the smallest and largest sizes) through every decoder and encoder, on every instruction-set
copy this CPU runs, with no out-of-bounds access and no undefined behaviour."""
import os
import re
import struct
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.system  # (builds the sanitized fuzz driver with make: not in-process)
BINARY = os.path.join(ROOT, "build", "asan", "kernel_fuzz")
NAN_PATTERNS = [0x7FC00000, 0xFFFFFFFF, 0x7F800000, 0xFF800000, 0x7F800001, 0x00000001, 0x80000000]


@pytest.fixture(scope="module")
def fuzzer():
    subprocess.run(["make", "-s", "-j2", "asan"], cwd=ROOT, check=True, timeout=600)
    return BINARY


def case(target, n, capacity, levels, data):
    return struct.pack("<BIIB", target, n - 1, capacity - 1, levels - 1) + bytes(data)


def words(values):
    return b"".join(struct.pack("<I", v & 0xFFFFFFFF) for v in values)


def table_codecs():
    """The fuzz driver's table: dense, then every codec of src_cpp/codecs.def, in its order."""
    with open(os.path.join(ROOT, "src_cpp", "codecs.def")) as f:
        return ["dense"] + re.findall(r"^MXGC_CODEC\((\w+),", f.read(), re.M)


TABLE_CODECS = len(table_codecs())


def corpus(directory):
    rng = np.random.default_rng(2026)
    inputs = []
    for _ in range(400):  # random: any target, size and bytes
        inputs.append(rng.bytes(int(rng.integers(10, 3000))))
    for target in range(6):  # NaN and inf patterns everywhere, smallest and largest n
        for n in (1, 2, 15, 17, 4999, 5000):
            for pattern in NAN_PATTERNS:
                inputs.append(case(target, n, max(1, n // 3), 7, words([pattern, 3, pattern, 1])))
    for which in range(TABLE_CODECS):  # target 6: each codec of the C++ table (kernel_fuzz.cc's list)
        for n in (1, 5, 17, 5000):
            for pattern in NAN_PATTERNS + [0, 0xFFFFFFFF, 0x80808080]:
                inputs.append(case(6, n, 1, which + 1, words([pattern, 0x80FF017F, pattern, 1])))
    for n, capacity in ((1, 1), (40, 10), (5000, 5000)):  # top-k payloads a corrupt peer could send
        for count in (-1, 0, capacity, capacity + 1, n + 1, 2 ** 31 - 1, -2 ** 31):
            inputs.append(case(3, n, capacity, 1, words([count] + list(range(capacity)))))
        for index in (-1, n, n + 1, 2 ** 31 - 1, -2 ** 31):
            inputs.append(case(3, n, capacity, 1, words([1, index, 0x3F800000])))
        if capacity > 1:  # descending and repeated indices
            inputs.append(case(3, n, capacity, 1, words([2, 1, 0, 0x3F800000, 0x3F800000])))
            inputs.append(case(3, n, capacity, 1, words([2, 0, 0, 0x3F800000, 0x3F800000])))
    paths = []
    for i, data in enumerate(inputs):
        path = directory / ("input%04d" % i)
        path.write_bytes(data)
        paths.append(str(path))
    return paths


def isas():
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    found = ["baseline"]
    if os.uname().machine == "x86_64":
        if " avx2 " in flags and " bmi2 " in flags:
            found.append("x86-64-v3")
        if " avx512f " in flags and " avx512bw " in flags:
            found.append("x86-64-v4")
    return found


def test_sanitizer_is_on(fuzzer, tmp_path):
    proc = subprocess.run([fuzzer], env=dict(os.environ, KERNEL_FUZZ_SELFTEST="1"), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0 and "AddressSanitizer" in proc.stderr


@pytest.mark.parametrize("isa", isas())
def test_corpus_runs_clean(fuzzer, tmp_path, isa):
    paths = corpus(tmp_path)
    proc = subprocess.run([fuzzer] + paths, env=dict(os.environ, MXNET_GC_ISA=isa, MXNET_GC_NUM_THREADS="1"),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "runtime error" not in proc.stderr and "Sanitizer" not in proc.stderr, proc.stderr[-3000:]
    assert "%d inputs ran" % len(paths) in proc.stdout
