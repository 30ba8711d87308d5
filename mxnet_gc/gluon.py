"""Gluon's Trainer on mxnet_gc's stores.

``gluon.Trainer(params, 'sgd', {...}, kvstore=mxnet_gc.kvstore.create('dist_sync'))`` works unchanged.
``mxnet_gc.gluon.Trainer`` takes the same arguments, accepts the stores' names ('dist_sync', 'horovod',
'gc_dist_sync', 'gc_horovod') and ``compression_params={'type': '4bit', ...}``, and talks to the store in
bulk: one init for all parameters and one push and one pull per step (one synchronisation of the
workers per step, where Gluon's own trainer synchronises once per parameter).

What a step sends is decided by the trainer's schedule (``trainer.schedule``, mxnet_gc/schedule.py),
built from the options: ``dense_warmup_steps`` dense steps (by default the compression's own warm-up,
its ``'warmup_steps'``, 50 for mxnet_gc's codecs, less the calibration's dense steps); with
``threshold_groups``, ``calibration_steps`` dense steps whose gradients measure each 4bit group's error
per parameter (groups.py); with ``merge``, ``profile_steps`` compressed steps with each parameter alone,
measuring what the merge planner needs (profiling.py); then the compression to the end.  With 'lgc' the
schedule is LGC's phases (dense, the sparse ramp, the autoencoder's training, lgc).  It is the one step
clock of the job: an mxnet_gc store follows it (``store.follow``) instead of counting steps itself, and
the trainer advances it after each step's pull.  Rank 0 prints every phase switch with its step.

- ``threshold_groups='auto'`` (4bit): each parameter gets the default group with the smallest error
  (a dict of named groups replaces the defaults; ``group_overrides`` maps name patterns to a group name
  or levels).  The table is ``trainer.group_table``; rank 0 prints it.  4bit's ``'thresholds': 'auto'``
  gives each parameter a ladder above its largest gradient values in the calibration steps
  (level_fit.py), so that gradients of any scale fit; a store without this trainer does it in its own
  warm-up.
- ``merge`` (merge_policy.py): None, the default, fills messages of up to the store's ``message_bytes``
  of float32 at init (1 MiB on the parameter server, 64 MiB on Horovod);
  'dp', 'layerwise', 'one' or a number of payload bytes plan the messages from the profile phase (the
  plan is ``trainer.merge_plan``; needs update_on_kvstore=False).
- ``pipeline`` (default True) pushes each message as soon as its gradients are ready, through the
  engine's dependencies; on the parameter server a merge plan's messages are then also pulled one by
  one as soon as every worker's push of each is summed.  ``pipeline=False`` waits for every gradient.
  The trainer warns when MXNet's settings keep backward from overlapping (config.py).
- ``nonfinite`` ('warn', 'raise' or 'ignore'): what a gradient holding NaN or inf values does; the
  store counts them on every push and names the parameter.
- ``save_checkpoint`` / ``load_checkpoint`` (checkpoint.py): weights, residuals, optimizer states and
  every component's state; a resumed job ends bit for bit where an uninterrupted one does.
"""
from mxnet import gluon

from . import _mx, config
from . import kvstore as gc_kvstore
from .groups import GroupSelector
from .level_fit import LevelFitter
from . import log
from .log import logger
from .kvstore.base import StoreBase
from .merge_policy import MergePolicy
from .profiling import MergeProfiler
from .schedule import CALIBRATE, COMPRESSED, DENSE, NO_HANDLER, PROFILE, PhaseHandler, trainer_schedule
from .trainer_checkpoints import TrainerCheckpoints
from .warmup_notice import WarmupNotice


# hvd.DistributedTrainer's arguments that mxnet_gc's Trainer refuses, and what to use instead
HOROVOD_ONLY = {
    "compression": "give mxnet_gc's codec as compression_params instead; hvd.Compression.fp16 (half of float32's "
                   "bytes) maps to {'type': '8bit'} (a quarter, each segment scaled), and {'type': '4bit'} sends an "
                   "eighth",
    "gradient_predivide_factor": "drop it: it splits Horovod's averaging before and after the sum, and mxnet_gc's "
                                 "stores sum the workers' gradients in float32 (divide Horovod's learning rate by the "
                                 "number of workers instead)",
}


class Trainer(TrainerCheckpoints, _mx.TrainerBase):
    """gluon.Trainer with mxnet_gc's compressed stores: a schedule of phases and the components it drives.

    Parameters
    ----------
    params : ParameterDict, dict or list of Parameter
        The parameters to train, as for ``gluon.Trainer``.
    optimizer : str or Optimizer
        As for ``gluon.Trainer``.
    optimizer_params : dict, optional
        As for ``gluon.Trainer``.
    kvstore : str or KVStoreBase, default 'dist_sync'
        mxnet_gc's store (an instance, or 'dist_sync', 'dist_async', 'horovod' and their ``gc_`` names), or
        any store ``gluon.Trainer`` takes.
    compression_params : dict, optional
        What ``set_gradient_compression`` takes (``mxnet_gc.kvstore.Compression``): for example
        ``{'type': '4bit'}`` (levels fitted to each parameter's gradients during the dense warm-up).
    update_on_kvstore : bool, optional
        As for ``gluon.Trainer``; False runs the optimizer on the workers (needed by ``merge`` and
        ``'lgc'``).  With ``'compressed_pull'`` (4bit's default) the pulls carry the sums 4bit-encoded when the
        optimizer runs on the workers, the servers' weights' changes when it runs on the servers.
    threshold_groups : 'auto' or dict, optional
        4bit only: give each parameter the threshold group with the smallest error on its gradients
        ('auto': the groups small, medium and large; a dict maps names to groups).
    calibration_steps : int, default 50
        With ``threshold_groups`` or 4bit's ``'thresholds': 'auto'``: dense steps whose gradients are measured before the groups are chosen.
    group_overrides : dict, optional
        Parameter-name patterns mapped to a group name or levels, overriding the choice.
    dense_warmup_steps : int, optional
        Dense steps before the compression starts; by default the compression's own ``'warmup_steps'``
        (50 for mxnet_gc's codecs) less the calibration steps; 0 compresses from the first step.
    merge : None, 'dp', 'layerwise', 'one' or int, optional
        How parameters share messages: None fills messages of up to the store's ``message_bytes`` at init
        (1 MiB on the parameter server, 64 MiB on Horovod); the others plan them
        after ``profile_steps`` measured steps (an int: a bucket of that many payload bytes).
    pipeline : bool, default True
        Push each message as soon as backward produced its gradients.
    profile_steps : int, default 3
        With a planned ``merge``: steps measured before planning.
    nonfinite : {'warn', 'raise', 'ignore'}, default 'warn'
        What a gradient holding NaN or inf values does.
    compression, gradient_predivide_factor
        ``hvd.DistributedTrainer``'s: refused, saying what to use instead (``HOROVOD_ONLY``).
    """

    def __init__(self, params, optimizer, optimizer_params=None, kvstore="dist_sync", compression_params=None,
                 update_on_kvstore=None, threshold_groups=None, calibration_steps=50, group_overrides=None,
                 dense_warmup_steps=None, merge=None, pipeline=True, profile_steps=3, nonfinite="warn",
                 compression=None, gradient_predivide_factor=None):
        given = [name for name, value in (("compression", compression), ("gradient_predivide_factor",
                                                                          gradient_predivide_factor)) if value is not None]
        if given:
            raise ValueError("; ".join("%s= is hvd.DistributedTrainer's: %s" % (name, HOROVOD_ONLY[name])
                                       for name in given))
        # (a clear error for bad params, before anything else)
        compression = gc_kvstore.Compression(compression_params) if compression_params is not None else None
        kvstore = self._store_of(kvstore, compression_params)
        if compression is not None and isinstance(kvstore, StoreBase):  # (now: levels a compressed pull cannot use)
            compression = gc_kvstore.Compression(compression_params, kvstore.num_workers)
        self._merge_policy = MergePolicy(merge)
        if self._merge_policy.planned and not isinstance(kvstore, StoreBase):
            raise ValueError("merge needs one of mxnet_gc's stores (kvstore='dist_sync' or 'horovod'), got %r"
                             % (kvstore,))
        if self._merge_policy.planned and update_on_kvstore is not False:
            raise ValueError("merge needs the optimizer on the workers: pass update_on_kvstore=False")
        # a method with phases of its own (LGC's): they are the schedule, and its store switches between them
        self._own_phases = compression is not None and compression.runs_own_phases
        if compression is not None and compression.needs_workers_optimizer:
            if update_on_kvstore:
                raise ValueError("'lgc' needs the optimizer on the workers: pass update_on_kvstore=False")
            update_on_kvstore = False
        fits_levels = compression is not None and compression.fits_levels
        self.schedule = trainer_schedule(compression, compression_params, dense_warmup_steps, calibration_steps,
                                         profile_steps, threshold_groups is not None or fits_levels,
                                         self._merge_policy.planned)
        self._pipeline = bool(pipeline)
        if self._merge_policy.planned and pipeline:
            for problem in config.settings().pipelining_problems():
                log.warn(problem)
        self._groups = None
        if threshold_groups is not None:
            if (compression_params or {}).get("type") != "4bit":
                raise ValueError("threshold_groups needs compression_params of type '4bit', got %r"
                                 % (compression_params,))
            if threshold_groups != "auto" and not isinstance(threshold_groups, dict):
                raise ValueError("threshold_groups must be 'auto' (the groups small, medium and large) or a dict "
                                 "from group name to levels, got %r" % (threshold_groups,))
            self._groups = GroupSelector(None if threshold_groups == "auto" else threshold_groups,
                                         calibration_steps, group_overrides, compression.rounding)
        elif fits_levels:  # 'auto' levels: above each parameter's largest values
            self._groups = LevelFitter(calibration_steps, compression.levels_of, compression.check_fit)
        if isinstance(kvstore, StoreBase):
            kvstore.set_nonfinite(nonfinite)
        self._store = kvstore
        self._profiler = MergeProfiler(self._pipeline)
        self._handlers = self._phase_handlers()
        self._notice, self._announced = WarmupNotice(), compression  # (what rank 0 says of the warm-up)
        if isinstance(kvstore, StoreBase):  # one step clock: the store's phases follow this schedule
            kvstore.follow(self.schedule)
        self._compression = compression_params
        # gluon.Trainer sorts a dict of parameters by name; backward's order is the reverse of the order
        # they were given in (a network's collect_params() lists them as the layers were defined).
        given = list(params.values()) if isinstance(params, (dict, gluon.ParameterDict)) else list(params)
        self._definition_rank = {p.name: i for i, p in enumerate(given)}
        first_sends_dense = self.schedule.current.sends == DENSE and not self._own_phases
        super().__init__(params, optimizer, optimizer_params=optimizer_params, kvstore=kvstore,
                         compression_params={"type": "none"} if compression_params and first_sends_dense
                         else self._compression, update_on_kvstore=update_on_kvstore)
        correction = (compression_params or {}).get("momentum", 0)
        if correction and getattr(self.optimizer, "momentum", 0):
            raise ValueError("compression_params' 'momentum' %g is DGC's momentum correction, which replaces the "
                             "optimizer's momentum (both would apply momentum twice): give the optimizer momentum 0, "
                             "got %g" % (correction, self.optimizer.momentum))

    @staticmethod
    def _store_of(kvstore, compression):
        """The store to train with: mxnet_gc's for its names; MXNet's single-process stores (or none) as
        gluon.Trainer takes them, with a warning when a compression was asked for (nothing compresses
        there, in MXNet either); ValueError for any other name."""
        if isinstance(kvstore, str) and kvstore in gc_kvstore.NAMES:
            return gc_kvstore.create(kvstore)
        if kvstore is None or kvstore in gc_kvstore.LOCAL_NAMES:
            if compression and compression.get("type") != "none":
                log.warn("mxnet_gc: kvstore=%r trains in one process, where nothing is sent: compression_params %r "
                         "are not used (MXNet ignores them there too); for a distributed job use kvstore='dist_sync' "
                         "(started by python -m mxnet_gc.launch) or 'horovod' (horovodrun)" % (kvstore, compression))
            return kvstore
        if isinstance(kvstore, str):
            raise ValueError(gc_kvstore.unknown_store(kvstore))
        return kvstore

    @property
    def store(self):
        """The kvstore this trainer was given (or created from a name)."""
        return self._store

    @property
    def group_table(self):
        return self._groups.table if self._groups is not None else None

    @property
    def merge_plan(self):
        return self._merge_policy.plan

    def _ours(self):
        return isinstance(self.active_store, StoreBase)

    def step(self, batch_size, ignore_stale_grad=False):
        """One training step, as ``gluon.Trainer.step``: pushes the gradients, pulls, updates."""
        self._profiler.start_step()
        super().step(batch_size, ignore_stale_grad)

    def allreduce_grads(self):
        self._profiler.start_step()
        super().allreduce_grads()

    def _trained(self, backward=False):
        """(store keys, parameters) of the parameters with gradients, in the trainer's order or, with
        ``backward``, in the order backward produces their gradients (the last defined layer's first)."""
        params = [p for p in self.parameter_list if p.grad_req != "null"]
        if backward:
            params.sort(key=lambda p: -self._definition_rank[p.name])
        return [self.key_of(p.name) for p in params], params

    def init_parameters(self):
        if not self._ours():
            return super().init_parameters()
        ready = [p for p in self.waiting_parameters if not self.is_deferred(p)]
        self.active_store.set_key_names({self.key_of(p.name): p.name for p in ready})
        # Parameters that get gradients are pushed together each step, so they are initialized together
        # (and may share messages), in backward's order (the order of their messages, and of their pushes);
        # the others (batch-norm statistics) apart from them.
        trained = [p for p in ready if p.grad_req != "null"]
        order = sorted(trained, key=lambda p: -self._definition_rank[p.name])  # backward's
        groups = self._merge_policy.initial_groups([self.key_of(p.name) for p in order],
                                                   [p.data().size for p in order], self.active_store.message_bytes)
        for group, grouping in ((order, groups), ([p for p in ready if p.grad_req == "null"], None)):
            if group:
                keys = [self.key_of(p.name) for p in group]
                self.active_store.init(keys, [p.list_data()[0] for p in group], groups=grouping)
                self.active_store.pull(keys, out=[p.list_data() for p in group])
        self.waiting_parameters = [p for p in self.waiting_parameters if self.is_deferred(p)]

    def reduce_gradients(self):
        if not self._ours():
            return super().reduce_gradients()
        keys, grads, outs = [], [], []
        for i, param in enumerate(self.parameter_list):
            if param.grad_req != "null":
                keys.append(i)
                grads.append(param.list_grad())
                outs.append(param.list_data() if self.updates_on_store else param.list_grad())
        if not keys:
            return
        phase = self.schedule.current
        if self._announced is not None:
            self._notice.push(self.active_store.rank, self.schedule, self._announced)
        handler = self._handlers.get(phase.name, NO_HANDLER)
        if handler.during is not None:
            handler.during(grads)
        if not (self._pipeline or handler.times_backward):  # the baseline: communication after the whole backward
            for g in grads:
                g[0].wait_to_read()
        self.active_store.push(keys, grads)
        self.active_store.pull(keys, out=outs)
        entered = self.schedule.advance()
        if entered is not None:
            self._switch(phase, entered)

    def _switch(self, left, entered):
        """What changes between two phases (a collective call: every worker switches at the same step)."""
        kv = self.active_store
        logger.info("step %d: phase %s -> %s (%s)", self.schedule.step, left.name, entered.name, entered.sends)
        handler = self._handlers.get(left.name, NO_HANDLER)
        if handler.leave is not None:
            handler.leave()
        if entered.sends == COMPRESSED and left.sends == DENSE and not self._own_phases:  # (its store switches)
            kv.set_gradient_compression(self._compression_of(self._trained()[0]))

    # ---- the trainer's phases (schedule.py's PhaseHandler) ----

    def _phase_handlers(self):
        """What the trainer does in its phases besides sending: the calibration measures each layer's
        gradients and chooses its levels; the profile times backward and the transport and plans the
        messages."""
        return {CALIBRATE: PhaseHandler(during=lambda grads: self._groups.observe([g[0] for g in grads]),
                                        leave=self._choose_levels),
                PROFILE: PhaseHandler(during=lambda grads: self._profiler.sample(self._trained(backward=True)[1]),
                                      leave=self._plan_messages, times_backward=True)}

    def _choose_levels(self):
        """The end of the calibration: each layer's threshold group or 'auto' levels, from every worker's
        statistics (gathered in the trainer's order)."""
        params = self._trained()[1]
        self._groups.choose_over_workers(self.active_store, [p.name for p in params], [p.data().size for p in params])
        logger.info("%s:\n%s", self._groups.title(self._announced.codec_type), self._groups.format())

    def _plan_messages(self):
        """The end of the profile: the merge plan from the transport's measured costs, in use from now on."""
        kv = self.active_store
        kv.set_pull_each_message(self._pipeline)
        backward_keys, backward_params = self._trained(backward=True)
        layers, cost = self._profiler.measure(kv, backward_params, backward_keys)
        plan = self._merge_policy.make_plan(layers, cost)
        logger.info("transport cost %.3f ms + %.3f ms/MB per message, %.3f ms of CPU per message, machine %.0f%% "
                    "busy during backward; %s", 1e3 * cost.alpha, 1e9 * cost.beta, 1e3 * cost.host,
                    100 * cost.contention, plan.describe(layers))
        self._use_plan()

    def _compression_of(self, keys):
        """The job's compression, with each key's chosen threshold group once they are calibrated."""
        if self.group_table is None:
            return self._compression
        by_name = {row["name"]: row["levels"] for row in self.group_table}
        return dict(self._compression, per_key={self.key_of(p.name): by_name[p.name] for p in self.parameter_list
                                                if p.name in by_name})

    def _use_plan(self):
        """Sends each group of the merge plan as one message from now on (a collective call)."""
        self.active_store.set_pull_each_message(self._pipeline)
        self.active_store.regroup([[self.key_of(name) for name in g] for g in self.merge_plan.groups])
