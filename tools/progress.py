"""The "run k of N, elapsed, ETA" line that the studies and benchmarks print as each run ends."""
import time


def minutes(seconds):
    return "%dm%02ds" % divmod(int(round(seconds)), 60) if seconds < 3600 else "%dh%02dm" % divmod(int(seconds // 60), 60)


class Progress:
    """Counts finished runs out of ``total``; the ETA assumes the remaining runs take the mean so far."""

    def __init__(self, total, clock=time.monotonic):
        self.total, self.done, self._clock = total, 0, clock
        self._start = clock()

    def step(self, what):
        """Marks one run finished; returns its line: ``[run k of N, elapsed E, ETA T] what``."""
        self.done += 1
        elapsed = self._clock() - self._start
        eta = elapsed / self.done * (self.total - self.done)
        return "[run %d of %d, elapsed %s, ETA %s] %s" % (self.done, self.total, minutes(elapsed), minutes(eta), what)
