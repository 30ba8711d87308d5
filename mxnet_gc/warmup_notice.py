"""What the store tells the user about its dense warm-up, whatever drives it (Module.fit, a plain
gluon.Trainer, mxnet_gc's Trainer, push and pull called directly): once, on rank 0 at the first push,
what the steps will send; the step at which the codec starts; and, when the process ends, a warning if
the job stopped before the codec ever started (every push was dense float32), with the fix.
"""
import atexit

from . import schedule
from . import log
from .log import logger


def _first_coded_step(plan):
    """The first step whose pushes are compressed under the schedule ``plan``, or None."""
    start = 0
    for p in plan.phases:
        if p.sends == schedule.COMPRESSED:
            return start
        start += p.steps or 0
    return None


def describe(compression):
    """The codec in words: '4bit with levels fitted per key over the last 20 warm-up steps and compressed
    pulls'."""
    if compression.lgc:
        return "lgc"
    what = [compression.codec_type or compression.type]
    if compression.fits_levels:
        what.append("with levels fitted per key over the last %d warm-up steps" % compression.fit_steps)
    if compression.compressed_pull:
        what.append("and compressed pulls")
    return " ".join(what)


class WarmupNotice:
    """The announcement at the first push of each schedule, the switch's line and the end-of-process
    check, on rank 0 (a store's own clock, or mxnet_gc's Trainer's schedule)."""

    def __init__(self):
        self._plan = self._compression = None  # what the last announcement was of
        self._ahead = False

    def push(self, rank, plan, compression, counts_ahead=False):
        """Before each push (or step) under the schedule ``plan``: the first under a new schedule with a
        codec announces it (the first of all arms the end-of-process check).  ``counts_ahead``: ``plan``
        counts a step when the next one starts (a store's own count), not when it ends."""
        start = None if rank != 0 or plan is self._plan else _first_coded_step(plan)
        if start is None:
            return
        if self._plan is None:
            atexit.register(self.at_exit)
        self._plan, self._compression, self._ahead = plan, compression, counts_ahead
        if start:
            logger.info("dense float32 pushes for %d steps (the warm-up: 'warmup_steps'), then %s (%s)",
                        start, describe(compression), plan.describe())

    def started(self, rank, step):
        """The codec starts at ``step`` (a store that counts its own steps)."""
        if rank == 0 and self._compression is not None:
            logger.info("step %d: the warm-up is over; pushes are now %s", step, describe(self._compression))

    def at_exit(self):
        """A job that trained but ended before its codec started says so, and how to change it."""
        if self._plan.current.sends != schedule.DENSE:
            return
        steps, start = self._plan.step + (1 if self._ahead else 0), _first_coded_step(self._plan)
        log.warn("mxnet_gc: the compression never started: the job's %d steps all pushed dense float32 gradients; "
                 "the codec (%s) starts at step %d, after the dense warm-up.  Train for more steps, or shorten the "
                 "warm-up with the compression parameter 'warmup_steps' (for example {'type': %r, 'warmup_steps': 10})"
                 % (steps, describe(self._compression), start, self._compression.type))
