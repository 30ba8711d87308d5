"""Shared helpers for the tests."""
import os

import numpy as np
import pytest
import mxnet as mx

import mxnet_gc
from tools import host_cpu

# The network-namespace clusters of each test process get their own names, so that namespaces left by an
# interrupted benchmark, another run on the machine or the other pytest-xdist worker (whose system tests
# run beside this one's) neither break these tests nor are touched by them.
os.environ["MXNET_GC_NETNS"] = "mxgct%d" % os.getpid()
# A process of a test's job that dies of a signal (an abort in native code) prints every thread's Python
# stack first, so that a rare crash says where it happened.
os.environ["PYTHONFAULTHANDLER"] = "1"


@pytest.fixture(scope="session", autouse=True)
def checkpoint_folder(tmp_path_factory):
    """The tests' jobs keep their checkpoints under pytest's temporary folder: their servers may write there
    (MXNET_GC_CHECKPOINT_DIR, which every job started from this process inherits)."""
    os.environ["MXNET_GC_CHECKPOINT_DIR"] = str(tmp_path_factory.getbasetemp())


@pytest.hookimpl(tryfirst=True)  # (before -m selects: the unit marks must be there by then)
def pytest_collection_modifyitems(config, items):
    """Tiers (pytest.ini): a test marked neither job nor system is unit; a root test is skipped without root.
    Files with system tests first, then those with jobs, then the rest: `make test`'s 2 processes take
    whole files in this order (--dist loadfile --no-loadscope-reorder), so the short files fill the end."""
    needs_root = pytest.mark.skip(reason="needs root: network namespaces and tc link shaping (ip netns, tc)")
    no_host_cpu = host_cpu.missing()  # (None with root and cgroup v1's cpu and cpuset controllers writable)
    tier = {}  # file -> 0 (has system tests), 1 (has jobs), 2
    for item in items:
        if item.get_closest_marker("job") is None and item.get_closest_marker("system") is None:
            item.add_marker(pytest.mark.unit)
        if item.get_closest_marker("root") is not None and os.geteuid() != 0:
            item.add_marker(needs_root)
        elif item.get_closest_marker("host_cpu") is not None and no_host_cpu:
            item.add_marker(pytest.mark.skip(reason="emulated hosts cannot get a CPU share here: " + no_host_cpu))
        rank = 0 if item.get_closest_marker("system") else 1 if item.get_closest_marker("job") else 2
        tier[item.fspath] = min(rank, tier.get(item.fspath, 2))
    items.sort(key=lambda item: tier[item.fspath])  # (stable: each file's tests stay in order)


def payload_bytes(payload):
    """The payload's bytes in memory order."""
    return np.frombuffer(payload.asnumpy().tobytes(), np.uint8)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    """Runs a test with the kernels on 1 and on 2 threads."""
    mxnet_gc.set_num_threads(request.param)
    yield request.param
    mxnet_gc.set_num_threads(0)


def nd(values):
    return mx.nd.array(np.asarray(values, np.float32), dtype="float32")



def assert_payload_refused(codec, payload, message, n=3):
    """A corrupt ``payload`` for n values is refused with ``message`` by the numpy decode (leaving its output
    untouched) and by the MXNet operator."""
    out = np.full(n, 5.0, np.float32)
    with pytest.raises(ValueError, match=message):
        codec.decode_numpy(payload, out)
    assert (out == 5.0).all()
    with pytest.raises(mx.base.MXNetError, match=message):
        codec.decode(nd(payload), mx.nd.zeros(n)).wait_to_read()
