"""An independent numpy reference of DGC's momentum correction, as every kernel with momentum applies it.

For gradient g, velocity u and accumulator r: u' = m u + g (u' = g without momentum), r' = r + u'; where
r' is not finite (a non-finite g, or an overflow) u and r keep their values.  A velocity with no
accumulator of its own (LGC's dense pushes) is the case r = 0.
"""
import numpy as np


def step(g, u, r, momentum):
    """(u', r') for float32 arrays g, u, r (u ignored without momentum)."""
    g = np.asarray(g, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        next_u = (np.float32(momentum) * u + g).astype(np.float32) if momentum else g
        next_r = (r + next_u).astype(np.float32)
    taken = np.isfinite(next_r)
    return (np.where(taken, next_u, u).astype(np.float32) if momentum else u,
            np.where(taken, next_r, r).astype(np.float32))


def velocity_step(g, u, momentum):
    """u' of a velocity with no accumulator."""
    return step(g, u, np.zeros_like(u), momentum)[0]
