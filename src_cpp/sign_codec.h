// The 'sign' codec: each value's sign times one scale per array (per segment of a message), the mean of
// the absolute values, with error feedback (scaled signSGD with error feedback).  Its kernels and its
// description (codec.h) in one place.
//
//   a = residual + grad (where grad or a is not finite, the gradient value is dropped: a = residual);
//   s = mean |a| over the n values (summed in double, in order; float32);
//   sent: -s where a < 0, else s;  residual = a - sent.
//
// Payload (float32 words, 1 + ceil(n / 32)): [s][n sign bits, bit j of word w for value 32 w + j, 1 for
// -s; zero bits up to a whole word].  A decoder refuses a scale that is negative or not finite and
// nonzero padding.  No parameters; the state is the residual, one value per gradient value.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "codec.h"

namespace mxgc {

struct SignCodec : ParameterlessCodec<SignCodec> {
  static constexpr const char* kName = "sign";

  static int64_t payload_words(const Params&, int64_t n) { return 1 + (n + 31) / 32; }

  // residual + grad at i, the gradient value dropped where it or the sum is not finite.
  static float sum_at(const float* grad, const float* residual, int64_t i) {
    const float a = residual[i] + grad[i];
    return std::isfinite(grad[i]) && std::isfinite(a) ? a : residual[i];
  }

  // Returns the number of non-finite values of grad.
  static int64_t encode(const Params&, const float* grad, float* residual, float* payload, int64_t n) {
    double total = 0.0;  // (one thread, in order: the same scale wherever it runs)
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < n; ++i) {
      total += std::fabs(sum_at(grad, residual, i));
      nonfinite += !std::isfinite(grad[i]);
    }
    const float scale = static_cast<float>(total / static_cast<double>(n));
    const int64_t words = (n + 31) / 32;
    uint32_t* bits = reinterpret_cast<uint32_t*>(payload + 1);
    payload[0] = scale;
#pragma omp parallel for num_threads(n >= (1 << 18) ? num_threads() : 1) schedule(static)
    for (int64_t w = 0; w < words; ++w) {
      uint32_t word = 0;
      for (int64_t i = 32 * w; i < std::min<int64_t>(n, 32 * (w + 1)); ++i) {
        const float a = sum_at(grad, residual, i);
        const bool negative = a < 0.0f;
        word |= static_cast<uint32_t>(negative) << (i - 32 * w);
        residual[i] = a - (negative ? -scale : scale);
      }
      bits[w] = word;
    }
    return nonfinite;
  }

  static bool decode(const Params&, const float* payload, const float* acc, float* out, int64_t n,
                     std::string* error) {
    const float scale = payload[0];
    const uint32_t* bits = reinterpret_cast<const uint32_t*>(payload + 1);
    if (!scale_ok(scale, error)) return false;
    if (n % 32 && bits[n / 32] >> (n % 32)) {
      *error = "sign: the padding bits after value " + std::to_string(n) + " are not 0";
      return false;
    }
    for (int64_t i = 0; i < n; ++i) {
      const float v = (bits[i / 32] >> (i % 32)) & 1u ? -scale : scale;
      out[i] = acc ? acc[i] + v : v;
    }
    return true;
  }
};

}  // namespace mxgc
