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
group, would otherwise pile up in the residuals and can stall training; ``threshold_groups`` may also be a dict of
named groups; ``group_overrides`` maps name patterns to a group name or levels.  The chosen table is ``trainer.group_table`` (and rank 0
prints it).
"""
import json
import os

import mxnet as mx

from mxnet import gluon

from . import kvstore as gc_kvstore
from .groups import GroupSelector, format_table
from .kvstore.dist_store import DistSyncStore

STATS_KEY = "__mxgc_grad_rms__"


DEFAULT_BUCKET_SIZE = 262144  # values (1 MiB of float32)


class Trainer(gluon.Trainer):
    """gluon.Trainer with mxnet_gc's compressed dist store."""

    def __init__(self, params, optimizer, optimizer_params=None, kvstore="dist_sync", compression_params=None,
                 update_on_kvstore=None, bucket_size=None, threshold_groups=None, calibration_steps=50,
                 group_overrides=None, dense_warmup_steps=0):
        if isinstance(kvstore, str) and kvstore in gc_kvstore.STORES:
            kvstore = gc_kvstore.create(kvstore)
        if isinstance(kvstore, DistSyncStore) and not kvstore._chunks:
            if bucket_size is None:
                bucket_size = int(os.environ.get("MXNET_GC_BUCKET_SIZE", DEFAULT_BUCKET_SIZE))
            kvstore.set_bucket_size(bucket_size)
        self._selector = None
        self.group_table = None
        if threshold_groups is not None:
            if (compression_params or {}).get("type") != "4bit":
                raise ValueError("threshold_groups needs compression_params of type '4bit', got %r"
                                 % (compression_params,))
            groups = None if threshold_groups == "auto" else threshold_groups
            self._selector = GroupSelector(groups, calibration_steps, group_overrides)
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
        return isinstance(self._kvstore, DistSyncStore)

    def _init_params(self):
        if not self._ours():
            return super()._init_params()
        ready = [p for p in self._params_to_init if not p._deferred_init]
        # Parameters that get gradients are pushed together each step, so they are initialized together
        # (and may share messages); the others (batch-norm statistics) apart from them.
        for group in ([p for p in ready if p.grad_req != "null"], [p for p in ready if p.grad_req == "null"]):
            if group:
                keys = [self._param2idx[p.name] for p in group]
                self._kvstore.init(keys, [p.list_data()[0] for p in group])
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
        self._kvstore.push(keys, grads)
        self._kvstore.pull(keys, out=outs)
        self._steps_done += 1
        if self._steps_done == self._warmup and self._group_compression:
            if self._selector is not None:
                self._assign_groups(keys)
            else:
                self._kvstore.set_gradient_compression(self._group_compression)

    def save_checkpoint(self, prefix, extra=None):
        """Saves what an exact resume needs (a collective call on the workers).

        prefix.params (weights, rank 0), prefix.trainer.json (groups, rank 0), prefix.rank<r>.residuals
        (each worker's residuals), and the optimizer states: prefix.opt.server<r> on each server when
        the optimizer runs there, else prefix.opt (rank 0).  ``extra`` (JSON) comes back from load.
        """
        if not self._ours():
            raise RuntimeError("save_checkpoint needs mxnet_gc's dist store")
        kv = self._kvstore
        if kv.rank == 0:
            mx.nd.save(prefix + ".params", {p.name: p.data() for p in self._params})
            with open(prefix + ".trainer.json", "w") as f:
                json.dump({"group_table": self.group_table, "compression": kv._compression.config,
                           "rescale_grad": self._optimizer.rescale_grad, "steps_done": self._steps_done,
                           "extra": extra}, f)
        kv.save_residuals("%s.rank%d.residuals" % (prefix, kv.rank))
        if self._update_on_kvstore:
            kv.save_optimizer_states(prefix + ".opt", dump_optimizer=True)
        elif kv.rank == 0:
            with open(prefix + ".opt", "wb") as f:
                f.write(self._updaters[0].get_states(dump_optimizer=True))

    def load_checkpoint(self, prefix):
        """Restores a checkpoint of ``save_checkpoint`` (a collective call, before the first step).

        Returns the ``extra`` saved with it.
        """
        with open(prefix + ".trainer.json") as f:
            state = json.load(f)
        # Gluon sets rescale_grad at the first step, before it sends the optimizer to the servers;
        # a resumed trainer sends it now, so it needs the value of the run that saved.
        self._optimizer.rescale_grad = state["rescale_grad"]
        if not self._kv_initialized:
            self._init_kvstore()
        if not self._ours():
            raise RuntimeError("load_checkpoint needs mxnet_gc's dist store")
        saved = mx.nd.load(prefix + ".params")
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
        self._kvstore.load_residuals("%s.rank%d.residuals" % (prefix, self._kvstore.rank))
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(prefix + ".opt")
            return state["extra"]
        else:
            with open(prefix + ".opt", "rb") as f:
                states = f.read()
            for updater in self._updaters:
                updater.set_states(states)
            self._optimizer = self._updaters[0].optimizer
        return state["extra"]

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
