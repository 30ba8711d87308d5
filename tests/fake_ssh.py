#!/usr/bin/env python
"""A stand-in for ssh in the launcher's tests: ``fake_ssh.py [options] HOST COMMAND`` runs COMMAND here.

Accepts and ignores ssh's options (``-tt``, ``-o KEY=VALUE``), records the host and port it was asked for in
the environment (FAKE_SSH_HOST, FAKE_SSH_PORT), and replaces itself with ``sh -c COMMAND`` as sshd would.
"""
import os
import sys

args = sys.argv[1:]
while args and args[0].startswith("-"):
    option = args.pop(0)
    if option in ("-o", "-p", "-i", "-l"):
        value = args.pop(0)
        if option == "-p":
            os.environ["FAKE_SSH_PORT"] = value
host, command = args[0], " ".join(args[1:])
os.environ["FAKE_SSH_HOST"] = host
os.execvp("sh", ["sh", "-c", command])
