"""The training schedule: which phase each step is in, and what that phase's pushes carry.

A schedule is a list of phases, each with a name, a length in steps (the last runs to the end) and
what its pushes send: ``'dense'`` (float32 gradients) or ``'compressed'`` (the job's codec).  The Gluon
trainer builds one from its options, for example

    dense 0-49 (warm-up), calibrate 50-99 (dense, per-layer statistics gathered),
    profile 100-102 (compressed, one message per layer, timings gathered), compressed 103-

and every worker walks it in step, so phase switches happen at the same step everywhere.  New staged
methods (a density ramp, an autoencoder's training) are new phases, not new counters in the trainer.
"""
import dataclasses

# What a phase's pushes send.
DENSE, COMPRESSED = "dense", "compressed"
SENDS = (DENSE, COMPRESSED)

# Phase names, of every schedule: the trainer's (gluon.py), the store's warm-up (kvstore/base.py) and
# learned gradient compression's (lgc/options.py).
WARMUP = "dense"  # dense float32 pushes before a codec starts
FIT_LEVELS = "fit_levels"  # the store's warm-up steps that fit 4bit's 'auto' levels (level_fit.py)
CALIBRATE = "calibrate"  # the trainer's dense steps that choose the threshold groups / levels
PROFILE = "profile"  # the trainer's compressed steps that measure the merge planner's costs
CODEC = "compressed"  # the codec, to the end
SPARSE_PREFIX = "sparse-"  # LGC's ramp stages: sparse-1, sparse-2, ...
AE_TRAIN = "train"  # LGC: the autoencoder trains on the workers' sparse vectors
LGC = "lgc"  # LGC: the autoencoder's codes travel


@dataclasses.dataclass(frozen=True)
class Phase:
    """``steps`` steps (None: until the end) whose pushes send ``sends``."""

    name: str
    steps: object
    sends: str

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a phase needs a name, got %r" % (self.name,))
        if self.steps is not None and (isinstance(self.steps, bool) or not isinstance(self.steps, int)
                                       or self.steps < 1):
            raise ValueError("phase %r: steps must be an int >= 1 or None, got %r" % (self.name, self.steps))
        if self.sends not in SENDS:
            raise ValueError("phase %r: sends must be one of %s, got %r" % (self.name, SENDS, self.sends))


@dataclasses.dataclass(frozen=True)
class PhaseHandler:
    """What the owner of a schedule does in one of its phases besides sending: ``during(grads)`` at each of
    its steps, before the push (the worker's gradients); ``leave()`` once its last step is done (a
    collective call: every worker at the same step).  ``times_backward``: ``during`` measures backward
    itself (the owner does not wait for the gradients first)."""

    during: object = None
    leave: object = None
    times_backward: bool = False


NO_HANDLER = PhaseHandler()


class Schedule:
    """The phases of a run and the number of steps done; ``advance`` after each step."""

    def __init__(self, phases):
        phases = [p if isinstance(p, Phase) else Phase(*p) for p in phases]
        if not phases:
            raise ValueError("a schedule needs at least one phase")
        names = [p.name for p in phases]
        if len(set(names)) != len(names):
            raise ValueError("phase names must differ, got %s" % names)
        if any(p.steps is None for p in phases[:-1]) or phases[-1].steps is not None:
            raise ValueError("only the last phase runs to the end (steps=None), got %s" % names)
        self.phases = tuple(phases)
        self.step = 0

    def start(self, name):
        """The first step of the phase ``name``."""
        start = 0
        for p in self.phases:
            if p.name == name:
                return start
            start += p.steps
        raise KeyError("no phase %r in %s" % (name, self.describe()))

    def phase_at(self, step):
        start = 0
        for p in self.phases:
            if p.steps is None or step < start + p.steps:
                return p
            start += p.steps

    @property
    def current(self):
        """The phase of the step about to run."""
        return self.phase_at(self.step)

    def advance(self):
        """Counts a finished step; returns the new phase when the next step starts one, else None."""
        before = self.current
        self.step += 1
        after = self.current
        return after if after is not before else None

    def spans(self, first, end):
        """The phases steps first .. end - 1 ran in: [{"phase", "sends", "steps": [first, last]}]."""
        spans = []
        for step in range(first, end):
            p = self.phase_at(step)
            if spans and spans[-1]["phase"] == p.name:
                spans[-1]["steps"][1] = step
            else:
                spans.append({"phase": p.name, "sends": p.sends, "steps": [step, step]})
        return spans

    def has(self, name):
        return any(p.name == name for p in self.phases)

    def describe(self):
        parts = []
        for p in self.phases:
            start = self.start(p.name)
            end = "" if p.steps is None else str(start + p.steps - 1)
            parts.append("%s %d-%s (%s)" % (p.name, start, end, p.sends))
        return ", ".join(parts)

    def state_dict(self):
        return {"step": self.step, "phases": [dataclasses.astuple(p) for p in self.phases]}

    def load_state_dict(self, state):
        """Resumes at the saved step; the phases must be the ones this schedule was built with."""
        saved = [tuple(p) for p in state["phases"]]
        if saved != [dataclasses.astuple(p) for p in self.phases]:
            raise ValueError("the checkpoint's schedule (%s) differs from this job's (%s)"
                             % (Schedule(saved).describe(), self.describe()))
        self.step = state["step"]


def trainer_schedule(compression, given, dense_warmup_steps, calibration_steps, profile_steps, calibrates,
                     profiles):
    """mxnet_gc.gluon.Trainer's schedule from its options (ValueError for a bad one): ``dense_warmup_steps``
    dense steps (by default the compression's 'warmup_steps', less the calibration's steps when it
    ``calibrates``), ``calibration_steps`` dense steps when it ``calibrates``, ``profile_steps`` coded
    steps when it ``profiles``, then the codec; with 'lgc', LGC's phases.  ``compression``: the
    kvstore's Compression of the params ``given`` (None without)."""
    for name, value, low in (("profile_steps", profile_steps, 1), ("dense_warmup_steps", dense_warmup_steps, 0)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
            raise ValueError("%s must be an int >= %d, got %r" % (name, low, value))
    if compression is None or compression.type == "none":
        return Schedule([Phase(WARMUP, None, DENSE)])
    if compression.runs_own_phases:
        if dense_warmup_steps or profiles:
            raise ValueError("'lgc' runs its own phases (its 'dense_steps' are its dense warm-up) and messages "
                             "(each coded tensor alone): dense_warmup_steps (other than 0) and merge do not apply")
        return Schedule(compression.phases())
    warmup = dense_warmup_steps
    if warmup is None:
        warmup = compression.warmup_steps
        if calibrates:  # the calibration's dense steps are part of the warm-up
            warmup = max(0, warmup - calibration_steps)
    elif "warmup_steps" in given and given["warmup_steps"] != warmup:
        raise ValueError("dense_warmup_steps=%r and the compression's 'warmup_steps' %r differ; give one"
                         % (warmup, given["warmup_steps"]))
    phases = [Phase(WARMUP, warmup, DENSE)] if warmup else []
    if calibrates:
        phases.append(Phase(CALIBRATE, calibration_steps, DENSE))
    if profiles:
        phases.append(Phase(PROFILE, profile_steps, COMPRESSED))
    return Schedule(phases + [Phase(CODEC, None, COMPRESSED)])
