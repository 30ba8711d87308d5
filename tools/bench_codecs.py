#!/usr/bin/env python
"""Throughput of the 2bit, 4bit and 5bit kernels against the memory-bandwidth reference, in one run.

For each size (1M and 25M float32 values) and thread count (1 and all cores) it times, through the
MXNet operators and with the engine's wait after each call, in interleaved rounds (medians): encode
(gradient + residual -> payload), decode into an existing array, and decode-and-add; LGC's accumulation
pass (accumulator += gradient, the innovation's top n/1e5 and, on a step's leader, the top n/1e3:
src_cpp/lgc_select.cc); next to numpy's copyto of the same array, the memory-bandwidth reference.
GB/s are gigabytes of float32 gradient processed per second (4 n / t).
Then the per-call cost on a 16-value array.  Prints a markdown table and the issue's target ratios.

    .venv/bin/python -m tools.bench_codecs [--sizes 1000000 25000000] [--repeat 31]

MXNET_GC_ISA=baseline|x86-64-v3 runs it on a lower kernel level than the CPU's best.
"""
import argparse
import os
import statistics
import time

import numpy as np
import mxnet as mx

import mxnet_gc
from mxnet_gc import _mx
from mxnet_gc.lgc import vectors
from mxnet_gc.message_plan import MessagePlan
from tools import targets

CONFIGS = {"2bit": {"type": "2bit", "threshold": 0.5},
           "4bit": {"type": "4bit", "thresholds": [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4]},
           # (4bit's pull_bits 5 ladder of those levels, with 2 workers)
           "5bit": {"type": "5bit", "thresholds": [0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 1.2, 1.6, 2.4, 3.2, 4.8, 6.4, 9.6,
                                                   12.8, 19.2]}}


def median_seconds(fns, repeat):
    """{name: median seconds} of each function, timed in interleaved rounds so all see the same load."""
    for fn in fns.values():
        fn()  # warm-up: first touch of outputs, thread-pool start
    times = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def kernel_times(n, repeat):
    """{operation: median seconds} for one size at the current thread count."""
    rng = np.random.default_rng(0)
    grad = mx.nd.array(rng.standard_normal(n, dtype=np.float32))
    out = mx.nd.zeros(n)
    fns = {}
    for name, params in CONFIGS.items():
        codec = mxnet_gc.codecs.create(params)
        residual = mx.nd.zeros(n)
        payload = mx.nd.zeros(codec.payload_size(n))
        fns[name + " encode"] = lambda c=codec, r=residual, p=payload: c.encode(grad, r, out=p).wait_to_read()
        fns[name + " decode"] = lambda c=codec, p=payload: c.decode(p, out).wait_to_read()
        fns[name + " decode_add"] = lambda c=codec, p=payload: c.decode_add(p, out).wait_to_read()
    src = grad.asnumpy()
    dst = np.empty_like(src)
    accumulator = np.zeros(n, np.float32)
    for name, k_lead in (("", 0), (", leader", max(1, n // 1000))):  # (numpy arrays, on mxgc's threads)
        fns["LGC accumulate%s" % name] = lambda k=k_lead: vectors.accumulate(accumulator, None, src, 0.0, k,
                                                                             max(1, n // 100000))
    fns["numpy copyto"] = lambda: np.copyto(dst, src)
    return median_seconds(fns, repeat)


def per_call_microseconds(calls=2000):
    """Synchronous encode and decode of 16 values (call + engine round trip): by the codec's operators
    and by a one-segment message plan (the stores' engine operation), and MXNet's own copy; and a new
    NDArray of a numpy vector of LGC's coded size on the CNN (224 values, as its messages and the
    autoencoder's inputs are made each step) by mx.nd.array and by mxnet_gc's write through its memory."""
    codec = mxnet_gc.codecs.create(CONFIGS["4bit"])
    vector = np.ones(224, np.float32)
    grad, residual, out, token = mx.nd.ones(16), mx.nd.zeros(16), mx.nd.zeros(16), mx.nd.zeros(1)
    payload = codec.encode(grad, residual)
    plan = MessagePlan([(codec, 16, 0, 0, 0)])

    def plan_encode():
        plan.push_encode([grad], [residual], payload)
        payload.wait_to_read()

    def plan_decode():
        plan.push_decode(payload, [out], token)
        token.wait_to_read()

    fns = {
        "4bit encode operator, 16 values": lambda: codec.encode(grad, residual, out=payload).wait_to_read(),
        "4bit decode operator, 16 values": lambda: codec.decode(payload, out).wait_to_read(),
        "4bit encode, message plan, 16 values": plan_encode,
        "4bit decode, message plan, 16 values": plan_decode,
        "MXNet copyto, 16 values": lambda: grad.copyto(out).wait_to_read(),
        "mx.nd.array of 224 values": lambda: mx.nd.array(vector).wait_to_read(),
        "mxnet_gc's array of 224 values (written through its memory)": lambda: _mx.array(vector).wait_to_read(),
    }
    return {name: t * 1e6 for name, t in median_seconds(fns, calls).items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 25_000_000])
    parser.add_argument("--repeat", type=int, default=31)
    args = parser.parse_args()
    all_threads = os.cpu_count()
    print("kernels: %s, cores: %d, mxnet %s\n" % (mxnet_gc.kernel_isa(), all_threads, mx.__version__))
    print("| values | threads | operation | ms | GB/s | x copy bandwidth |")
    print("|---:|---:|---|---:|---:|---:|")
    results = {}
    for n in args.sizes:
        for threads in sorted({1, all_threads}):
            mxnet_gc.set_num_threads(threads)
            times = kernel_times(n, args.repeat)
            results[n, threads] = times
            for op, t in times.items():
                print("| %d | %d | %s | %.3f | %.2f | %.2f |"
                      % (n, threads, op, t * 1e3, 4 * n / t / 1e9, times["numpy copyto"] / t))
    mxnet_gc.set_num_threads(0)
    print("\n| per call (synchronous) | us | x MXNet's copyto |\n|---|---:|---:|")
    calls = per_call_microseconds()
    for name, us in calls.items():
        print("| %s | %.1f | %.2f |" % (name, us, us / calls["MXNet copyto, 16 values"]))
    big = results[max(args.sizes), all_threads]
    print("\nTargets (largest size, all threads):")
    print(targets.line("4bit encode / copy bandwidth", big["numpy copyto"] / big["4bit encode"], ">=", 0.5))
    print(targets.line("4bit decode / copy bandwidth", big["numpy copyto"] / big["4bit decode"], ">=", 0.5))
    print(targets.line("4bit encode time / 2bit encode time", big["4bit encode"] / big["2bit encode"], "<=", 1.3))
    print("- 5bit encode / copy bandwidth: %.2f, decode: %.2f" % (big["numpy copyto"] / big["5bit encode"],
                                                                 big["numpy copyto"] / big["5bit decode"]))
    print(targets.line("a message plan's encode of 16 values / MXNet's copyto",
                       calls["4bit encode, message plan, 16 values"] / calls["MXNet copyto, 16 values"], "<=", 1.1))


if __name__ == "__main__":
    main()
