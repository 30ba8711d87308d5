"""Bytes a process has sent and received over TCP, from the kernel's per-connection counters.

Used by the benchmarks and the examples to report measured traffic (not payload sizes): ``ss -tinp``
(iproute2) lists every TCP connection with its owner and its bytes_acked / bytes_received.  A training
script reports what it sent as the example does::

    from mxnet_gc.traffic import socket_bytes
    before = socket_bytes()               # (sent, received) bytes of this process so far
    ...                                   # train
    sent, received = (b - a for a, b in zip(before, socket_bytes()))
    print("sent %.1f MB, %.2f bytes per gradient value per step" % (sent / 1e6, sent / (values * steps)))
"""
import os
import shutil
import subprocess

from . import log


def socket_bytes(pid=None):
    """(bytes sent and acknowledged, bytes received) over all TCP connections of process ``pid``; None
    (with one warning) where ``ss`` is not installed."""
    if shutil.which("ss") is None:
        if not _warned:
            _warned.append(True)
            log.warn("mxnet_gc: `ss` (iproute2) is not installed: traffic is not measured")
        return None
    pid = os.getpid() if pid is None else pid
    out = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True, check=True).stdout
    sent = received = 0
    mine = False
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            mine = ("pid=%d," % pid) in line
            continue
        if mine:
            fields = dict(f.split(":", 1) for f in line.split() if f.startswith(("bytes_acked:", "bytes_received:")))
            sent += int(fields.get("bytes_acked", 0))
            received += int(fields.get("bytes_received", 0))
    return sent, received


_warned = []  # (socket_bytes warns once per process)
