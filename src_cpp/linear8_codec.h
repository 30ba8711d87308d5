// The '8bit' codec: linear quantization to the integers -127..127 times one scale per array (per
// segment of a message), with error feedback.  Its kernels and its description (codec.h) in one place.
//
//   a = residual + grad (a non-finite a is sent as 0 and its residual keeps its previous value);
//   s = max |a| / 127 (float32; 0 when every a is 0 or below ~9e-44);  q = rint(a / s), in -127..127
//   (0 when s is 0);
//   sent: q * s;  residual = a - q * s.
//
// Payload (float32 words, 1 + ceil(n / 4)): [s][n int8 codes, in memory order, zero bytes up to a whole
// word].  A decoder refuses a scale that is negative or not finite, the code -128 and nonzero padding.
// No parameters; the state is the residual, one value per gradient value.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "codec.h"

namespace mxgc {

struct Linear8Codec : ParameterlessCodec<Linear8Codec> {
  static constexpr const char* kName = "8bit";

  static int64_t payload_words(const Params&, int64_t n) { return 1 + (n + 3) / 4; }

  static bool finite(float v) { return std::isfinite(v); }

  // Returns the number of non-finite values of grad.
  static int64_t encode(const Params&, const float* grad, float* residual, float* payload, int64_t n) {
    float largest = 0.0f;
    int64_t nonfinite = 0;
#pragma omp parallel for reduction(max : largest) reduction(+ : nonfinite) \
    num_threads(n >= (1 << 18) ? num_threads() : 1) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float a = residual[i] + grad[i];
      nonfinite += !finite(grad[i]);
      if (finite(a)) largest = std::fmax(largest, std::fabs(a));
    }
    const float scale = largest / 127.0f;
    int8_t* codes = reinterpret_cast<int8_t*>(payload + 1);
    std::memset(payload, 0, payload_words(Params{}, n) * sizeof(float));
    payload[0] = scale;
    // scale 0 (every finite a is 0 or below ~9e-44, so largest / 127 rounds to 0): every code is 0, and
    // the residual is still a - 0, so that what cancelled to 0 is not sent again next step.
    const bool sends = scale > 0.0f;
#pragma omp parallel for num_threads(n >= (1 << 18) ? num_threads() : 1) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float a = residual[i] + grad[i];
      if (!finite(a)) continue;
      const float q = sends ? std::fmin(127.0f, std::fmax(-127.0f, std::rint(a / scale))) : 0.0f;
      codes[i] = static_cast<int8_t>(q);
      residual[i] = a - q * scale;
    }
    return nonfinite;
  }

  static bool decode(const Params&, const float* payload, const float* acc, float* out, int64_t n,
                     std::string* error) {
    const float scale = payload[0];
    const int8_t* codes = reinterpret_cast<const int8_t*>(payload + 1);
    if (!scale_ok(scale, error)) return false;
    for (int64_t i = 0; i < 4 * (payload_words(Params{}, n) - 1); ++i) {
      if (i < n ? codes[i] == -128 : codes[i] != 0) {
        *error = "8bit: byte " + std::to_string(i) + (i < n ? " is the code -128, never sent" : " of the padding is not 0");
        return false;
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(codes[i]) * scale;
      out[i] = acc ? acc[i] + v : v;
    }
    return true;
  }
};

}  // namespace mxgc
