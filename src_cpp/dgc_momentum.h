// DGC's momentum correction, defined once for every kernel that accumulates a gradient with momentum:
// the top-k sparsifier's residual (topk_sparsifier.cc), LGC's accumulators and the velocities LGC pushes
// dense (lgc_select.cc).
//
// For one value with gradient g, velocity u and accumulator r (a residual):
//     u' = m u + g,   r' = r + u'        (without momentum: u' = g)
// in two roundings (the sources are built with -ffp-contract=off: numpy's arithmetic).  Where r' is not
// finite (a non-finite g, or an overflow) u and r keep their values: one bad value must not poison the
// state that later steps send.  A velocity with no accumulator of its own is the case r = 0.
//
// F is float or a GCC vector of floats and I the integers of the same width (int32_t, or a vector):
// the test is on the IEEE bits, so that it vectorizes at every instruction-set level.
#ifndef MXGC_DGC_MOMENTUM_H_
#define MXGC_DGC_MOMENTUM_H_

#include <cstdint>
#include <cstring>

namespace mxgc {

// One step of u and r at a value (or a vector's lanes); returns where it was taken (nonzero: r' finite).
template <bool kMomentum, typename F, typename I>
inline I dgc_step(const F& g, F& u, F& r, float momentum) {
  F next_u = g;
  if (kMomentum) next_u = momentum * u + g;
  const F next_r = r + next_u;
  I bits;
  std::memcpy(&bits, &next_r, sizeof bits);
  const I taken = (bits & 0x7fffffff) < 0x7f800000;
  r = taken ? next_r : r;
  if (kMomentum) u = taken ? next_u : u;
  return taken;
}

}  // namespace mxgc

#endif  // MXGC_DGC_MOMENTUM_H_
