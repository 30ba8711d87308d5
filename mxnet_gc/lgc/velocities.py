"""DGC's momentum correction on what LGC sends dense: a velocity per key, pushed in place of its gradient.

With ``dense_momentum`` (and ``momentum`` m) each worker pushes u = m u + g for a dense key (the
tensors LGC leaves dense, and every tensor in the dense phase); the workers' sum is then SGD's momentum
of the summed gradient, as the coded tensors get from the ramp's codec and their accumulators.  A
non-finite gradient value counts as 0 (and is counted).  A coded tensor's velocity is handed to the ramp's codec at the ramp's first
step (``take``).  Checkpoints hold every velocity by the name ``NAME + repr(key)``.
"""
import numpy as np

NAME = "lgc/velocity/"


class DenseVelocities:
    """The velocities of one worker's dense keys."""

    def __init__(self, momentum):
        self.momentum = np.float32(momentum)
        self.velocities = {}  # key -> float32 vector
        self.nonfinite = {}  # key -> its non-finite gradient values in the last ``step``
        self._saved = {}  # a checkpoint's velocities by name, each taken at its key's next use

    def step(self, key, g):
        """u = m u + g for ``key`` (``g``: its flat gradient, numpy); returns u (this object's, updated in
        place at the next step)."""
        u = self._of(key, g.size)
        finite = np.isfinite(g)
        u *= self.momentum
        u += np.where(finite, g, np.float32(0))
        self.nonfinite[key] = int(g.size - np.count_nonzero(finite))
        return u

    def take(self, key):
        """A key's velocity, given up (it goes on elsewhere: the ramp's codec), or None."""
        return self.velocities.pop(key, self._saved.pop(NAME + repr(key), None))

    def state(self):
        """name -> velocity, for a checkpoint."""
        return {NAME + repr(k): u for k, u in self.velocities.items()}

    def load(self, arrays):
        """A checkpoint's velocities (among its ``arrays``, by name), each taken at its key's next use."""
        self._saved = {n: a for n, a in arrays.items() if n.startswith(NAME)}

    def _of(self, key, size):
        if key not in self.velocities:
            saved = self._saved.pop(NAME + repr(key), None)
            self.velocities[key] = saved.reshape(-1).copy() if saved is not None else np.zeros(size, np.float32)
        return self.velocities[key]
