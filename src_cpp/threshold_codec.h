// The '2bit', '4bit' and '5bit' codecs' description (codec.h): the threshold quantizers of
// threshold_quantizer.h.  Parameters: the levels t_1 < ... < t_L (2bit: L = 1; 4bit: L <= 7; 5bit:
// L <= 15), then as many decision bounds (the levels: floor, MXNet's rule; the midpoints: nearest).  The state is the
// residual, one value per gradient value.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "codec.h"
#include "threshold_quantizer.h"

namespace mxgc {

template <int BITS>
struct ThresholdCodec {
  static constexpr const char* kName = BITS == 2 ? "2bit" : BITS == 4 ? "4bit" : "5bit";
  struct Params {
    std::vector<float> levels;
    std::vector<float> bounds;
  };

  // Positive, finite and strictly increasing (in float32, as the kernels use them).
  static bool increasing(const double* v, int count, const char* what, std::string* error) {
    for (int k = 0; k < count; ++k) {
      const float t = static_cast<float>(v[k]);
      if (!(t > 0.0f) || !std::isfinite(t) || (k > 0 && !(t > static_cast<float>(v[k - 1])))) {
        *error = std::string(kName) + ": " + what + " must be finite, positive and strictly increasing (" + what +
                 " " + std::to_string(k + 1) + " is " + str(t) + ")";
        return false;
      }
    }
    return true;
  }
  static bool parse(const double* v, int count, Params* p, std::string* error) {
    const int max_levels = BITS == 2 ? 1 : BITS == 4 ? kMaxLevels : kMaxLevels5, levels = count / 2;
    if (count % 2 || levels < 1 || levels > max_levels) {
      *error = std::string(kName) + ": needs 1 to " + std::to_string(max_levels) +
               " levels and one decision bound per level, got " + std::to_string(count) + " numbers";
      return false;
    }
    if (!increasing(v, levels, "levels", error) || !increasing(v + levels, levels, "bounds", error)) return false;
    p->levels.assign(v, v + levels);
    p->bounds.assign(v + levels, v + count);
    return true;
  }
  static bool check_size(const Params&, int64_t, std::string*) { return true; }
  // Every level the codec takes, 0.25 * 2^k, each with its bound halfway to the level below (or 0).
  static std::vector<double> example_params(int64_t) {
    const int levels = BITS == 2 ? 1 : BITS == 4 ? kMaxLevels : kMaxLevels5;
    std::vector<double> v(2 * levels);
    for (int k = 0; k < levels; ++k) {
      v[k] = 0.25 * std::ldexp(1.0, k);
      v[levels + k] = k == 0 ? v[0] / 2 : (v[k - 1] + v[k]) / 2;
    }
    return v;
  }
  static int64_t payload_words(const Params&, int64_t n) { return mxgc::payload_words(BITS, n); }
  static int64_t state_words(const Params&, int64_t n) { return n; }
  static int64_t encode(const Params& p, const float* grad, float* state, float* payload, int64_t n) {
    return mxgc::encode(BITS, grad, state, payload, n, p.levels.data(), p.bounds.data(), static_cast<int>(p.levels.size()));
  }
  static bool decode(const Params& p, const float* payload, const float* acc, float* out, int64_t n, std::string*) {
    mxgc::decode(BITS, payload, acc, out, n, p.levels.data(), static_cast<int>(p.levels.size()));
    return true;
  }
  static bool encode_sum(const Params& p, const float* sum, float* residual, float* payload, int64_t n,
                         std::string*) {
    encode(p, sum, residual, payload, n);
    return true;
  }
};

}  // namespace mxgc
