#!/usr/bin/env python
"""Soak run: a 4bit Fashion-MNIST job of a few thousand steps loses a worker and is resumed.

    .venv/bin/python -m tools.soak_resume [--epochs 6] [--kill-after-epoch 3] [--out DIR]

Three jobs of examples/train_fashion_mnist.py (2 workers, 1 server, tools/launch.py), each saving a
checkpoint after every epoch: an uninterrupted run; a run in which one worker is killed with SIGKILL
some seconds after the checkpoint of epoch --kill-after-epoch (the launcher must end the job); and a
run resumed from that run's last checkpoint.  The resumed run's final weights and every worker's
residuals must equal the uninterrupted run's, bit for bit.  Exit code 0 when they do.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from mxnet_gc.launch_processes import processes_with_env

EXAMPLE = os.path.join(ROOT, "examples", "train_fashion_mnist.py")


def command(args, *extra, tag=None):
    argv = [sys.executable, os.path.join(ROOT, "tools", "launch.py"), "-n", "2", "-s", "1", "--timeout", "3600"]
    if tag:
        argv += ["--env", tag]
    return argv + [sys.executable, EXAMPLE, "--compression", "4bit", "--dense-warmup-steps", "50",
                   "--epochs", str(args.epochs), "--seed", str(args.seed)] + list(extra)


def manifest(prefix):
    """The newest checkpoint's entry of the manifest prefix.trainer.json, or None."""
    try:
        with open(prefix + ".trainer.json") as f:
            return json.load(f)["checkpoints"][0]
    except (OSError, ValueError):
        return None


def final_state(prefix):
    """{name: array} of the checkpoint's weights and residuals (through its manifest)."""
    import mxnet as mx

    folder = os.path.dirname(prefix)
    state = {}
    for name in manifest(prefix)["files"]:
        path = os.path.join(folder, name)
        if name.endswith(".params"):
            state.update(("weight/" + k, v.asnumpy()) for k, v in mx.nd.load(path).items())
        elif name.endswith(".residuals"):
            rank = name.rsplit(".", 2)[-2]
            with np.load(path) as saved:
                state.update(("%s/%s" % (rank, k), saved[k]) for k in saved.files)
    return state


def kill_a_worker(args, prefix, proc, tag):
    """Waits for the checkpoint of epoch args.kill_after_epoch, then SIGKILLs one worker mid-epoch."""
    while proc.poll() is None:
        state = manifest(prefix)
        if state and state["extra"]["epoch"] >= args.kill_after_epoch:
            break
        time.sleep(0.5)
    delay = random.Random(args.seed).uniform(2.0, 8.0)
    time.sleep(delay)
    workers = processes_with_env(tag, "DMLC_ROLE=worker")
    if proc.poll() is not None or not workers:
        sys.exit("soak: the job ended before a worker could be killed")
    os.kill(workers[-1], signal.SIGKILL)
    return delay


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--kill-after-epoch", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="folder for the checkpoints (default: a temporary one)")
    args = parser.parse_args()
    if not 1 <= args.kill_after_epoch < args.epochs:
        parser.error("--kill-after-epoch must be in 1 .. epochs - 1")
    out = args.out or tempfile.mkdtemp(prefix="mxgc-soak-")
    os.makedirs(out, exist_ok=True)
    whole, cut, resumed = (os.path.join(out, n) for n in ("whole", "cut", "resumed"))
    start = time.time()
    subprocess.run(command(args, "--checkpoint", whole), cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    print("soak: uninterrupted run done (%.0f s)" % (time.time() - start), flush=True)

    tag = "MXGC_SOAK=%s" % uuid.uuid4().hex
    proc = subprocess.Popen(command(args, "--checkpoint", cut, tag=tag), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    delay = kill_a_worker(args, cut, proc, tag)
    _, err = proc.communicate(timeout=300)
    killed = "was killed by signal 9" in err and proc.returncode != 0
    last = manifest(cut)["extra"]["epoch"]
    print("soak: killed a worker %.1f s after the checkpoint of epoch %d; launcher exit code %d, %s; "
          "last checkpoint: epoch %d, step %d" % (delay, args.kill_after_epoch, proc.returncode,
                                                 "named the killed worker" if killed else "did NOT report the kill",
                                                 last, manifest(cut)["step"]), flush=True)
    left = processes_with_env(tag)
    subprocess.run(command(args, "--resume", cut, "--checkpoint", resumed), cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    a, b = final_state(whole), final_state(resumed)
    differing = sorted(k for k in a if k not in b or a[k].dtype != b[k].dtype or a[k].shape != b[k].shape
                       or a[k].tobytes() != b[k].tobytes())  # bit for bit
    steps = manifest(whole)["step"]
    print("soak: %d steps; resumed from epoch %d; %d arrays compared (weights and both workers' residuals); "
          "%d differ; processes left after the kill: %d; %.0f s in all"
          % (steps, last, len(a), len(differing), len(left), time.time() - start), flush=True)
    ok = killed and not differing and not left and sorted(a) == sorted(b)
    print("soak: %s" % ("PASSED: the resumed run ends bit for bit where the uninterrupted one does" if ok else
                        "FAILED: %s" % (differing[:5] or "see above")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
