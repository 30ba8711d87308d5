"""mxnet_gc.traffic: a process's TCP byte counts, and no crash where `ss` (iproute2) is missing."""
import shutil
import socket

import pytest

from mxnet_gc import traffic


@pytest.mark.skipif(shutil.which("ss") is None, reason="this machine has no ss (the case below covers it)")
def test_counts_the_bytes_of_a_connection():
    with socket.create_server(("127.0.0.1", 0)) as server:
        before = traffic.socket_bytes()
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
        client.sendall(b"x" * 100_000)
        got = 0
        while got < 100_000:
            got += len(peer.recv(65536))
        sent, received = traffic.socket_bytes()
        client.close()
        peer.close()
    # (this process holds both ends)
    assert sent - before[0] >= 100_000 and received - before[1] >= 100_000


def test_without_ss_there_are_no_counts_and_one_warning(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no ss
    monkeypatch.setattr(traffic, "_warned", [])
    with pytest.warns(UserWarning, match="iproute2"):
        assert traffic.socket_bytes() is None
    assert traffic.socket_bytes() is None  # (warned once)
