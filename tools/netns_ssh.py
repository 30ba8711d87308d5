#!/usr/bin/env python
"""ssh for tools/netns_cluster.py's hosts: ``netns_ssh.py [ssh options] ADDRESS COMMAND`` runs COMMAND
inside the network namespace that holds ADDRESS (198.18.0.{i+1} is namespace mxgc-h{i}; the prefix
mxgc is MXNET_GC_NETNS when set, as for tools/netns_cluster.py).

ssh's options (``-tt``, ``-o KEY=VALUE``, ``-p PORT``), before or after the address, are ignored; the
process joins the host's CPU share (tools/host_cpu.py, when the cluster gave its hosts one) and replaces
itself with ``ip netns exec NS sh -c COMMAND``, so the launcher's signals reach the command.
"""
import os
import sys

import host_cpu  # (this script's folder is on sys.path: it runs as a program, by its path)
from netns_cluster import PREFIX


def skip_options(args):
    """Drops leading ssh options (as ssh does, before and after the host)."""
    while args and args[0].startswith("-"):
        if args.pop(0) in ("-o", "-p", "-i", "-l"):
            args.pop(0)
    return args


args = skip_options(sys.argv[1:])
host, command = args[0], " ".join(skip_options(args[1:]))
parts = host.split(".")
if len(parts) != 4 or parts[:3] != ["198", "18", "0"]:
    sys.exit("netns_ssh.py: %s is not a host of tools/netns_cluster.py (198.18.0.N)" % host)
index = int(parts[3]) - 1
namespace = "%s%d" % (PREFIX, index)
host_cpu.enter(PREFIX, index)
os.execvp("ip", ["ip", "netns", "exec", namespace, "sh", "-c", command])
