// Kernel templates of the threshold quantizers (see threshold_quantizer.h for the algorithm).
//
// Included only by quantizer_kernels.cc, which is compiled once per instruction-set level: everything
// here lives in the namespace mxgc::MXGC_ISA so the copies built for different levels never mix.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

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
  using Group = typename std::conditional<BITS == 2, uint32_t, uint16_t>::type;  // one byte's codes
  static int64_t bytes(int64_t n) { return (n + kPerByte - 1) / kPerByte; }
  static int64_t words(int64_t n) { return (n + kPerWord - 1) / kPerWord; }

  // The dequantized value of a code, given the levels t[0..num_levels).  Codes that the encoder never
  // produces (2bit 0b01, 4bit 0b1000 and levels above num_levels) decode to +0.
  static inline float value(int c, const float* t, int num_levels) {
    if (BITS == 2) return c == 3 ? t[0] : (c == 2 ? -t[0] : 0.0f);
    int m = c & 7;
    if (m == 0 || m > num_levels) return 0.0f;
    return (c & 8) ? -t[m - 1] : t[m - 1];
  }
};

// GCC vector types as wide as one register of the instruction-set level this copy is built for.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX2__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif
typedef float VFloat __attribute__((vector_size(4 * kLanes)));
typedef int32_t VInt __attribute__((vector_size(4 * kLanes)));
typedef uint8_t VByte __attribute__((vector_size(kLanes)));

// t_m for each lane (0 where m = 0).  With AVX2 or AVX-512 the 8-entry table {0, t1, ..., t7} fits
// one register and the lookup is a single permute; otherwise (and for one level) a chain of selects.
template <int L>
inline VFloat level_value(const VInt& m, const VFloat& mag, const float* levels, const float* bounds,
                          const VFloat& table) {
#if defined(__AVX2__)
  if (L > 1) return __builtin_shuffle(table, m);
#endif
  VFloat q = VFloat{};
  for (int k = 0; k < L; ++k) q = mag >= bounds[k] ? levels[k] : q;
  return q;
}

// For each lane, m = the number of bounds <= mag.  With a register table (AVX2, AVX-512) and 7 levels,
// a three-step binary search (bounds padded with +inf); otherwise one comparison per bound.
template <int L>
inline VInt level_of(const VFloat& mag, const float* bounds, const VFloat& table) {
#if defined(__AVX2__)
  if (L == 7) {
    VInt m = (mag >= bounds[3]) & 4;
    m += (mag >= __builtin_shuffle(table, m + 2)) & 2;
    return m + ((mag >= __builtin_shuffle(table, m + 1)) & 1);
  }
#endif
  VInt m = VInt{};
  for (int k = 0; k < L; ++k) m -= (mag >= bounds[k]);  // a true lane compares as -1
  return m;
}

// Quantizes kLanes values: updates r in place, writes one code per value, and subtracts 1 from the
// lane of ``bad`` of each non-finite gradient value (NaN or inf: all exponent bits set).  Written with
// vector types because compilers do not find the register-table lookup on their own.
//   levels, bounds: the group's levels and decision bounds, padded with +inf to L;
//   values = {0, t1, ..., tL, 0, ...}, cuts = {0, d1, ..., dL, 0, ...}.
template <int BITS, int L>
inline void quantize_lanes(const float* g_in, float* r_io, uint8_t* codes, const float* levels,
                           const float* bounds, const VFloat& values, const VFloat& cuts, VInt& bad) {
  VFloat g, r;
  std::memcpy(&g, g_in, sizeof(g));
  std::memcpy(&r, r_io, sizeof(r));
  bad += (reinterpret_cast<VInt>(g) & 0x7fffffff) >= 0x7f800000;  // (true lanes are -1)
  const VFloat a = r + g;
  const VFloat mag = reinterpret_cast<VFloat>(reinterpret_cast<VInt>(a) & 0x7fffffff);
  VInt m = level_of<L>(mag, bounds, cuts);
  const VInt finite = mag <= std::numeric_limits<float>::max();  // false for inf and NaN
  m &= finite;
  const VFloat q = level_value<L>(m, mag, levels, bounds, values);
  const VInt negative = a < 0.0f;
  const VFloat signed_q = negative ? -q : q;
  const VFloat new_r = finite ? a - signed_q : r;
  std::memcpy(r_io, &new_r, sizeof(new_r));
  // 2bit (MXNet 1.9.1): +t -> 0b11, -t -> 0b10, zero -> 0b00.  4bit: sign << 3 | m.
  const VInt code = BITS == 2 ? ((m << 1) | (m & ~negative)) : (m | (negative & (m != 0) & 8));
  const VByte bytes = __builtin_convertvector(code, VByte);
  std::memcpy(codes, &bytes, sizeof(bytes));
}

// Quantizes elements [0, len) of one block: updates residual in place and writes ceil(len / kPerByte)
// packed bytes.  A non-finite sum (NaN or +-inf) is dropped: code 0, the residual keeps its old value.
// Returns the number of non-finite gradient values, counted in the same pass.
template <int BITS, int L>
inline int64_t encode_block(const float* __restrict__ grad, float* __restrict__ residual,
                         uint8_t* __restrict__ out, int64_t len, const float* levels, const float* bounds) {
  using Lay = Layout<BITS>;
  static_assert(L < kLanes || kLanes == 4, "the level table must fit one register");
  VFloat values = VFloat{}, cuts = VFloat{};
  for (int k = 0; k < L && k + 1 < kLanes; ++k) {
    values[k + 1] = levels[k];
    cuts[k + 1] = bounds[k];
  }
  alignas(64) uint8_t codes[kBlock];
  VInt bad = VInt{};
  const int64_t full = len - len % kLanes;
  for (int64_t i = 0; i < full; i += kLanes)
    quantize_lanes<BITS, L>(grad + i, residual + i, codes + i, levels, bounds, values, cuts, bad);
  if (full < len) {  // the last values, through a zero-padded copy
    float g[kLanes] = {}, r[kLanes] = {};
    std::memcpy(g, grad + full, (len - full) * sizeof(float));
    std::memcpy(r, residual + full, (len - full) * sizeof(float));
    quantize_lanes<BITS, L>(g, r, codes + full, levels, bounds, values, cuts, bad);
    std::memcpy(residual + full, r, (len - full) * sizeof(float));
  }
  // Pack: the kPerByte codes of one byte are read as one little-endian integer (a wide, contiguous
  // load that vectorizes) and their low BITS bits placed from the byte's top down.
  using Group = typename Lay::Group;
  const int64_t bytes = Lay::bytes(len);
  for (int64_t i = len; i < bytes * Lay::kPerByte; ++i) codes[i] = 0;  // odd tail: code 0
  for (int64_t b = 0; b < bytes; ++b) {
    Group w;
    std::memcpy(&w, codes + b * Lay::kPerByte, sizeof(w));
    unsigned byte = 0;
    for (int j = 0; j < Lay::kPerByte; ++j)
      byte |= ((w >> (8 * j)) & ((1u << BITS) - 1)) << (8 - BITS * (j + 1));
    out[b] = static_cast<uint8_t>(byte);
  }
  int64_t count = 0;
  for (int j = 0; j < kLanes; ++j) count -= bad[j];
  return count;
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
