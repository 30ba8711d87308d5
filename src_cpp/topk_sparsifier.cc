// Kernels of topk_sparsifier.h.  Two passes over the layer, parallel over blocks with OpenMP above
// kParallelMin values: (1) accumulate into the residual and count the values over the threshold per
// block; (2) write each block's selected (|a|, index) pairs at its prefix offset.  The exact k-th largest
// (first step, every reset_every steps: nth_element over the layer; an overflowing step: over its
// candidates) costs extra passes only then.
#include "topk_sparsifier.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "threshold_quantizer.h"  // num_threads()

namespace mxgc {

namespace {

constexpr int64_t kParallelMin = 65536;

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

inline bool selected(float a, float threshold) { return a != 0.0f && std::fabs(a) >= threshold; }

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
  std::vector<int64_t> counts(nt + 1, 0);

  // Pass 1: accumulate, and (with a known threshold) count per block what passes it.
  const float known = threshold[0];
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; ++t) {
    const int64_t end = std::min(n, (t + 1) * block);
    int64_t c = 0;
    for (int64_t i = t * block; i < end; ++i) {
      const float v = use_momentum ? p.momentum * velocity[i] + grad[i] : grad[i];
      const float a = residual[i] + v;
      if (std::isfinite(a)) {
        residual[i] = a;
        if (use_momentum) velocity[i] = v;
      }
      c += selected(residual[i], known);
    }
    counts[t + 1] = c;
  }
  if (exact) {
    threshold[0] = kth_largest_magnitude(residual, n, k);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; ++t) {
      const int64_t end = std::min(n, (t + 1) * block);
      int64_t c = 0;
      for (int64_t i = t * block; i < end; ++i) c += selected(residual[i], threshold[0]);
      counts[t + 1] = c;
    }
  }
  const float theta = threshold[0];

  // Pass 2: each block's selected (|a|, index) pairs at its offset, in index order.
  for (int t = 0; t < nt; ++t) counts[t + 1] += counts[t];
  const int64_t passed = counts[nt];
  std::vector<std::pair<float, int32_t>> candidates(passed);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; ++t) {
    const int64_t end = std::min(n, (t + 1) * block);
    int64_t o = counts[t];
    for (int64_t i = t * block; i < end; ++i)
      if (selected(residual[i], theta)) candidates[o++] = {std::fabs(residual[i]), static_cast<int32_t>(i)};
  }
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
