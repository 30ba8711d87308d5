// The 'layerwise_topk' codec's description (codec.h): the sparsifier of topk_sparsifier.h.
// Parameters: density, momentum, gamma, delta, reset_every, capacity.  The state is flat
// (topk_state_words); a compressed pull packs the servers' sum without loss (the residual untouched).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "codec.h"
#include "topk_sparsifier.h"

namespace mxgc {

struct TopkCodec {
  static constexpr const char* kName = "topk";
  using Params = TopkParams;

  static bool parse(const double* v, int count, Params* p, std::string* error) {
    if (count != 6) {
      *error = "topk: needs 6 parameters (density, momentum, gamma, delta, reset_every, capacity), got " +
               std::to_string(count);
      return false;
    }
    const double density = v[0], momentum = v[1], gamma = v[2], delta = v[3], reset_every = v[4], capacity = v[5];
    if (!(capacity >= 1) || capacity != std::floor(capacity) || capacity > 2147483647.0) {
      *error = "topk: capacity must be an integer >= 1, got " + str(capacity);
      return false;
    }
    if (!(density > 0 && density <= 1) || !(momentum >= 0 && momentum < 1) || !(gamma > 0 && gamma < 1) ||
        !(delta >= 0 && delta < 1) || !(reset_every >= 1 && reset_every <= 2147483647.0)) {
      *error = "topk: needs 0 < density <= 1, 0 <= momentum < 1, 0 < gamma < 1, 0 <= delta < 1 and reset_every >= 1";
      return false;
    }
    *p = Params{density, static_cast<float>(momentum), static_cast<float>(gamma), static_cast<float>(delta),
                static_cast<int>(reset_every), static_cast<int64_t>(capacity)};
    return true;
  }
  // Density 0.1 with momentum, and room for twice its target (at most n).
  static std::vector<double> example_params(int64_t n) {
    const int64_t capacity = std::min<int64_t>(n, std::max<int64_t>(1, 2 * topk_target(n, 0.1)));
    return {0.1, 0.9, 0.1, 0.2, 3, static_cast<double>(capacity)};
  }
  // Room in a payload for the k values a step aims at.
  static bool check_size(const Params& p, int64_t n, std::string* error) {
    if (p.capacity >= topk_target(n, p.density)) return true;
    *error = "topk: capacity " + std::to_string(p.capacity) + " is below the " +
             std::to_string(topk_target(n, p.density)) + " values density " + str(p.density) +
             " aims to send of " + std::to_string(n) + " (capacity below its target)";
    return false;
  }
  static int64_t payload_words(const Params& p, int64_t) { return topk_payload_words(p.capacity); }
  static int64_t state_words(const Params& p, int64_t n) { return topk_state_words(n, p.momentum > 0); }
  static int64_t encode(const Params& p, const float* grad, float* state, float* payload, int64_t n) {
    return topk_encode(grad, state, n, p, payload);
  }
  static bool decode(const Params& p, const float* payload, const float* acc, float* out, int64_t n,
                     std::string* error) {
    return topk_decode(payload, p.capacity, acc, out, n, error);
  }
  static bool encode_sum(const Params& p, const float* sum, float*, float* payload, int64_t n, std::string* error) {
    return sparse_pack(sum, n, p.capacity, payload, error);
  }
};

}  // namespace mxgc
