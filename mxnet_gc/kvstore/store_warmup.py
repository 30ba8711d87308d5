"""A store's own warm-up: dense float32 steps before the codec starts, for stores used without
mxnet_gc.gluon.Trainer (Module.fit, a plain gluon.Trainer, direct push/pull calls).

The store sees pushes, not steps: a key pushed again starts the next step, so one call per parameter
(gluon.Trainer, Module) and one call for all of them count alike.  The warm-up is a Schedule
(mxnet_gc/schedule.py): 'dense', with 'auto' levels (4bit's 'thresholds', gc_2bit's 'threshold') the
last steps 'fit_levels' measuring each key's gradients (level_fit.py), then 'compressed'.
"""
from .. import schedule
from ..level_fit import LevelFitter
from ..schedule import Phase, Schedule
from . import agreement


class StoreWarmup:
    """The warm-up's schedule, the keys pushed in the current step and the level fitter."""

    def __init__(self, compression):
        fit = compression.fit_steps
        phases = [Phase(schedule.WARMUP, compression.warmup_steps - fit, schedule.DENSE)] \
            if compression.warmup_steps > fit else []
        if fit:
            phases.append(Phase(schedule.FIT_LEVELS, fit, schedule.DENSE))
        self.schedule = Schedule(phases + [Phase(schedule.CODEC, None, schedule.COMPRESSED)]) if phases else None
        self.fitter = LevelFitter(fit, compression.levels_of) if fit else None
        self.fits = 0  # level fits done (each averages under its own name)
        self._step_keys = set()

    @property
    def dense(self):
        """Whether pushes are dense float32 now."""
        return self.schedule is not None and self.schedule.current.sends == schedule.DENSE

    def push(self, keys):
        """Before a push of ``keys`` (reduce-only keys left out): True when it starts the codecs (the first
        push of the first compressed step)."""
        if self.schedule is None:
            return False
        started = False
        if self._step_keys.intersection(keys):
            self._step_keys.clear()
            started = self.schedule.advance() is not None and self.schedule.current.sends == schedule.COMPRESSED
        self._step_keys.update(keys)
        return started

    def observe(self, grads):
        """In the 'fit_levels' phase: measures each key's gradient (``grads``: key -> NDArray)."""
        if self.fitter is not None and self.schedule.current.name == schedule.FIT_LEVELS:
            self.fitter.observe(grads)

    def fit(self, store, keys, names):
        """Ends the measurement: each key's ladder from the workers' largest values (a collective call over
        ``store``); returns (levels by key, the table as text)."""
        levels = self.fitter.fit_over_workers(store, keys, names, name="fit_levels_%d" % self.fits)
        self.fits += 1
        table, self.fitter = self.fitter.format(), None
        return levels, table

    def state_dict(self):
        """Where the warm-up is, or None without one."""
        if self.schedule is None:
            return None
        return {"schedule": self.schedule.state_dict(),
                "step_keys": sorted(self._step_keys, key=agreement.key_order),
                "fitter": self.fitter.state_dict() if self.fitter is not None else None}

    def load_state_dict(self, state):
        """Resumes where ``state_dict`` was taken; returns True when that was past the warm-up (the codecs
        must start)."""
        if self.schedule is None or state is None:
            return False
        self.schedule.load_state_dict(state["schedule"])
        self._step_keys = set(state["step_keys"])
        if self.schedule.current.sends == schedule.COMPRESSED:
            self.fitter = None
            return True
        if self.fitter is not None and state["fitter"] is not None:
            self.fitter.load_state_dict(state["fitter"])
        return False
