"""horovodrun for the repository's own jobs (tests, benchmarks, studies): Horovod's launcher as installed,
without its check of how Horovod was built.

    python tools/horovodrun.py -np 2 -H localhost:2 --gloo python script.py

``horovodrun --gloo`` first asks whether Horovod has Gloo by importing each framework's Horovod extension
in a forked process; with MXNet that import costs about 2.5 s of CPU and 3 s before any rank starts, in
every job, and the test suite starts dozens of Horovod jobs.  This repository's install builds
Horovod with Gloo (the Makefile's ``horovod`` target), and a rank of a Horovod without it fails in
``hvd.init()`` all the same.  Everything else is horovodrun's own: its options, rendezvous server,
environment, output and exit codes.  Users start their jobs with horovodrun itself, as
tests/test_migration.py does.
"""
import os
import sys

ARGV = [sys.executable, os.path.abspath(__file__)]  # (a command line's start, for the callers)

if __name__ == "__main__":
    del sys.path[0]  # (this file's folder, put first by the interpreter: Horovod's imports are its own)
    from horovod.runner import launch

    launch.gloo_built = lambda verbose=False: True  # (the probe above; launch.py's name for it)
    sys.exit(launch.run_commandline())
