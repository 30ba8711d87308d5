"""A store's step clock: the schedule (mxnet_gc/schedule.py) whose phase says whether a push is dense or
coded, and, when the store counts its own steps, the counting and the fit of 'auto' levels.

The schedule is the compression's phases ('dense', with 'auto' levels (4bit's 'thresholds', gc_2bit's
'threshold') the last warm-up steps 'fit_levels' measuring each key's gradients (level_fit.py), then
'compressed'; or LGC's phases), or a trainer's that the store follows (mxnet_gc.gluon.Trainer, which
advances it).  Used alone (Module.fit, a plain gluon.Trainer, direct push/pull calls) the store counts
steps from its pushes: a key pushed again starts the next step, so one call per parameter (gluon.Trainer,
Module) and one call for all of them count alike.  LGC's rounds know where its steps end: the store then
calls ``end_step``.
"""
from .. import level_fit, log, schedule
from ..level_fit import LevelFitter
from ..schedule import NO_HANDLER, PhaseHandler, Schedule
from . import agreement


class StoreClock:
    """The schedule, whether it is followed, and the step counting of a clock of the store's own."""

    def __init__(self, compression):
        self.schedule, self.followed = None, False
        self.set_compression(compression)

    def follow(self, clock, compression):
        """Makes ``clock`` (a trainer's Schedule, advanced by its owner) the schedule."""
        self.followed, self.schedule = True, clock
        self.set_compression(compression)

    def set_compression(self, compression):
        """The clock of a new compression: its phases on a clock of the store's own; a followed one must
        hold LGC's phases when LGC runs."""
        self.counts, self.fitter, self.fits, self._step_keys = False, None, 0, set()
        if self.followed:
            if compression.runs_own_phases and self.schedule.phases != tuple(compression.phases()):
                raise ValueError("'lgc' runs its own phases (%s); the trainer's schedule is %s"
                                 % (Schedule(compression.phases()).describe(), self.schedule.describe()))
            return
        self.schedule = Schedule(compression.phases())
        self.counts = not compression.runs_own_phases
        fit = compression.fit_steps
        self.fitter = LevelFitter(fit, compression.levels_of, compression.check_fit) if fit and self.counts else None

    def push(self, keys):
        """Before a push of ``keys`` (reduce-only keys left out): (phase left, phase entered) when it starts
        the first step of a phase on a clock the store counts, else None."""
        if not self.counts:
            return None
        change = None
        if self._step_keys.intersection(keys):
            self._step_keys.clear()
            left = self.schedule.current
            entered = self.schedule.advance()
            change = None if entered is None else (left, entered)
        self._step_keys.update(keys)
        return change

    def end_step(self):
        """Ends a step whose end the store's rounds know (LGC's): advances a clock of the store's own (a
        followed one is advanced by its owner)."""
        if not self.followed:
            self.schedule.advance()

    def fit(self, store, keys, names):
        """Ends the measurement: each key's ladder from the workers' largest values (a collective call over
        ``store``); returns (levels by key, the table as text)."""
        levels = self.fitter.fit_over_workers(store, keys, names, name="fit_levels_%d" % self.fits)
        self.fits += 1
        table, self.fitter = self.fitter.format(), None
        return levels, table

    def state_dict(self):
        """Where a clock the store counts is, or None."""
        if not self.counts:
            return None
        return {"schedule": self.schedule.state_dict(),
                "step_keys": sorted(self._step_keys, key=agreement.key_order),
                "fitter": self.fitter.state_dict() if self.fitter is not None else None}

    def load_state_dict(self, state):
        """Resumes where ``state_dict`` was taken; returns True when that was past the dense steps (the
        codecs must start)."""
        if not self.counts or state is None:
            return False
        self.schedule.load_state_dict(state["schedule"])
        self._step_keys = set(state["step_keys"])
        if self.schedule.current.sends == schedule.COMPRESSED:
            self.fitter = None
            return True
        if self.fitter is not None and state["fitter"] is not None:
            self.fitter.load_state_dict(state["fitter"])
        return False


class ClockCalls:
    """StoreBase's step-clock calls (a part of the class: it reads the store's ``_clock``, compression and
    layout, set by StoreBase.__init__)."""

    @property
    def schedule(self):
        """The step clock (mxnet_gc/schedule.py): its phase says whether pushes are dense or coded.  The
        compression's own phases (its dense warm-up, or LGC's), counted by the store from its pushes, or
        a trainer's schedule (``follow``)."""
        return self._clock.schedule

    @property
    def followed(self):
        """Whether the steps are counted by a trainer's schedule (``follow``) rather than by the store."""
        return self._clock.followed

    def follow(self, schedule):
        """Makes ``schedule`` (mxnet_gc.gluon.Trainer's) the step clock, advanced by its owner after each
        step's pull: its phases replace the compression's dense warm-up; with 'lgc' they are LGC's."""
        self._clock.follow(schedule, self._compression)

    def _count_step(self, keys):
        """Before a push: counts the step on a clock of the store's own; a phase left runs its handler's
        ``leave``, and at the end of the dense steps the codecs start (a collective call, at the same push
        on every worker, which push the same keys)."""
        if not self._clock.followed:  # (a trainer's schedule: the trainer says it)
            self._warmup_notice.push(self.rank, self._clock.schedule, self._compression, self._clock.counts)
        change = self._clock.push([k for k in keys if k not in self._reduce_only])
        if change is None:
            return
        left, entered = change
        started = entered.sends == schedule.COMPRESSED
        if started:
            self._warmup_notice.started(self.rank, self._clock.schedule.step)
        leave = self._clock_handlers().get(left.name, NO_HANDLER).leave
        if leave is not None:
            leave()
        if started:
            self._assign_codecs(self._layout.messages)

    def _clock_handlers(self):
        """What the store does in its own clock's phases besides sending (schedule.PhaseHandler): in
        'fit_levels', each key's gradients measured at every step and, at its end, the levels fitted."""
        if self._clock.fitter is None:
            return {}
        return {schedule.FIT_LEVELS: PhaseHandler(during=self._clock.fitter.observe, leave=self._fit_levels)}

    def _observe_warmup(self, grads):
        """Before a push: the current phase's ``during`` with the gradients (reduce-only keys left out)."""
        during = self._clock_handlers().get(self._clock.schedule.current.name, NO_HANDLER).during
        if during is not None:
            during({k: g for k, g in grads.items() if k not in self._reduce_only})

    def _fit_levels(self):
        """Ends 'thresholds': 'auto''s measurement (a collective call; level_fit.py); logs the table."""
        keys = sorted((k for k in self._shapes if k not in self._reduce_only), key=agreement.key_order)
        levels, table = self._clock.fit(self, keys, [self._nonfinite.names.get(k, str(k)) for k in keys])
        self._compression = self._compression.fitted(levels)
        log.logger.info("%s:\n%s", level_fit.title(self._compression.codec_type, self._compression.fit_steps), table)
