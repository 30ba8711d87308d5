"""What the merge planner needs to know, measured on every worker during the schedule's 'profile' phase.

During the profile steps each parameter is sent alone with the codec that will run, and the profiler
records when each gradient becomes ready after ``step`` is called (in backward's order, last layer
first; the median over the steps after the first) and how busy the machine's cores are during backward
(/proc/stat).  At the end (``measure``, a collective call) it times each parameter's encode, sends probe
messages of a few sizes through the store (the per-message and per-byte cost, and the CPU time a
message takes in this process), and averages everything over the workers, so that every worker makes
the same plan from the same numbers.
"""
import statistics
import time

import mxnet as mx

from . import merge_planner

PROBE_SIZES = (1, 4096, 32768)  # float32 values of the transport probes (the largest, 256 KiB, sets the per-byte cost)
PROBE_MESSAGES = 8  # messages of one size per probe: their mean time is one message's cost
PROBE_REPEATS = 3


def machine_ticks(nice=True):
    """(busy, all, kernel) CPU clock ticks of this machine so far, from /proc/stat; None where there is
    none.  Kernel: system, irq and softirq time (where a host's packets are moved).  ``nice=False``
    leaves niced time out of busy (the network benchmark keeps idle cores awake with niced loops)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    busy = sum(ticks) - ticks[3] - ticks[4] - (0 if nice else ticks[1])
    return busy, sum(ticks), ticks[2] + ticks[5] + ticks[6]


def busy_fraction(before, after):
    """The machine's busy fraction between two ``machine_ticks``; 0 where unknown."""
    if before is None or after is None or after[1] <= before[1]:
        return 0.0
    return min(1.0, (after[0] - before[0]) / (after[1] - before[1]))


class MergeProfiler:
    """Ready times and busy fractions of the profile steps, then ``measure`` for the planner."""

    def __init__(self, pipeline):
        self.pipeline = pipeline
        self._ready, self._busy = [], []
        self._started = self._ticks = None

    def start_step(self):
        """Backward runs asynchronously: ready times and the busy fraction count from here."""
        self._started, self._ticks = time.perf_counter(), machine_ticks()

    def sample(self, params):
        """One profile step: waits for each gradient of ``params`` (in backward's order) and notes when."""
        ready = []
        for p in params:
            p.grad().wait_to_read()
            ready.append(time.perf_counter() - (self._started or time.perf_counter()))
        self._ready.append(ready)
        self._busy.append(busy_fraction(self._ticks, machine_ticks()))

    def state_dict(self):
        """The samples so far (a job resumed in the middle of the profile phase keeps them)."""
        return {"ready": self._ready, "busy": self._busy}

    def load_state_dict(self, state):
        self._ready, self._busy = [list(r) for r in state["ready"]], list(state["busy"])

    def measure(self, kv, params, keys):
        """(layers, cost model) averaged over the workers, for ``params`` in backward's order and their
        store ``keys`` (a collective call)."""
        samples = self._ready[1:] or self._ready  # the first step is a warm-up
        ready = [statistics.median(column) for column in zip(*samples)]
        encode, nbytes = [], []
        for p, key in zip(params, keys):
            codec, n = kv.codec_for(key), p.data().size
            encode.append(0.0 if codec is None else _encode_seconds(codec, p))
            nbytes.append(kv.wire_bytes(codec, n))
        probes, host = self._probe_transport(kv)
        busy = statistics.median(self._busy[1:] or self._busy)
        mean = kv.average("merge_profile", ready + encode + probes + [host, busy]).tolist()
        k = len(params)
        host, busy = mean[-2:]
        cost = merge_planner.CostModel.fit([8 * s for s in PROBE_SIZES], mean[2 * k:-2], host=host,
                                           contention=min(1.0, max(0.0, busy)))
        layers = [merge_planner.Layer(p.name, b, max(0.0, r), e)
                  for p, b, r, e in zip(params, nbytes, mean[:k], mean[k:2 * k])]
        for a, b in zip(layers, layers[1:]):  # rounding in the average must not reorder them
            b.ready = max(a.ready, b.ready)
        return layers, cost

    def _probe_transport(self, kv):
        """Seconds per message for each probe size, and the smallest message's CPU time (what a message
        itself costs).  Sent the way the plan's messages will go: pipelined, one at a time (each then
        pays its own barrier on the parameter server, its own negotiation on Horovod); otherwise in one
        push and one pull (where a message costs what it adds to that round)."""
        probes, host = [], 0.0
        for size in PROBE_SIZES:
            keys = ["__mxgc_probe_%d_%d__" % (size, j) for j in range(PROBE_MESSAGES)]
            values = [mx.nd.zeros(size) for _ in keys]
            for key, value in zip(keys, values):
                kv.init(key, value, reduce_only=True)
            batches = [([k], [v]) for k, v in zip(keys, values)] if self.pipeline else [(keys, values)]
            times, cpu = [], []
            for _ in range(PROBE_REPEATS + 1):
                start, start_cpu = time.perf_counter(), time.process_time()
                for batch_keys, batch_values in batches:
                    kv.push(batch_keys, batch_values)
                    kv.pull(batch_keys, out=batch_values)
                    mx.nd.waitall()
                times.append((time.perf_counter() - start) / PROBE_MESSAGES)
                cpu.append((time.process_time() - start_cpu) / PROBE_MESSAGES)
            probes.append(statistics.median(times[1:]))
            if size == PROBE_SIZES[0]:
                host = statistics.median(cpu[1:])
        return probes, host


def _encode_seconds(codec, param):
    state, payload = codec.new_residual(param.shape), mx.nd.zeros(codec.payload_size(param.data().size))
    times = []
    for _ in range(2):  # the first call may take the exact path; time the steady one
        start = time.perf_counter()
        codec.encode(param.grad(), state, out=payload).wait_to_read()
        times.append(time.perf_counter() - start)
    return times[-1]
