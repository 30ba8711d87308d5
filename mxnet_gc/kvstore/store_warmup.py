"""A store's own step counting, for stores used without mxnet_gc.gluon.Trainer (Module.fit, a plain
gluon.Trainer, direct push/pull calls): it advances the store's step clock and fits 'auto' levels.

The store sees pushes, not steps: a key pushed again starts the next step, so one call per parameter
(gluon.Trainer, Module) and one call for all of them count alike.  The clock is the store's schedule
(mxnet_gc/schedule.py, the compression's phases): 'dense', with 'auto' levels (4bit's 'thresholds',
gc_2bit's 'threshold') the last steps 'fit_levels' measuring each key's gradients (level_fit.py), then
'compressed'.  A store driven by the trainer (``StoreBase.follow``) has none: the trainer's schedule
counts its steps.
"""
from .. import schedule
from ..level_fit import LevelFitter
from . import agreement


class StoreWarmup:
    """Advances ``clock`` (the store's Schedule) at each step inferred from the pushes; the level fitter."""

    def __init__(self, compression, clock):
        self.clock = clock
        fit = compression.fit_steps
        self.fitter = LevelFitter(fit, compression.levels_of) if fit else None
        self.fits = 0  # level fits done (each averages under its own name)
        self._step_keys = set()

    def push(self, keys):
        """Before a push of ``keys`` (reduce-only keys left out): True when it starts the codecs (the first
        push of the first compressed step)."""
        started = False
        if self._step_keys.intersection(keys):
            self._step_keys.clear()
            started = self.clock.advance() is not None and self.clock.current.sends == schedule.COMPRESSED
        self._step_keys.update(keys)
        return started

    def observe(self, grads):
        """In the 'fit_levels' phase: measures each key's gradient (``grads``: key -> NDArray)."""
        if self.fitter is not None and self.clock.current.name == schedule.FIT_LEVELS:
            self.fitter.observe(grads)

    def fit(self, store, keys, names):
        """Ends the measurement: each key's ladder from the workers' largest values (a collective call over
        ``store``); returns (levels by key, the table as text)."""
        levels = self.fitter.fit_over_workers(store, keys, names, name="fit_levels_%d" % self.fits)
        self.fits += 1
        table, self.fitter = self.fitter.format(), None
        return levels, table

    def state_dict(self):
        return {"schedule": self.clock.state_dict(),
                "step_keys": sorted(self._step_keys, key=agreement.key_order),
                "fitter": self.fitter.state_dict() if self.fitter is not None else None}

    def load_state_dict(self, state):
        """Resumes where ``state_dict`` was taken; returns True when that was past the dense steps (the
        codecs must start)."""
        if state is None:
            return False
        self.clock.load_state_dict(state["schedule"])
        self._step_keys = set(state["step_keys"])
        if self.clock.current.sends == schedule.COMPRESSED:
            self.fitter = None
            return True
        if self.fitter is not None and state["fitter"] is not None:
            self.fitter.load_state_dict(state["fitter"])
        return False
