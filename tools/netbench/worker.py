"""One worker of a benchmark job, inside the cluster: trains its model with the mode's store and
trainer, times the steps after the warm-up, and writes what they cost to OUT/rank<r>.json."""
import os
import statistics
import time

from .models import model_and_batches
from .modes import CALIBRATION_STEPS

COMPUTE_STEPS = 3  # forward + backward alone, after the timed steps (the compute column)
TRACE_STEPS = 3  # steps after them with a trace: the profiler records the last


def interface_bytes():
    """(sent, received) bytes of this host's interface in the cluster (eth0), else of this process's sockets."""
    if os.path.exists("/sys/class/net/eth0/statistics/tx_bytes"):
        values = []
        for counter in ("tx_bytes", "rx_bytes"):
            with open("/sys/class/net/eth0/statistics/" + counter) as f:
                values.append(int(f.read()))
        return tuple(values)
    from mxnet_gc.traffic import socket_bytes

    counts = socket_bytes()
    if counts is None:
        raise SystemExit("bench_network.py measures traffic with `ss` where a host has no eth0: install iproute2")
    return counts


def server_cpu_seconds():
    """CPU seconds so far of this job's parameter servers: the processes of this machine (the namespaced
    hosts share its process table) with DMLC_ROLE=server and this job's scheduler address; None if none
    (Horovod)."""
    from mxnet_gc.launch_processes import processes_with_env

    job = ["%s=%s" % (name, os.environ.get(name, "")) for name in ("DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT")]
    total, found = 0.0, False
    for pid in processes_with_env("DMLC_ROLE=server", *job):
        ticks = cpu_ticks("/proc/%d/stat" % pid)
        if ticks is not None:  # (else a process that ended meanwhile)
            total += ticks / os.sysconf("SC_CLK_TCK")
            found = True
    return total if found else None


def cpu_ticks(stat_path):
    """The CPU clock ticks (user + system) so far of a process or thread from its /proc stat file; None
    if it has ended."""
    try:
        with open(stat_path) as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


def make_trainer(mode, kv, params, bucket_bytes):
    """The mode's trainer: Gluon's on MXNet's store, mxnet_gc's on its own."""
    from mxnet import gluon
    import mxnet_gc

    optimizer = ("sgd", {"learning_rate": 0.01, "momentum": 0.9})
    if mode.classic:
        kv.set_gradient_compression(mode.compression)
        return gluon.Trainer(params, *optimizer, kvstore=kv)
    if mode.store == "mxnet":
        if mode.compression:  # MXNet 1.9.1's dist store refuses pushpull with compression; gluon.Trainer calls it
            kv.pushpull = lambda key, value, out=None, priority=0: (
                kv.push(key, value, priority=priority), kv.pull(key, value if out is None else out, priority=priority))
        return gluon.Trainer(params, *optimizer, kvstore=kv, compression_params=mode.compression)
    return mxnet_gc.gluon.Trainer(params, *optimizer, kvstore=kv, compression_params=mode.compression,
                                  threshold_groups="auto" if mode.groups else None,
                                  calibration_steps=CALIBRATION_STEPS,
                                  update_on_kvstore=False if mode.compression.get("compressed_pull") or mode.horovod
                                  else None,
                                  merge=bucket_bytes if mode.merge == "fixed" else mode.merge, pipeline=mode.pipeline)


def thread_ticks():
    """{thread id: CPU clock ticks so far} of this process's threads (Linux /proc; a tick is 10 ms: over a
    few steps, a thread's time per step is known to 10 ms / steps)."""
    ticks = {int(tid): cpu_ticks("/proc/self/task/%s/stat" % tid) for tid in os.listdir("/proc/self/task")}
    return {tid: t for tid, t in ticks.items() if t is not None}  # (not the threads that ended meanwhile)


def thread_cpu(before, after, steps):
    """Each thread's CPU milliseconds per step between two ``thread_ticks``, busiest first: [(ms, role)]
    with role 'main' for the main thread (the script, its autograd calls and the stores' Python), else
    'other' (MXNet's engine workers, OpenMP's, ps-lite's and Horovod's threads, all named after the
    program)."""
    tick_ms = 1e3 / os.sysconf("SC_CLK_TCK")
    rows = [((ticks - before.get(tid, 0)) * tick_ms / steps, "main" if tid == os.getpid() else "other")
            for tid, ticks in after.items()]
    return sorted((r for r in rows if r[0] > 0), reverse=True)


def record_trace(step, first, path, steps=TRACE_STEPS):
    """Runs ``steps`` steps from step ``first``, the last one under MXNet's profiler (every operation with
    its thread), and writes its trace to ``path`` (None: no trace, the steps alone); the step's bounds
    are a task 'step' of domain 'bench'."""
    import mxnet as mx

    domain = mx.profiler.Domain("bench")
    for i in range(steps - 1 if path else steps):  # (the other workers' steps: the same, unrecorded)
        step(first + i)
    if not path:
        return
    mx.profiler.set_config(profile_all=True, aggregate_stats=False, filename=path)
    mx.profiler.set_state("run")
    task = mx.profiler.Task(domain, "step")
    task.start()
    step(first + steps - 1)
    task.stop()
    mx.profiler.set_state("stop")
    mx.profiler.dump()


def run(mode, model, steps, warmup, bucket_bytes, trace=None):
    """Trains and measures; returns (rank, result).  With ``trace`` (a path), every worker then runs
    TRACE_STEPS more steps and rank 0 records the last with MXNet's profiler into ``trace`` (result
    'threads': each of its threads' CPU time per timed step)."""
    import mxnet as mx
    from mxnet import autograd, gluon
    import mxnet_gc
    from mxnet_gc.profiling import machine_ticks  # (the namespaces share /proc/stat)

    mxnet_gc.log.show()  # (mxnet_gc's lines on standard output: the job's log shows the phases)
    mx.random.seed(1)
    if mode.store == "mxnet":
        kv = mx.kv.create("dist_sync")
    else:
        kv = mxnet_gc.kvstore.create("horovod" if mode.horovod else "dist_sync")
    net, shape, batch, batches = model_and_batches(model, kv.rank, kv.num_workers)
    net.initialize(mx.init.Xavier(magnitude=2))
    # Shapes from a training-mode pass: an inference-mode one leaves convolution weights in MKL-DNN's
    # layout, which MXNet's own dist store cannot init from ("init N first" on its server).
    with autograd.train_mode():
        net(mx.nd.zeros(shape))
    params = net.collect_params()
    trainer = make_trainer(mode, kv, params, bucket_bytes)
    trained = [p for p in params.values() if p.grad_req != "null"]
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step(i, update=True):
        """One training step as a user writes it: no wait between backward and trainer.step, so that
        pushes can start while backward still runs; returns its seconds until the new weights are ready.
        Without ``update``: forward and backward alone, waited for (the compute column)."""
        x, y = batches(i)
        start = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        if update:
            trainer.step(batch)
        for p in trained:
            (p.data() if update else p.grad()).wait_to_read()
        return time.perf_counter() - start

    schedule = getattr(trainer, "schedule", None)  # mxnet_gc's trainer: time the schedule's last phase
    if mode.compression and mode.compression.get("type") == "lgc":  # (its phases are run by the store)
        from mxnet_gc.lgc.options import LGCOptions
        from mxnet_gc.schedule import Schedule

        schedule = Schedule(LGCOptions(mode.compression).phases())
    warmup += schedule.start(schedule.phases[-1].name) if schedule else 0
    if mode.classic:  # (the store's own dense warm-up)
        warmup += mode.compression.get("warmup_steps", 0)
    for i in range(warmup):
        step(i)
    server0 = server_cpu_seconds() if kv.rank == 0 else None
    bytes0, cpu0, wall0 = interface_bytes(), time.process_time(), time.perf_counter()
    machine0, threads0 = machine_ticks(nice=False), thread_ticks()
    totals = [step(warmup + i) for i in range(steps)]
    bytes1, cpu1, wall1 = interface_bytes(), time.process_time(), time.perf_counter()
    machine1, threads1 = machine_ticks(nice=False), thread_ticks()
    server1 = server_cpu_seconds() if server0 is not None else None
    compute_s = statistics.median(step(i, update=False) for i in range(COMPUTE_STEPS))
    if trace:
        record_trace(step, warmup + steps, trace if kv.rank == 0 else None)
    return kv.rank, {"threads": thread_cpu(threads0, threads1, steps),
        "parameters": sum(p.data().size for p in trained), "step_s": totals, "window_s": wall1 - wall0,
        "compute_s": compute_s, "comm_s": max(0.0, statistics.median(totals) - compute_s),
        "sent_per_step": (bytes1[0] - bytes0[0]) / steps, "received_per_step": (bytes1[1] - bytes0[1]) / steps,
        "cpu_per_step": (cpu1 - cpu0) / steps,
        "server_cpu_per_step": None if server1 is None else (server1 - server0) / steps,
        "machine_busy": (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1]),
        "machine_kernel": (machine1[2] - machine0[2]) / max(1, machine1[1] - machine0[1])}
