"""DGC's momentum correction on what LGC sends dense: a velocity per key, pushed in place of its gradient.

With ``dense_momentum`` (and ``momentum`` m) each worker pushes u = m u + g for a dense key (the
tensors LGC leaves dense, and every tensor in the dense phase); the workers' sum is then SGD's momentum
of the summed gradient, as the coded tensors get from the ramp's codec and their accumulators.  The step
is the C++ kernels' one definition of DGC's momentum (src_cpp/dgc_momentum.h): where the new velocity is
not finite (a non-finite gradient value, which is counted, or an overflow) it keeps its value.  A coded
tensor's velocity is handed to the ramp's codec at the ramp's first step (``take``).  Checkpoints hold
every velocity by the name ``NAME + repr(key)``.
"""
import ctypes

import numpy as np

from .._library import load

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
        g = np.ascontiguousarray(g, np.float32)
        self.nonfinite[key] = load().mxgc_dgc_velocity(u.ctypes.data_as(ctypes.c_void_p), g.ctypes.data_as(ctypes.c_void_p),
                                                       ctypes.c_int64(g.size), ctypes.c_float(self.momentum))
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
            self.velocities[key] = np.array(saved, np.float32).reshape(-1) if saved is not None else np.zeros(size, np.float32)
        return self.velocities[key]
