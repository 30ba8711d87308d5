"""One benchmark job on its own shaped hosts (tools/netns_cluster.py), as a table row; and the pooling
of a job's repeated runs into one row."""
import argparse
import os
import signal
import statistics
import tempfile

from mxnet_gc import launch_processes
from .. import horovodrun as hvdrun, jobfiles, netns_cluster
from .modes import RATES_BITS

BENCH = "tools.bench_network"  # (its worker mode)
HOROVOD_CYCLE_MS = 1.0  # Horovod's default cycle time


def codec_seconds(mode, workers, encode, decode):
    """Estimated codec time per step: a worker encodes, the server decodes each worker's push (and for
    a compressed pull encodes the sum, which the worker decodes); on Horovod every worker encodes its
    payload and decodes all W."""
    if encode is None:
        return None
    if mode.horovod:
        return encode + workers * decode
    seconds = encode + workers * decode
    if mode.name == "4bit-cpull":
        seconds += encode + decode
    if mode.sparse:  # sparse pull: the server packs the sum, the worker decodes it once more
        seconds += decode
    return seconds


def servers_value(text):
    """--servers' values: a positive number, or 'half'."""
    if text == "half":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("a positive number of servers or 'half', not %r" % text)
    return int(text)


def servers_of(value, workers):
    """The servers of a job of ``workers`` workers for a --servers value."""
    return max(1, workers // 2) if value == "half" else value


def hosts_of(mode, workers, servers):
    """The hosts a job needs: W for Horovod, else a scheduler, the servers and the workers."""
    return workers if mode.horovod else 1 + servers + workers


def run(model, mode, rate, workers, servers, dilation, args, tag, codec, trace=None):
    """One job (``servers`` parameter servers; none for Horovod) on hosts dilated by ``dilation`` (a
    factor, 'auto' or 'none'); returns its row.  ``codec``: (encode, decode) seconds of the model's
    gradients.  ``trace``: a path where rank 0 writes MXNet's profiler trace of a step after the timed
    ones (worker.record_trace); the row then also has 'threads', rank 0's CPU per thread."""
    worker_argv = jobfiles.worker_command(BENCH, model=model, mode=mode.name, steps=args.steps, warmup=args.warmup,
                                          bucket_bytes=args.bucket_bytes)
    worker_argv += ["--trace", trace] if trace else []
    hosts = hosts_of(mode, workers, servers)
    asked, dilation = dilation, netns_cluster.dilation_for(hosts, dilation)
    slower = dilation or 1  # (every wait of the job, D times longer)
    timeout = int(args.job_timeout * slower)
    env = {tag.split("=")[0]: tag.split("=")[1], "MXNET_GC_COLLECTIVE_TIMEOUT": str(120 * slower),
           "MXNET_GC_JOIN_TIMEOUT": str(60 * slower)}
    # A dilated host has one core's share; undilated, the hosts share this machine's cores: OpenMP teams
    # sized for the whole machine in every process would mostly spin against each other.
    env["OMP_NUM_THREADS"] = "1" if dilation else str(max(1, (os.cpu_count() or 1) // hosts))
    env.update(mode.env)
    if mode.unbulked:  # each gradient its own engine operation; a second engine thread to encode on
        env.update(MXNET_EXEC_BULK_EXEC_TRAIN="0", MXNET_CPU_WORKER_NTHREADS="2")
    with tempfile.TemporaryDirectory() as out:
        report = os.path.join(out, "launch.json")
        if mode.horovod:
            code, traffic, throttled = run_horovod(workers, rate, dilation, worker_argv + ["--out", out], env,
                                                   timeout)
        else:
            launch = ["-n", str(workers), "-s", str(servers), "--timeout", str(timeout), "--report", report]
            launch += ["--mxnet-servers"] if mode.store == "mxnet" else []
            for item in env.items():
                launch += ["--env", "%s=%s" % item]
            code, traffic, throttled = netns_cluster.run_job(hosts, rate, launch + worker_argv + ["--out", out],
                                                             dilation)
        if code != 0:
            raise SystemExit("bench_network.py: job %s %s %s %d workers %d servers failed (exit %d)" % (
            model, mode.name, rate, workers, servers, code))
        ranks = jobfiles.load(out, workers)
        processes = [] if mode.horovod else jobfiles.load_json(report)
    result = dict(row(model, mode, rate, workers, 0 if mode.horovod else servers, ranks, processes, traffic, codec,
                      slower), dilation_asked=str(asked), **emulation(rate, dilation, throttled))
    if trace:
        result["threads"] = ranks[0]["threads"]
    return result


def run_horovod(workers, rate, dilation, command, env, timeout):
    """horovodrun of ``command`` on ``workers`` new hosts (a rank each) shaped to ``rate`` and dilated by
    ``dilation``, itself in a namespace of its own without a CPU share; returns what
    netns_cluster.run_command returns."""
    hosts = ",".join("%s:1" % netns_cluster.address(i) for i in range(workers))
    argv = hvdrun.ARGV + ["-np", str(workers), "-H", hosts,
            "--gloo", "--network-interface", "eth0", "--start-timeout", "120",
            # (Gloo's default 30 s is less than a float32 collective of mlp10m on 8 workers at 25 Mbit/s)
            "--gloo-timeout-seconds", str(timeout),
            # (Horovod's background thread coordinates the ranks once a cycle, 1 ms by default: dilated,
            # 1 ms of the emulated cluster's time)
            "--cycle-time-ms", "%g" % (HOROVOD_CYCLE_MS * (dilation or 1))] + list(command)
    return netns_cluster.run_command(workers, rate, argv, on_host=netns_cluster.LAUNCHER, env=env, timeout=timeout,
                                     dilation=dilation)


def end_leftovers(tag):
    """At the end of a run: ends every process still alive whose environment holds ``tag`` (the run's),
    says what was left behind (processes, namespaces), and returns whether anything was."""
    left = launch_processes.processes_with_env(tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    namespaces = netns_cluster.leftovers()
    print("left behind: %d processes, namespaces %s" % (len(left), namespaces or "none"), flush=True)
    return bool(left or namespaces)


def emulation(rate, dilation, throttled):
    """The columns that say how the hosts were emulated: D, each host's CPU quota, the nominal and the
    applied link rates, each host's time held back by its quota over the whole job (host order:
    scheduler, servers, workers; Horovod: the ranks) and the hosts' TCP congestion control."""
    bits = RATES_BITS[rate]
    cpu = netns_cluster.host_cpu
    return {"dilation": dilation or 1.0, "emulated": dilation is not None,
            "cpu_quota_us": float(cpu.QUOTA_US) if dilation else None,
            "cpu_period_us": float(cpu.period_us(dilation)) if dilation else None,
            "rate_nominal_bits": bits, "rate_applied_bits": bits / dilation if bits and dilation else bits,
            "throttled_s_per_host": " ".join("%.2f" % t for t, _ in throttled) if throttled else "",
            "throttled_s_max": max(t for t, _ in throttled) if throttled else None,
            "tcp_congestion": netns_cluster.CONGESTION}


def row(model, mode, rate, workers, servers, ranks, processes, traffic, codec, slower=1):
    """The table row of a job from its workers' results, the launcher's report and the hosts' traffic;
    every wall time divided by ``slower`` (the dilation: times of the emulated cluster)."""
    r0 = dict(ranks[0], step_s=[s / slower for s in ranks[0]["step_s"]], window_s=ranks[0]["window_s"] / slower,
              compute_s=ranks[0]["compute_s"] / slower, comm_s=ranks[0]["comm_s"] / slower)
    worker_link = (max(r["received_per_step"] for r in ranks), max(r["sent_per_step"] for r in ranks))
    if mode.horovod:  # no server: the busiest link is a worker's
        server_in, server_out = worker_link
    else:  # the servers' links carry every worker's traffic, a server's share each (the mean server's here)
        server_in = sum(r["sent_per_step"] for r in ranks) / servers
        server_out = sum(r["received_per_step"] for r in ranks) / servers
    bits = RATES_BITS[rate]
    # (with more servers than workers a worker's own link is the busiest)
    wire = 8 * max(server_in, server_out, *worker_link) / bits if bits else 0.0
    seconds = codec_seconds(mode, workers, *codec)
    cpu = {(p["role"], p["rank"]): p["cpu_seconds"] for p in processes}

    def job_mb(role, i):
        """Bytes sent (i = 0) or received (1) over the whole job by the hosts of a role, mean, in MB."""
        if mode.horovod:
            values = [t[i] for t in traffic.values()] if role == "worker" else []
        else:
            values = [traffic[p["host"]][i] for p in processes if p["role"] == role]
        return statistics.mean(values) / 1e6 if values else None

    return {"model": model, "mode": mode.name, "rate": rate, "workers": workers, "servers": servers,
            "parameters": r0["parameters"],
            "step_ms": 1e3 * statistics.median(r0["step_s"]), "step_ms_min": 1e3 * min(r0["step_s"]),
            "step_ms_max": 1e3 * max(r0["step_s"]), "timed_steps": len(r0["step_s"]), "runs": 1,
            "steps_ms": [1e3 * s for s in r0["step_s"]],
            "timed_window_ms": 1e3 * r0["window_s"],
            "compute_ms": 1e3 * r0["compute_s"], "comm_ms": 1e3 * r0["comm_s"],
            "server_in_mb_per_step": server_in / 1e6, "server_out_mb_per_step": server_out / 1e6,
            "worker0_sent_mb_per_step": r0["sent_per_step"] / 1e6,
            "worker0_received_mb_per_step": r0["received_per_step"] / 1e6,
            "wire_bound_ms": 1e3 * wire, "codec_ms": None if seconds is None else 1e3 * seconds,
            "worker_cpu_ms_per_step": 1e3 * statistics.mean(r["cpu_per_step"] for r in ranks),
            "server_cpu_ms_per_step": None if r0.get("server_cpu_per_step") is None else 1e3 * r0["server_cpu_per_step"],
            "machine_cpu_busy": r0["machine_busy"], "machine_cpu_kernel": r0["machine_kernel"],
            "cpu_s_scheduler": cpu.get(("scheduler", 0)), "cpu_s_server": cpu.get(("server", 0)),
            "cpu_s_worker_mean": statistics.mean(cpu["worker", r] for r in range(workers)) if cpu else None,
            "job_mb_sent_server": job_mb("server", 0), "job_mb_received_server": job_mb("server", 1),
            "job_mb_sent_scheduler": job_mb("scheduler", 0),
            "job_mb_sent_worker_mean": job_mb("worker", 0), "job_mb_received_worker_mean": job_mb("worker", 1),
            # (packets the shaped links' queues dropped over the whole job, every host)
            "job_packets_dropped": float(sum(t[2] for t in traffic.values()))}


def pool(runs):
    """One row for several runs of one job: step statistics over all their timed steps, the median of
    every other measurement."""
    pooled = {name: statistics.median(r[name] for r in runs) if isinstance(value, float) else value
              for name, value in runs[0].items()}
    steps = [ms for r in runs for ms in r["steps_ms"]]
    pooled.update(step_ms=statistics.median(steps), step_ms_min=min(steps), step_ms_max=max(steps),
                  timed_steps=len(steps), runs=len(runs), steps_ms=steps,
                  run_step_ms=[statistics.median(r["steps_ms"]) for r in runs])
    return pooled
