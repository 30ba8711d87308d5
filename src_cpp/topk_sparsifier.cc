// Kernels of topk_sparsifier.h.  One pass over the layer, parallel over blocks with OpenMP above
// kParallelMin values, in tiles: accumulate a tile into the residual while flagging each group of 16
// values that holds a candidate (vectorized), then collect the flagged groups' candidates while the
// tile is in cache.  The exact k-th largest (first step and every reset_every steps: nth_element over
// the layer, then a second pass; an overflowing step: over its candidates) costs extra work only then.
//
// Compiled once per x86-64 instruction-set level, like quantizer_kernels.cc (MXGC_ISA names the
// namespace; src_cpp/dispatch.cc picks the copy).  The vector code uses GCC's vector extensions at the
// level's native width, so that one source serves every level.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "dgc_momentum.h"
#include "threshold_quantizer.h"  // num_threads()
#include "topk_sparsifier.h"

namespace mxgc {
namespace MXGC_ISA {

namespace {

constexpr int64_t kParallelMin = 65536;
constexpr int64_t kTile = 4096;  // values accumulated, then scanned for candidates while in L1
constexpr int kGroup = 16;       // values flagged together: a candidate is rare, a group with one is not
#ifdef __AVX2__
constexpr int kWidth = 8;  // floats per vector (AVX-512 gains nothing here: the loop is memory-bound)
#else
constexpr int kWidth = 4;
#endif
typedef float FloatVec __attribute__((vector_size(4 * kWidth)));
typedef int32_t IntVec __attribute__((vector_size(4 * kWidth)));
constexpr int32_t kMagnitudeMask = 0x7fffffff;
constexpr int32_t kInfinityBits = 0x7f800000;  // |a| bits below this: finite

inline float bits_to_float(int32_t v) {
  float f;
  std::memcpy(&f, &v, sizeof f);
  return f;
}

inline int32_t float_to_bits(float f) {
  int32_t v;
  std::memcpy(&v, &f, sizeof v);
  return v;
}

template <typename V>
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename V>
inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

// A value is selected by threshold theta (> 0, or 0 when every nonzero value is) when it is nonzero
// and |a| >= theta.  Compared as IEEE bit patterns (monotonic for non-negative floats; the residual
// holds no NaN) against max(bits(theta), 1), which also excludes zeros: one signed integer compare
// that the scans below vectorize at every instruction-set level.
inline int32_t magnitude_bits(float a) { return float_to_bits(a) & kMagnitudeMask; }
inline int32_t selection_bound(float theta) { return std::max<int32_t>(magnitude_bits(theta), 1); }

// The k-th largest |a| over a[0..n) (k in 1..n).
float kth_largest_magnitude(const float* a, int64_t n, int64_t k) {
  std::vector<float> mag(a, a + n);
  for (float& m : mag) m = std::fabs(m);
  std::nth_element(mag.begin(), mag.begin() + (k - 1), mag.end(), std::greater<float>());
  return mag[k - 1];
}

int threads_for(int64_t n) { return n >= kParallelMin ? std::max(1, num_threads()) : 1; }

// A selected value, taken out of the state while its tile is in cache (put back if it is not sent).
struct Candidate {
  float value;
  int32_t index;
  float velocity;
};

// residual (and velocity) += kWidth values at i by DGC's step (dgc_momentum.h: a non-finite sum leaves
// both as they were); returns the lanes' flags (nonzero: the new residual passes bound).  Subtracts 1
// from the lane of ``bad`` of each non-finite gradient value.
template <bool kMomentum>
inline IntVec accumulate_vector(const float* grad, float* residual, float* velocity, float momentum, int64_t i,
                                int32_t bound, IntVec& bad) {
  const FloatVec g = load<FloatVec>(grad + i);
  FloatVec r = load<FloatVec>(residual + i), u = {};
  if (kMomentum) u = load<FloatVec>(velocity + i);
  bad += (load<IntVec>(grad + i) & kMagnitudeMask) >= kInfinityBits;
  dgc_step<kMomentum, FloatVec, IntVec>(g, u, r, momentum);
  store(residual + i, r);
  if (kMomentum) store(velocity + i, u);
  IntVec magnitude;
  std::memcpy(&magnitude, &r, sizeof magnitude);
  return (magnitude & kMagnitudeMask) >= bound;
}

// The same for one value (``bad`` counts up).
template <bool kMomentum>
inline bool accumulate_one(const float* grad, float* residual, float* velocity, float momentum, int64_t i,
                           int32_t bound, int64_t& bad) {
  bad += magnitude_bits(grad[i]) >= kInfinityBits;
  float u = kMomentum ? velocity[i] : 0.0f;
  dgc_step<kMomentum, float, int32_t>(grad[i], u, residual[i], momentum);
  if (kMomentum) velocity[i] = u;
  return magnitude_bits(residual[i]) >= bound;
}

inline bool any_lane(const IntVec& v) {
  int32_t any = 0;
  for (int j = 0; j < kWidth; ++j) any |= v[j];
  return any != 0;
}

// Sets flags[g] for each group of kGroup values of [begin, end) (the last may be shorter): whether
// any of its values passes, as vector_step(i) (kWidth lanes at i) and one_step(i) (one value) say.
template <typename VectorStep, typename OneStep>
void flag_groups(int64_t begin, int64_t end, bool* flags, VectorStep vector_step, OneStep one_step) {
  int64_t i = begin;
  for (; i + kGroup <= end; i += kGroup) {
    IntVec any = {};
    for (int j = 0; j < kGroup; j += kWidth) any |= vector_step(i + j);
    *flags++ = any_lane(any);
  }
  bool any = false;
  for (; i < end; ++i) any |= one_step(i);
  *flags = any;
}

// Accumulates [begin, end) into the residual, flagging the groups that hold a value passing bound;
// returns the number of non-finite gradient values there.
template <bool kMomentum>
int64_t accumulate(const float* grad, float* residual, float* velocity, float momentum, int64_t begin, int64_t end,
                   int32_t bound, bool* flags) {
  IntVec lanes = {};
  int64_t bad = 0;
  flag_groups(
      begin, end, flags,
      [&](int64_t i) { return accumulate_vector<kMomentum>(grad, residual, velocity, momentum, i, bound, lanes); },
      [&](int64_t i) { return accumulate_one<kMomentum>(grad, residual, velocity, momentum, i, bound, bad); });
  for (int j = 0; j < kWidth; ++j) bad -= lanes[j];
  return bad;
}

// The same flags for a residual already accumulated (the second pass of an exact step).
void flag_residual(const float* residual, int64_t begin, int64_t end, int32_t bound, bool* flags) {
  flag_groups(
      begin, end, flags,
      [&](int64_t i) { return (load<IntVec>(residual + i) & kMagnitudeMask) >= bound; },
      [&](int64_t i) { return magnitude_bits(residual[i]) >= bound; });
}

}  // namespace

int64_t topk_encode(const float* grad, float* state, int64_t n, const TopkParams& p, float* payload) {
  const bool use_momentum = p.momentum > 0.0f;
  float* residual = state;
  float* velocity = use_momentum ? state + n : nullptr;
  float* threshold = state + (use_momentum ? 2 * n : n);
  const int32_t steps = float_to_bits(threshold[1]);
  const int64_t k = topk_target(n, p.density);
  const bool exact = steps % p.reset_every == 0 || !(threshold[0] > 0.0f);
  const int nt = threads_for(n);
  const int64_t block = (n + nt - 1) / nt;
  std::vector<std::vector<Candidate>> found(nt);

  // Moves the values of the flagged groups of [begin, end) that pass bound into out, clearing them
  // from the residual (and v).
  auto collect = [&](int64_t begin, int64_t end, const bool* flags, int32_t bound, std::vector<Candidate>* out) {
    for (int64_t group = begin; group < end; group += kGroup, ++flags) {
      if (!*flags) continue;
      for (int64_t j = group; j < std::min(end, group + kGroup); ++j) {
        if (magnitude_bits(residual[j]) < bound) continue;
        out->push_back({residual[j], static_cast<int32_t>(j), use_momentum ? velocity[j] : 0.0f});
        residual[j] = 0.0f;
        if (use_momentum) velocity[j] = 0.0f;
      }
    }
  };
  // Visits [begin, end) tile by tile with flags for the tile's groups.
  auto tiles = [&](int64_t begin, int64_t end, auto&& visit) {
    bool flags[kTile / kGroup + 1];
    for (int64_t tile = begin; tile < end; tile += kTile) visit(tile, std::min(end, tile + kTile), flags);
  };

  // One pass: accumulate a tile that stays in cache, then collect its candidates from it.  On an exact
  // step the threshold is known only after the whole layer is accumulated: a second pass collects.
  const int32_t known = exact ? kMagnitudeMask : selection_bound(threshold[0]);
  int64_t nonfinite = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : nonfinite)
  for (int t = 0; t < nt; ++t) {
    tiles(t * block, std::min(n, (t + 1) * block), [&](int64_t begin, int64_t end, bool* flags) {
      if (use_momentum)
        nonfinite += accumulate<true>(grad, residual, velocity, p.momentum, begin, end, known, flags);
      else
        nonfinite += accumulate<false>(grad, residual, velocity, p.momentum, begin, end, known, flags);
      if (!exact) collect(begin, end, flags, known, &found[t]);
    });
  }
  if (exact) {
    threshold[0] = kth_largest_magnitude(residual, n, k);
    const int32_t bound = selection_bound(threshold[0]);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; ++t) {
      tiles(t * block, std::min(n, (t + 1) * block), [&](int64_t begin, int64_t end, bool* flags) {
        flag_residual(residual, begin, end, bound, flags);
        collect(begin, end, flags, bound, &found[t]);
      });
    }
  }
  const float theta = threshold[0];
  std::vector<Candidate> candidates;  // in index order: blocks in order, each in order
  for (auto& f : found) candidates.insert(candidates.end(), f.begin(), f.end());
  const int64_t passed = static_cast<int64_t>(candidates.size());
  float next = theta;
  if (passed > p.capacity) {
    // Keep the capacity largest |a| (ties to the lower index), in index order, and put the others back;
    // the k-th largest of those kept is this step's exact top-k threshold, and the next step's.
    std::vector<float> magnitude(passed);
    for (int64_t j = 0; j < passed; ++j) magnitude[j] = std::fabs(candidates[j].value);
    const auto top = magnitude.begin() + p.capacity;
    std::nth_element(magnitude.begin(), top - 1, magnitude.end(), std::greater<float>());
    const float cut = top[-1];
    std::nth_element(magnitude.begin(), magnitude.begin() + (k - 1), top, std::greater<float>());
    next = magnitude[k - 1];
    int64_t ties = p.capacity - std::count_if(magnitude.begin(), top, [cut](float m) { return m > cut; });
    int64_t kept = 0;
    for (const Candidate& c : candidates) {
      const float m = std::fabs(c.value);
      if (m > cut || (m == cut && ties-- > 0)) {
        candidates[kept++] = c;
      } else {
        residual[c.index] = c.value;
        if (use_momentum) velocity[c.index] = c.velocity;
      }
    }
    candidates.resize(kept);
  } else if (passed < (1.0 - p.delta) * k) {
    next = theta * (1.0f - p.gamma);
  }
  const int64_t c = static_cast<int64_t>(candidates.size());
  int32_t* words = reinterpret_cast<int32_t*>(payload);
  words[0] = static_cast<int32_t>(c);
  float* values = payload + 1 + c;
  for (int64_t j = 0; j < c; ++j) {
    words[1 + j] = candidates[j].index;
    values[j] = candidates[j].value;
  }
  std::memset(payload + 1 + 2 * c, 0, sizeof(float) * 2 * (p.capacity - c));
  threshold[0] = next;
  threshold[1] = bits_to_float(steps + 1);
  return nonfinite;
}

bool sparse_pack(const float* values, int64_t n, int64_t capacity, float* payload, std::string* error) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += values[i] != 0.0f;
  if (c > capacity) {
    *error = std::to_string(c) + " nonzero values do not fit a payload of capacity " + std::to_string(capacity);
    return false;
  }
  int32_t* words = reinterpret_cast<int32_t*>(payload);
  words[0] = static_cast<int32_t>(c);
  float* out = payload + 1 + c;
  for (int64_t i = 0, j = 0; i < n; ++i) {
    if (values[i] != 0.0f) {
      words[1 + j] = static_cast<int32_t>(i);
      out[j++] = values[i];
    }
  }
  std::memset(payload + 1 + 2 * c, 0, sizeof(float) * 2 * (capacity - c));
  return true;
}

bool topk_decode(const float* payload, int64_t capacity, const float* acc, float* out, int64_t n,
                 std::string* error) {
  const int32_t* words = reinterpret_cast<const int32_t*>(payload);
  const int64_t c = words[0];
  if (c < 0 || c > capacity || c > n) {
    *error = "payload count " + std::to_string(c) + " is outside 0.." + std::to_string(std::min(capacity, n));
    return false;
  }
  const int32_t* index = words + 1;
  for (int64_t j = 0; j < c; ++j) {
    if (index[j] < 0 || index[j] >= n || (j > 0 && index[j] <= index[j - 1])) {
      *error = "payload index " + std::to_string(index[j]) + " at position " + std::to_string(j) +
               " is out of range for " + std::to_string(n) + " values or not ascending";
      return false;
    }
  }
  if (acc == nullptr)
    std::memset(out, 0, sizeof(float) * n);
  else if (acc != out)
    std::memcpy(out, acc, sizeof(float) * n);
  const float* values = payload + 1 + c;
  for (int64_t j = 0; j < c; ++j) out[index[j]] += values[j];
  return true;
}

}  // namespace MXGC_ISA
}  // namespace mxgc
