"""Gluon's Trainer on mxnet_gc's dist store.

``gluon.Trainer(params, 'sgd', {...}, kvstore=mxnet_gc.kvstore.create('dist_sync'))`` works unchanged.
``mxnet_gc.gluon.Trainer`` takes the same arguments, accepts the store's name ('dist_sync') and
``compression_params={'type': '4bit', ...}``, and talks to the store in bulk: one init for all
parameters and one push and one pull per step (one synchronisation of the workers per step, where
Gluon's own trainer synchronises once per parameter), with small parameters sharing messages of up
to ``bucket_size`` values (MXNET_GC_BUCKET_SIZE when set, else 262144; 0 for one message each).

With ``threshold_groups='auto'`` (and 4bit compression) it gives each parameter one of the three
default threshold groups after ``calibration_steps`` steps, the one whose quantization error on that
parameter's gradients was smallest (mxnet_gc/groups.py).  The calibration steps push dense gradients:
they measure uncompressed training, and the first steps' large gradients, beyond every level of a
group, would otherwise pile up in the residuals and can stall training.  ``threshold_groups`` may
also be a dict of named groups; ``group_overrides`` maps name patterns to a group name or levels.  The
chosen table is ``trainer.group_table`` (and rank 0 prints it).

With ``merge`` ('dp', 'layerwise', 'one', or an int: fixed buckets of that many payload bytes) the
parameters' messages follow a merge plan (mxnet_gc/merge_planner.py).  The first ``profile_steps``
steps send each parameter alone and measure, on every worker: when each gradient becomes ready after
``step`` is called (in backward's order, last layer first; the median over the steps after the first),
how long its codec takes, the time of a push and pull of 8 messages of a few sizes on the store,
per message (the per-message and per-byte cost; see ``_probe`` for how they are sent), the CPU time a
message takes in this process (the smallest probe's), and how busy the machine's cores are during
backward (/proc/stat): on busy cores a message's CPU time and an encode beside backward delay it, and
the planner then sends no message that cannot gain more than it costs.  The averages over the workers
give one plan everywhere; the store regroups its messages by it.  Rank 0 prints the plan; it is
``trainer.merge_plan``, and checkpoints keep it (a resumed trainer with the same ``merge`` option uses
it instead of profiling again).  Needs update_on_kvstore=False.

``nonfinite`` ('warn', the default, 'raise' or 'ignore'): what a gradient holding NaN or inf values
does; the store counts them on every push and names the parameter (mxnet_gc/kvstore/nonfinite.py).

``pipeline`` (default True) pushes each message as soon as its gradients are ready, through the
engine's dependencies; ``pipeline=False`` waits for every gradient first.  With a merge plan on the
parameter server, pipelining also pulls each message as soon as every worker's push of it is summed
(``DistSyncStore.pull_each_message``: one barrier per message, which the probes then include).  MXNet
runs backward in bulks of operations unless MXNET_EXEC_BULK_EXEC_TRAIN=0 is set before its first
operation: then gradients become ready together and there is little to overlap.  And every operator of
a library (such as mxnet_gc's encoders) holds one of MXNet's few temporary-space resources, used in the
order operators were issued: an encode would wait for the end of backward unless MXNET_CPU_TEMP_COPY is
raised (to 64) before MXNet starts.  The trainer warns about both.
"""
import dataclasses
import json
import os
import statistics
import time
import warnings

import mxnet as mx

from mxnet import gluon

from . import checkpoint_files, merge_planner
from . import kvstore as gc_kvstore
from .groups import GroupSelector, format_table
from .kvstore.dist_store import DistSyncStore
from .kvstore.horovod_store import HorovodStore

OUR_STORES = (DistSyncStore, HorovodStore)

STATS_KEY = "__mxgc_grad_rms__"
MERGE_KEY = "__mxgc_merge_profile__"
PROBE_SIZES = (1, 4096, 65536, 262144)  # float32 values of the transport probes
PROBE_MESSAGES = 8  # messages of one size per probe: their mean time is one message's cost
PROBE_REPEATS = 3


DEFAULT_BUCKET_SIZE = 262144  # values (1 MiB of float32)


PIPELINE_TEMP_COPIES = 64


def machine_ticks():
    """(busy, all, kernel) CPU clock ticks of this machine so far, from /proc/stat; None where there is
    none.  Kernel: system, irq and softirq time (where a host's packets are moved)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks), ticks[2] + ticks[5] + ticks[6]


def busy_fraction(before, after):
    """The machine's busy fraction between two ``machine_ticks``; 0 where unknown."""
    if before is None or after is None or after[1] <= before[1]:
        return 0.0
    return min(1.0, (after[0] - before[0]) / (after[1] - before[1]))


def pipelining_problems(environ):
    """What in these environment variables keeps communication from overlapping backward (messages).

    MXNet reads them when it starts, so they must be set before its first operation.
    """
    problems = []
    if environ.get("MXNET_EXEC_BULK_EXEC_TRAIN") != "0":
        problems.append("MXNet runs backward in bulks of operations, so gradients become ready together and "
                        "pipelining overlaps little: set MXNET_EXEC_BULK_EXEC_TRAIN=0 before the first MXNet "
                        "operation")
    copies = environ.get("MXNET_CPU_TEMP_COPY", "4")
    if not copies.isdigit() or int(copies) < PIPELINE_TEMP_COPIES:
        problems.append("every mxnet_gc operator holds one of MXNet's MXNET_CPU_TEMP_COPY temporary-space "
                        "resources (%s), which operators take in turn and use in the order they were issued: "
                        "an encode issued after backward then waits for a backward operator that holds the same "
                        "one, and pipelining overlaps little: set MXNET_CPU_TEMP_COPY=%d (more than the "
                        "operators of one step that use temporary space) before the first MXNet operation"
                        % (copies, PIPELINE_TEMP_COPIES))
    return problems


class Trainer(gluon.Trainer):
    """gluon.Trainer with mxnet_gc's compressed dist store."""

    def __init__(self, params, optimizer, optimizer_params=None, kvstore="dist_sync", compression_params=None,
                 update_on_kvstore=None, bucket_size=None, threshold_groups=None, calibration_steps=50,
                 group_overrides=None, dense_warmup_steps=0, merge=None, pipeline=True, profile_steps=3,
                 nonfinite="warn"):
        if isinstance(kvstore, str) and kvstore in gc_kvstore.STORES:
            kvstore = gc_kvstore.create(kvstore)
        if isinstance(kvstore, DistSyncStore) and not kvstore._chunks:
            if bucket_size is None:
                bucket_size = int(os.environ.get("MXNET_GC_BUCKET_SIZE", DEFAULT_BUCKET_SIZE))
            kvstore.set_bucket_size(bucket_size)
        self._selector = None
        self.group_table = None
        if isinstance(kvstore, OUR_STORES):
            kvstore.set_nonfinite(nonfinite)
        if merge is not None and not (merge in ("dp", "layerwise", "one") or
                                      (isinstance(merge, int) and not isinstance(merge, bool) and merge > 0)):
            raise ValueError("merge must be 'dp', 'layerwise', 'one' or a bucket size in bytes > 0, got %r" % (merge,))
        if merge is not None and not isinstance(kvstore, OUR_STORES):
            raise ValueError("merge needs one of mxnet_gc's stores (kvstore='dist_sync' or 'horovod')")
        if merge is not None and update_on_kvstore is not False:
            raise ValueError("merge needs the optimizer on the workers: pass update_on_kvstore=False")
        if not isinstance(profile_steps, int) or isinstance(profile_steps, bool) or profile_steps < 1:
            raise ValueError("profile_steps must be an int >= 1, got %r" % (profile_steps,))
        self._merge, self._pipeline, self._profile_steps = merge, bool(pipeline), profile_steps
        if merge is not None and pipeline:
            for problem in pipelining_problems(os.environ):
                warnings.warn(problem, stacklevel=2)
        self._ready_samples, self._busy_samples = [], []
        self.merge_plan = None
        self._step_started = self._step_ticks = None
        if threshold_groups is not None:
            if (compression_params or {}).get("type") != "4bit":
                raise ValueError("threshold_groups needs compression_params of type '4bit', got %r"
                                 % (compression_params,))
            groups = None if threshold_groups == "auto" else threshold_groups
            self._selector = GroupSelector(groups, calibration_steps, group_overrides)
        # gluon.Trainer sorts a dict of parameters by name; backward's order is the reverse of the order
        # they were given in (a network's collect_params() lists them as the layers were defined).
        given = list(params.values()) if isinstance(params, (dict, gluon.ParameterDict)) else list(params)
        self._definition_rank = {p.name: i for i, p in enumerate(given)}
        super().__init__(params, optimizer, optimizer_params=optimizer_params, kvstore=kvstore,
                         compression_params=compression_params, update_on_kvstore=update_on_kvstore)
        # Warm-up: the first steps push dense gradients, then the compression starts (with the groups,
        # when they are calibrated over those steps).
        self._warmup = calibration_steps if self._selector is not None else dense_warmup_steps
        if not isinstance(self._warmup, int) or self._warmup < 0:
            raise ValueError("dense_warmup_steps must be an int >= 0, got %r" % (self._warmup,))
        self._steps_done = 0
        self._group_compression = self._compression_params
        if self._warmup and self._compression_params:
            self._compression_params = {"type": "none"}

    def _ours(self):
        return isinstance(self._kvstore, OUR_STORES)

    def _start_clocks(self):
        """Backward runs asynchronously: ready times and the machine's busy fraction count from here."""
        self._step_started, self._step_ticks = time.perf_counter(), machine_ticks()

    def step(self, batch_size, ignore_stale_grad=False):
        self._start_clocks()
        super().step(batch_size, ignore_stale_grad)

    def allreduce_grads(self):
        self._start_clocks()
        super().allreduce_grads()

    def _init_params(self):
        if not self._ours():
            return super()._init_params()
        ready = [p for p in self._params_to_init if not p._deferred_init]
        self._kvstore.set_key_names({self._param2idx[p.name]: p.name for p in ready})
        # Parameters that get gradients are pushed together each step, so they are initialized together
        # (and may share messages); the others (batch-norm statistics) apart from them.
        trained = [p for p in ready if p.grad_req != "null"]
        alone = [[self._param2idx[p.name]] for p in trained] if self._merge is not None else None
        for group, groups in ((trained, alone), ([p for p in ready if p.grad_req == "null"], None)):
            if group:
                keys = [self._param2idx[p.name] for p in group]
                self._kvstore.init(keys, [p.list_data()[0] for p in group], groups=groups)
                self._kvstore.pull(keys, out=[p.list_data() for p in group])
        self._params_to_init = [p for p in self._params_to_init if p._deferred_init]

    def _allreduce_grads(self):
        if not self._ours():
            return super()._allreduce_grads()
        keys, grads, outs = [], [], []
        for i, param in enumerate(self._params):
            if param.grad_req == "null":
                continue
            keys.append(i)
            grads.append(param.list_grad())
            outs.append(param.list_data() if self._update_on_kvstore else param.list_grad())
        if not keys:
            return
        if self._selector is not None and self._selector.calibrating:
            self._selector.observe([g[0] for g in grads])  # this worker's gradients, before the push
        profiling = self._merge is not None and self.merge_plan is None
        if profiling:
            self._ready_samples.append(self._ready_times([self._params[k] for k in keys]))
            self._busy_samples.append(busy_fraction(self._step_ticks, machine_ticks()))
        elif not self._pipeline:  # the baseline: communication starts after the whole backward
            for g in grads:
                g[0].wait_to_read()
        self._kvstore.push(keys, grads)
        self._kvstore.pull(keys, out=outs)
        self._steps_done += 1
        if profiling and len(self._ready_samples) == self._profile_steps:
            self._use_plan(self._plan_merging([self._params[k] for k in keys]))
        if self._steps_done == self._warmup and self._group_compression:
            if self._selector is not None:
                self._assign_groups(keys)
            else:
                self._kvstore.set_gradient_compression(self._group_compression)

    def save_checkpoint(self, prefix, extra=None):
        """Saves what an exact resume needs (a collective call on the workers).

        The files of step S are prefix.S.params (weights, rank 0), prefix.S.rank<r>.residuals (each
        worker's residuals) and the optimizer states (prefix.S.opt.server<r> on each server when the
        optimizer runs there, else prefix.S.opt, rank 0), each with its SHA-256 in a .sha256 file.  Once
        all are written, rank 0 writes prefix.trainer.json, the manifest: the job's settings, groups,
        merge plan, steps, ``extra`` (JSON, returned by load) and every file's SHA-256; then it deletes
        the previous checkpoint's files.  A save interrupted before the manifest leaves the previous
        checkpoint whole.
        """
        if not self._ours():
            raise RuntimeError("save_checkpoint needs mxnet_gc's dist store")
        kv = self._kvstore
        tag = "%s.%d" % (prefix, self._steps_done)
        if kv.rank == 0:
            mx.nd.save(tag + ".params", {p.name: p.data() for p in self._params})
            checkpoint_files.seal(tag + ".params")
        kv.save_residuals("%s.rank%d.residuals" % (tag, kv.rank))
        if self._update_on_kvstore:
            kv.save_optimizer_states(tag + ".opt", dump_optimizer=True)
            opt_files = kv.optimizer_state_files(tag + ".opt")
        else:
            opt_files = [tag + ".opt"]
            if kv.rank == 0:
                checkpoint_files.write(tag + ".opt", self._updaters[0].get_states(dump_optimizer=True))
        kv.barrier()
        if kv.rank != 0:
            return
        files = [tag + ".params"] + ["%s.rank%d.residuals" % (tag, r) for r in range(kv.num_workers)] + opt_files
        previous = _manifest_files(prefix)
        state = {"configuration": self._configuration(), "group_table": self.group_table,
                 "rescale_grad": self._optimizer.rescale_grad, "steps_done": self._steps_done,
                 "merge": self._merge, "merge_plan": self.merge_plan and dataclasses.asdict(self.merge_plan),
                 "extra": extra, "files": {os.path.basename(f): checkpoint_files.digest(f) for f in files}}
        checkpoint_files.write(prefix + ".trainer.json", json.dumps(state).encode())
        for old in set(previous) - {os.path.abspath(f) for f in files}:
            checkpoint_files.remove(old)

    def _configuration(self):
        """The settings a job that resumes this one's checkpoint must share with it."""
        compression = self._group_compression
        return {"num_workers": self._kvstore.num_workers,
                "compression": gc_kvstore.Compression(compression).config if compression else None,
                "threshold_groups": self._selector is not None, "update_on_kvstore": bool(self._update_on_kvstore),
                "parameters": [[p.name, list(p.shape)] for p in self._params]}

    def load_checkpoint(self, prefix):
        """Restores a checkpoint of ``save_checkpoint`` (a collective call, before the first step).

        Refuses a corrupt file, a file of another save, or a checkpoint of a job with other settings
        (workers, compression, parameters), saying what differs.  Returns the ``extra`` saved with it.
        """
        state = json.loads(checkpoint_files.read(prefix + ".trainer.json"))
        folder = os.path.dirname(os.path.abspath(prefix))
        files = {name: os.path.join(folder, name) for name in state["files"]}
        for name, path in files.items():
            checkpoint_files.verify(path, state["files"][name])
        tag = "%s.%d" % (prefix, state["steps_done"])
        # Gluon sets rescale_grad at the first step, before it sends the optimizer to the servers;
        # a resumed trainer sends it now, so it needs the value of the run that saved.
        self._optimizer.rescale_grad = state["rescale_grad"]
        if not self._kv_initialized:
            self._init_kvstore()
        if not self._ours():
            raise RuntimeError("load_checkpoint needs mxnet_gc's dist store")
        self._check_configuration(prefix, state["configuration"])
        saved = mx.nd.load(tag + ".params")
        for p in self._params:
            p.set_data(saved[p.name])
        if self._params_to_init:
            self._init_params()
        self._steps_done = state["steps_done"]
        if self._steps_done >= self._warmup and self._group_compression and self._selector is None:
            self._kvstore.set_gradient_compression(self._group_compression)
        if state["group_table"] is not None and self._selector is not None:
            keys = [i for i, p in enumerate(self._params) if p.grad_req != "null"]
            compression = dict(self._group_compression, per_key={k: row["levels"] for k, row in
                                                                   zip(keys, state["group_table"])})
            self._kvstore.set_gradient_compression(compression)
            self.group_table = state["group_table"]
            self._selector.steps = self._selector.calibration_steps
        plan = state.get("merge_plan")
        if plan and state["merge"] == self._merge:
            self._use_plan(merge_planner.Plan(**plan))
        self._kvstore.load_residuals("%s.rank%d.residuals" % (tag, self._kvstore.rank))
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(tag + ".opt")
            return state["extra"]
        states = checkpoint_files.read(tag + ".opt")
        for updater in self._updaters:
            updater.set_states(states)
        self._optimizer = self._updaters[0].optimizer
        return state["extra"]

    def _check_configuration(self, prefix, saved):
        mine = self._configuration()
        differing = ["%s: %s in the checkpoint, %s in this job" % (k, json.dumps(saved.get(k)), json.dumps(v))
                     for k, v in mine.items() if json.loads(json.dumps(v)) != saved.get(k)]
        if differing:
            raise ValueError("checkpoint %s was saved by a job with other settings; %s"
                             % (prefix, "; ".join(differing)))

    def _backward_order(self, params):
        """``params`` in the order backward produces their gradients (the last defined layer's first)."""
        return sorted(params, key=lambda p: -self._definition_rank[p.name])

    def _ready_times(self, params):
        """Seconds from the call of ``step`` until each gradient is ready, in backward's order."""
        ready = []
        for p in self._backward_order(params):
            p.grad().wait_to_read()
            ready.append(time.perf_counter() - self._step_started)
        return ready

    def _plan_merging(self, params):
        """Measures, averages over the workers, plans; returns the plan (a collective call)."""
        kv = self._kvstore
        if isinstance(kv, DistSyncStore):
            kv.pull_each_message = self._pipeline
        order = self._backward_order(params)
        samples = self._ready_samples[1:] or self._ready_samples  # the first step is a warm-up
        ready = [statistics.median(column) for column in zip(*samples)]
        encode, nbytes = [], []
        for p in order:
            codec = kv._compression.codec_for(self._param2idx[p.name])
            n = p.data().size
            if codec is None:  # dense
                encode.append(0.0)
                nbytes.append(kv.wire_bytes(None, n))
                continue
            state, payload = codec.new_residual(p.shape), mx.nd.zeros(codec.payload_size(n))
            times = []
            for _ in range(2):  # the first call may take the exact path; time the steady one
                start = time.perf_counter()
                codec.encode(p.grad(), state, out=payload).wait_to_read()
                times.append(time.perf_counter() - start)
            encode.append(times[-1])
            nbytes.append(kv.wire_bytes(codec, n))
        probes, host = [], 0.0
        for size in PROBE_SIZES:
            keys = ["%s%d_%d" % (MERGE_KEY, size, j) for j in range(PROBE_MESSAGES)]
            values = [mx.nd.zeros(size) for _ in keys]
            for key, value in zip(keys, values):
                kv.init(key, value, reduce_only=True)
            times, cpu = [], []
            for _ in range(PROBE_REPEATS + 1):
                start, start_cpu = time.perf_counter(), time.process_time()
                self._probe(keys, values)
                times.append((time.perf_counter() - start) / PROBE_MESSAGES)
                cpu.append((time.process_time() - start_cpu) / PROBE_MESSAGES)
            probes.append(statistics.median(times[1:]))
            if size == PROBE_SIZES[0]:  # the smallest message's CPU time: what a message itself costs
                host = statistics.median(cpu[1:])
        busy = statistics.median(self._busy_samples[1:] or self._busy_samples)
        local = mx.nd.array(ready + encode + probes + [host, busy])
        kv.init(MERGE_KEY, mx.nd.zeros(local.shape), reduce_only=True)
        total = mx.nd.zeros(local.shape)
        kv.pushpull(MERGE_KEY, local, out=total)
        mean = (total.asnumpy() / kv.num_workers).tolist()
        k = len(order)
        host, busy = mean[-2:]
        cost = merge_planner.CostModel.fit([8 * s for s in PROBE_SIZES], mean[2 * k:-2], host=host,
                                           contention=min(1.0, max(0.0, busy)))
        layers = [merge_planner.Layer(p.name, b, max(0.0, r), e)
                  for p, b, r, e in zip(order, nbytes, mean[:k], mean[k:2 * k])]
        for a, b in zip(layers, layers[1:]):  # rounding in the average must not reorder them
            b.ready = max(a.ready, b.ready)
        strategy = "fixed" if isinstance(self._merge, int) else self._merge
        plan = merge_planner.make_plan(strategy, layers, cost, bucket_bytes=self._merge)
        if kv.rank == 0:
            print("mxnet_gc: transport cost %.3f ms + %.3f ms/MB per message, %.3f ms of CPU per message, "
                  "machine %.0f%% busy during backward; %s" % (1e3 * cost.alpha, 1e9 * cost.beta, 1e3 * cost.host,
                                                               100 * cost.contention, plan.describe(layers)),
                  flush=True)
        return plan

    def _probe(self, keys, values):
        """Sends the probe messages the way the plan's messages will go: pipelined, one at a time (each
        then pays its own barrier on the parameter server, its own negotiation on Horovod); otherwise in
        one push and one pull (where a message costs what it adds to that round)."""
        batches = [([k], [v]) for k, v in zip(keys, values)] if self._pipeline else [(keys, values)]
        for batch_keys, batch_values in batches:
            self._kvstore.push(batch_keys, batch_values)
            self._kvstore.pull(batch_keys, out=batch_values)
            mx.nd.waitall()

    def _use_plan(self, plan):
        """Sends each group of ``plan`` as one message from now on (a collective call)."""
        if isinstance(self._kvstore, DistSyncStore):
            self._kvstore.pull_each_message = self._pipeline
        self.merge_plan = plan
        self._kvstore.regroup([[self._param2idx[name] for name in g] for g in plan.groups])

    def _assign_groups(self, keys):
        """Averages the calibration statistics over the workers, picks the groups, sets them everywhere."""
        local = self._selector.local_statistics()
        self._kvstore.init(STATS_KEY, mx.nd.zeros(local.shape), reduce_only=True)
        total = mx.nd.zeros(local.shape)
        self._kvstore.pushpull(STATS_KEY, mx.nd.array(local), out=total)
        statistics = total.asnumpy() / self._kvstore.num_workers
        params = [self._params[k] for k in keys]
        chosen, self.group_table = self._selector.choose([p.name for p in params],
                                                         [p.data().size for p in params], statistics)
        compression = dict(self._group_compression, per_key={k: list(g.levels) for k, g in zip(keys, chosen)})
        self._kvstore.set_gradient_compression(compression)
        if self._kvstore.rank == 0:
            print("mxnet_gc: threshold groups after %d calibration steps:\n%s"
                  % (self._selector.calibration_steps, format_table(self.group_table)), flush=True)


def _manifest_files(prefix):
    """The files the checkpoint manifest prefix.trainer.json lists (none when there is none yet)."""
    try:
        state = json.loads(checkpoint_files.read(prefix + ".trainer.json"))
    except (OSError, ValueError):
        return []
    folder = os.path.dirname(os.path.abspath(prefix))
    return [os.path.join(folder, name) for name in state.get("files", {})]
