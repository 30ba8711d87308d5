"""mxnet_gc.gluon.Trainer's checkpoints: ``save_checkpoint`` and ``load_checkpoint`` (the files are
checkpoint.py's): the weights, the store's residuals, the optimizer's states (the workers' or the servers')
and the state of every phase of the trainer's schedule, so that a resumed job ends bit for bit where an
uninterrupted one does."""
from . import _mx, checkpoint, optimizer_state
from . import kvstore as gc_kvstore
from .schedule import COMPRESSED


class TrainerCheckpoints:
    """The Trainer's checkpoint calls (a part of the class: it reads the trainer's schedule, groups, merge
    policy, profiler and store, set by Trainer.__init__)."""


    def _configuration(self):
        """The settings a job that resumes this one's checkpoint must share with it."""
        compression = self._compression
        return {"num_workers": self.active_store.num_workers,
                "compression": gc_kvstore.Compression(compression).config if compression else None,
                "threshold_groups": self._groups is not None, "update_on_kvstore": self.updates_on_store,
                "parameters": [[p.name, list(p.shape)] for p in self.parameter_list]}

    def save_checkpoint(self, prefix, extra=None, keep=1):
        """Saves what an exact resume needs (a collective call on the workers; see checkpoint.py): files
        prefix-SSSS.* of this step, listed in prefix.trainer.json with the ``keep`` - 1 checkpoints before
        it (older ones are deleted).  ``extra`` (JSON) comes back from ``load_checkpoint``."""
        if not self._ours():
            raise RuntimeError("save_checkpoint needs one of mxnet_gc's stores")
        state = {"configuration": self._configuration(), "rescale_grad": self.optimizer.rescale_grad,
                 "schedule": self.schedule.state_dict(), "merge": self._merge_policy.state_dict(),
                 "profile": self._profiler.state_dict(),
                 "groups": self._groups.state_dict() if self._groups is not None else None, "extra": extra,
                 "servers": self.active_store.num_servers}
        weights = {p.name: p.data() for p in self.parameter_list}
        states = None if self.updates_on_store else \
            (lambda path: optimizer_state.save(path, _mx.updater_states(self), self.optimizer))
        checkpoint.save(prefix, self.active_store, self.schedule.step, weights, states, state, keep)

    def load_checkpoint(self, prefix, step=None):
        """Restores a checkpoint of ``save_checkpoint`` (a collective call, before the first step): the
        newest the prefix keeps, or that of ``step``.

        Refuses a corrupt file, a file of another save, or a checkpoint of a job with other settings
        (workers, compression, parameters), saying what differs.  Returns the ``extra`` saved with it.
        ``mxnet_gc.checkpoint.export(prefix, net, fname)`` writes its weights for ``net.load_parameters``.
        """
        state, tag = checkpoint.load(prefix, step)
        # Gluon sets rescale_grad at the first step, before it sends the optimizer to the servers;
        # a resumed trainer sends it now, so it needs the value of the run that saved.
        self.optimizer.rescale_grad = state["rescale_grad"]
        self.ensure_store()
        if not self._ours():
            raise RuntimeError("load_checkpoint needs one of mxnet_gc's stores")
        checkpoint.check_configuration(prefix, state["configuration"], self._configuration())
        if self.updates_on_store and state.get("servers") != self.active_store.num_servers:
            raise ValueError("checkpoint %s holds the optimizer states of the %s server(s) the optimizer ran on, one "
                             "file each; this job has %d: resume with %s servers"
                             % (prefix, state.get("servers"), self.active_store.num_servers, state.get("servers")))
        saved = checkpoint.weights(tag)
        for p in self.parameter_list:
            p.set_data(saved[p.name])
        if self.waiting_parameters:
            self.init_parameters()
        self.schedule.load_state_dict(state["schedule"])
        if self._groups is not None:
            self._groups.load_state_dict(state["groups"])
        self._merge_policy.load_state_dict(state["merge"])
        self._profiler.load_state_dict(state["profile"])
        kv = self.active_store
        if self.schedule.current.sends == COMPRESSED:
            kv.set_gradient_compression(self._compression_of(self._trained()[0]))
        if self.merge_plan is not None:
            self._use_plan()
        kv.load_residuals("%s.rank%d.residuals" % (tag, kv.rank))
        if self.updates_on_store:
            kv.load_optimizer_states(tag + ".opt")
        else:
            _mx.set_updater_states(self, lambda: optimizer_state.load(tag + ".opt", into=self.optimizer)[0])
        return state["extra"]
