#!/usr/bin/env python
"""The top-k kernels: time against the memory-bandwidth reference, and index encodings.

For each layer size it feeds the codec a stream of gradients (fresh normal samples) for 2 / density
steps, until the residuals and the adaptive threshold are in their steady state, then times in
interleaved rounds
(medians): the steady-state encode (selection, packing, residual update), the scatter decode, and
numpy's copy of the same array (the bandwidth reference); and LGC's accumulation pass (src_cpp/lgc_select.cc:
DGC's step and the selection of the leader's and the innovation's top-k, k = density n).  ``--momentum``:
both with DGC's momentum correction (src_cpp/dgc_momentum.h).  Then, on the indices the codec sent, the
bytes per index of the candidate index encodings: int32 (what the payload uses), the deltas between
ascending indices as LEB128 varints, and as 16-bit deltas (with an escape for larger gaps).

    .venv/bin/python -m tools.bench_topk [--sizes 1048576 4194304] [--density 0.01] [--momentum 0.9] [--repeat 15]
"""
import argparse
import os

import numpy as np
import mxnet as mx

import mxnet_gc
from mxnet_gc.lgc import vectors
from tools.bench_codecs import median_seconds


def varint_bytes(values):
    """Bytes of LEB128 varints of non-negative ints (7 bits per byte)."""
    v = np.asarray(values, np.int64)
    return int(np.sum(1 + (v >= 1 << 7) + (v >= 1 << 14) + (v >= 1 << 21) + (v >= 1 << 28)))


def delta16_bytes(values):
    """Bytes of 16-bit deltas, a gap of 2^16 or more taking an escape plus a 32-bit value (6 bytes)."""
    v = np.asarray(values, np.int64)
    return int(np.sum(np.where(v < 1 << 16, 2, 6)))


def measure(n, density, momentum, threads, repeat):
    mxnet_gc.set_num_threads(threads)
    codec = mxnet_gc.codecs.create({"type": "layerwise_topk", "density": density, "momentum": momentum})
    rng = np.random.default_rng(0)
    grads = [mx.nd.array(rng.standard_normal(n).astype(np.float32)) for _ in range(4)]
    state, payload, out = codec.new_residual((n,)), mx.nd.zeros(codec.payload_size(n)), mx.nd.zeros(n)
    step = [0]

    def encode():
        codec.encode(grads[step[0] % 4], state, out=payload).wait_to_read()
        step[0] += 1

    for _ in range(int(2 / density)):  # into the steady state: a value waits about 1/density steps
        encode()
    src, dst = grads[0].asnumpy(), np.empty(n, np.float32)
    accumulator, velocity, k = np.zeros(n, np.float32), np.zeros(n, np.float32) if momentum else None, max(1, int(density * n))
    fns = {"encode": encode, "decode": lambda: codec.decode(payload, out).wait_to_read(),
           "lgc accumulate": lambda: vectors.accumulate(accumulator, velocity, src, momentum, k, k // 16),
           "numpy copyto": lambda: np.copyto(dst, src)}
    times = median_seconds(fns, repeat)
    words = payload.asnumpy().view(np.int32)
    count = int(words[0])
    indices = words[1:1 + count]
    gaps = np.diff(np.concatenate([[-1], indices])) - 1
    mxnet_gc.set_num_threads(0)
    return times, count, codec.capacity(n), gaps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1 << 20, 1 << 22])
    parser.add_argument("--density", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.0)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    print("density %g, momentum %g, cores %d, mxnet %s\n" % (args.density, args.momentum, os.cpu_count(),
                                                             mx.__version__))
    print("| values | threads | operation | ms | GB/s of gradient | x copy bandwidth |")
    print("|---:|---:|---|---:|---:|---:|")
    gaps_seen = {}
    for n in args.sizes:
        for threads in sorted({1, os.cpu_count()}):
            times, count, capacity, gaps = measure(n, args.density, args.momentum, threads, args.repeat)
            gaps_seen[n] = (count, capacity, gaps)
            for op, t in times.items():
                print("| %d | %d | %s | %.3f | %.2f | %.2f |" % (n, threads, op, 1e3 * t, 4 * n / t / 1e9,
                                                                 times["numpy copyto"] / t))
    print("\n| values | sent (capacity) | int32 B/index | varint delta B/index | 16-bit delta B/index |")
    print("|---:|---:|---:|---:|---:|")
    for n, (count, capacity, gaps) in gaps_seen.items():
        print("| %d | %d (%d) | 4.00 | %.2f | %.2f |" % (n, count, capacity, varint_bytes(gaps) / count,
                                                        delta16_bytes(gaps) / count))


if __name__ == "__main__":
    main()
