// Kernels of topk_sparsifier.h.  One pass over the layer, parallel over blocks with OpenMP above
// kParallelMin values, in tiles: accumulate a tile into the residual (vectorized), then collect its
// (|a|, index) candidates while it is in cache.  The exact k-th largest (first step and every
// reset_every steps: nth_element over the layer, then a second pass; an overflowing step: over its
// candidates) costs extra work only then.
#include "topk_sparsifier.h"

#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "threshold_quantizer.h"  // num_threads()

namespace mxgc {

namespace {

constexpr int64_t kParallelMin = 65536;
constexpr int64_t kTile = 4096;  // values accumulated, then scanned for candidates while in L1

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

inline int64_t selected(float a, float threshold) { return (a != 0.0f) & (std::fabs(a) >= threshold); }

// The k-th largest |a| over a[0..n) (k in 1..n).
float kth_largest_magnitude(const float* a, int64_t n, int64_t k) {
  std::vector<float> mag(a, a + n);
  for (float& m : mag) m = std::fabs(m);
  std::nth_element(mag.begin(), mag.begin() + (k - 1), mag.end(), std::greater<float>());
  return mag[k - 1];
}

int threads_for(int64_t n) { return n >= kParallelMin ? std::max(1, num_threads()) : 1; }

}  // namespace

void topk_encode(const float* grad, float* state, int64_t n, const TopkParams& p, float* payload) {
  const bool use_momentum = p.momentum > 0.0f;
  float* residual = state;
  float* velocity = use_momentum ? state + n : nullptr;
  float* threshold = state + (use_momentum ? 2 * n : n);
  const int32_t steps = float_to_bits(threshold[1]);
  const int64_t k = std::min<int64_t>(n, std::max<int64_t>(1, std::llround(p.density * n)));
  const bool exact = steps % p.reset_every == 0 || !(threshold[0] > 0.0f);
  const int nt = threads_for(n);
  const int64_t block = (n + nt - 1) / nt;
  using Candidate = std::pair<float, int32_t>;  // (|a|, index)
  std::vector<std::vector<Candidate>> found(nt);

  // residual += grad (or the momentum-corrected gradient) over [begin, end); returns how many pass
  // `known`.  Branch-free (selects, not jumps) so that the compiler vectorizes it; fabs(a) <= FLT_MAX is
  // false for NaN and infinities, which are dropped.
  auto accumulate = [&](int64_t begin, int64_t end, float known) {
    int64_t c = 0;
    if (use_momentum) {
      for (int64_t i = begin; i < end; ++i) {
        const float v = p.momentum * velocity[i] + grad[i];
        const float a = residual[i] + v;
        const bool finite = std::fabs(a) <= FLT_MAX;
        velocity[i] = finite ? v : velocity[i];
        const float r = finite ? a : residual[i];
        residual[i] = r;
        c += selected(r, known);
      }
    } else {
      for (int64_t i = begin; i < end; ++i) {
        const float a = residual[i] + grad[i];
        const float r = std::fabs(a) <= FLT_MAX ? a : residual[i];
        residual[i] = r;
        c += selected(r, known);
      }
    }
    return c;
  };
  // Candidates are rare (about density n): look at 16 values at a time with a branch-free test, and
  // only at the values of a group that has one.
  auto collect = [&](int64_t begin, int64_t end, float theta, std::vector<Candidate>* out) {
    int64_t i = begin;
    for (; i + 16 <= end; i += 16) {
      int64_t any = 0;
      for (int j = 0; j < 16; ++j) any |= selected(residual[i + j], theta);
      if (!any) continue;
      for (int64_t j = i; j < i + 16; ++j)
        if (selected(residual[j], theta)) out->push_back({std::fabs(residual[j]), static_cast<int32_t>(j)});
    }
    for (; i < end; ++i)
      if (selected(residual[i], theta)) out->push_back({std::fabs(residual[i]), static_cast<int32_t>(i)});
  };

  // One pass: accumulate a tile that stays in cache, then collect its candidates from it.  On an exact
  // step the threshold is known only after the whole layer is accumulated: a second pass collects.
  const float known = threshold[0];
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; ++t) {
    const int64_t end = std::min(n, (t + 1) * block);
    for (int64_t tile = t * block; tile < end; tile += kTile) {
      const int64_t tile_end = std::min(end, tile + kTile);
      if (accumulate(tile, tile_end, known) && !exact) collect(tile, tile_end, known, &found[t]);
    }
  }
  if (exact) {
    threshold[0] = kth_largest_magnitude(residual, n, k);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; ++t) collect(t * block, std::min(n, (t + 1) * block), threshold[0], &found[t]);
  }
  const float theta = threshold[0];
  std::vector<Candidate> candidates;  // in index order: blocks in order, each in order
  for (auto& f : found) candidates.insert(candidates.end(), f.begin(), f.end());
  const int64_t passed = static_cast<int64_t>(candidates.size());
  float next = theta;
  if (passed > p.capacity) {
    // Keep the capacity largest |a| (ties to the lower index); the k-th largest of them is this step's
    // exact top-k threshold, and the next step's threshold.
    auto larger = [](const std::pair<float, int32_t>& x, const std::pair<float, int32_t>& y) {
      return x.first > y.first || (x.first == y.first && x.second < y.second);
    };
    std::nth_element(candidates.begin(), candidates.begin() + (p.capacity - 1), candidates.end(), larger);
    candidates.resize(p.capacity);
    std::nth_element(candidates.begin(), candidates.begin() + (k - 1), candidates.end(), larger);
    next = candidates[k - 1].first;
    std::sort(candidates.begin(), candidates.end(),
              [](const std::pair<float, int32_t>& x, const std::pair<float, int32_t>& y) { return x.second < y.second; });
  } else if (passed < (1.0 - p.delta) * k) {
    next = theta * (1.0f - p.gamma);
  }
  const int64_t c = static_cast<int64_t>(candidates.size());
  int32_t* words = reinterpret_cast<int32_t*>(payload);
  words[0] = static_cast<int32_t>(c);
  float* values = payload + 1 + c;
  for (int64_t j = 0; j < c; ++j) {
    const int32_t i = candidates[j].second;
    words[1 + j] = i;
    values[j] = residual[i];
    residual[i] = 0.0f;
    if (use_momentum) velocity[i] = 0.0f;
  }
  std::memset(payload + 1 + 2 * c, 0, sizeof(float) * 2 * (p.capacity - c));
  threshold[0] = next;
  threshold[1] = bits_to_float(steps + 1);
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

}  // namespace mxgc
