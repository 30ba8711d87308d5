// Kernel templates of the threshold quantizers (see threshold_quantizer.h for the algorithm).
//
// Included only by quantizer_kernels.cc, which is compiled once per instruction-set level: everything
// here lives in the namespace mxgc::MXGC_ISA so the copies built for different levels never mix.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "threshold_quantizer.h"

namespace mxgc {
namespace MXGC_ISA {

// Elements handled by one task: a multiple of every codec's values-per-word, small enough that
// the codes of one block stay in L1 between the quantize and the pack loops.
constexpr int64_t kBlock = 4096;

template <int BITS>
struct Layout {
  static_assert(BITS == 2 || BITS == 4, "2 or 4 bits per value");
  static constexpr int kPerByte = 8 / BITS;
  static constexpr int kPerWord = 4 * kPerByte;  // values in one float32 payload word
  static int64_t bytes(int64_t n) { return (n + kPerByte - 1) / kPerByte; }
  static int64_t words(int64_t n) { return (n + kPerWord - 1) / kPerWord; }

  // The code of level m (0 = zero) for a value of the given sign.
  // 2bit (MXNet 1.9.1): +t -> 0b11, -t -> 0b10, zero -> 0b00.  4bit: sign << 3 | m.
  // Branch-free, so the encode loop vectorizes.
  static inline uint8_t code(int m, bool negative) {
    const int neg = negative;
    if (BITS == 2) return static_cast<uint8_t>((m << 1) | (m & (neg ^ 1)));
    return static_cast<uint8_t>(m | ((neg & (m != 0)) << 3));
  }

  // The dequantized value of a code, given the levels t[0..num_levels).  Codes that the encoder never
  // produces (2bit 0b01, 4bit 0b1000 and levels above num_levels) decode to +0.
  static inline float value(int c, const float* t, int num_levels) {
    if (BITS == 2) return c == 3 ? t[0] : (c == 2 ? -t[0] : 0.0f);
    int m = c & 7;
    if (m == 0 || m > num_levels) return 0.0f;
    return (c & 8) ? -t[m - 1] : t[m - 1];
  }
};

// Quantizes elements [0, len) of one block: updates residual in place and writes ceil(len / kPerByte)
// packed bytes.  Levels beyond the group's own are +inf, so one loop serves every group size.
// A non-finite sum (NaN or +-inf) is dropped: code 0 and the residual keeps its old value.
template <int BITS, int L>
inline void encode_block(const float* __restrict__ grad, float* __restrict__ residual,
                         uint8_t* __restrict__ out, int64_t len, const float* levels) {
  using Lay = Layout<BITS>;
  float t[L];
  for (int k = 0; k < L; ++k) t[k] = levels[k];
  alignas(64) uint8_t codes[kBlock];
  for (int64_t i = 0; i < len; ++i) {
    const float r = residual[i];
    const float a = r + grad[i];
    const float mag = std::fabs(a);
    const bool finite = mag <= std::numeric_limits<float>::max();
    int m = 0;
    float q = 0.0f;
    for (int k = 0; k < L; ++k) {
      const bool ge = mag >= t[k];
      m += ge;
      q = ge ? t[k] : q;
    }
    const bool negative = a < 0.0f;
    m &= -static_cast<int>(finite);
    const float sq = negative ? -q : q;
    residual[i] = finite ? a - sq : r;
    codes[i] = Lay::code(m, negative);
  }
  const int64_t full = len / Lay::kPerByte;
  for (int64_t b = 0; b < full; ++b) {
    const uint8_t* c = codes + b * Lay::kPerByte;
    uint8_t byte = 0;
    for (int j = 0; j < Lay::kPerByte; ++j) byte |= static_cast<uint8_t>(c[j] << (8 - BITS * (j + 1)));
    out[b] = byte;
  }
  if (full * Lay::kPerByte < len) {  // odd tail, padded with code 0
    uint8_t byte = 0;
    for (int64_t i = full * Lay::kPerByte, j = 0; i < len; ++i, ++j)
      byte |= static_cast<uint8_t>(codes[i] << (8 - BITS * (j + 1)));
    out[full] = byte;
  }
}

// For every possible payload byte, the kPerByte values it decodes to.
template <int BITS>
struct ByteTable {
  float v[256][Layout<BITS>::kPerByte];
  ByteTable(const float* levels, int num_levels) {
    constexpr int P = Layout<BITS>::kPerByte;
    for (int byte = 0; byte < 256; ++byte)
      for (int j = 0; j < P; ++j) {
        const int c = (byte >> (8 - BITS * (j + 1))) & ((1 << BITS) - 1);
        v[byte][j] = Layout<BITS>::value(c, levels, num_levels);
      }
  }
};

// out[i] = value(code i) (ADD = false) or out[i] = acc[i] + value(code i) (ADD = true), i in [0, len).
// out may be acc (in-place accumulation).
template <int BITS, bool ADD>
inline void decode_block(const uint8_t* __restrict__ in, const float* acc, float* out, int64_t len,
                         const ByteTable<BITS>& table) {
  constexpr int P = Layout<BITS>::kPerByte;
  const int64_t full = len / P;
  for (int64_t b = 0; b < full; ++b) {
    const float* v = table.v[in[b]];
    for (int j = 0; j < P; ++j) {
      const int64_t i = b * P + j;
      out[i] = ADD ? acc[i] + v[j] : v[j];
    }
  }
  for (int64_t i = full * P, j = 0; i < len; ++i, ++j) {
    const float v = table.v[in[full]][j];
    out[i] = ADD ? acc[i] + v : v;
  }
}

}  // namespace MXGC_ISA
}  // namespace mxgc
