// Kernel templates of the threshold quantizers (see threshold_quantizer.h for the algorithm).
//
// Included only by quantizer_kernels.cc, which is compiled once per instruction-set level: everything
// here lives in the namespace mxgc::MXGC_ISA so the copies built for different levels never mix.
#pragma once

#include <algorithm>
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
  static_assert(BITS == 2 || BITS == 4 || BITS == 5, "2, 4 or 5 bits per value");
  // The codes of kGroup values fill kGroupBytes whole bytes: 2bit 4 in 1, 4bit 2 in 1, 5bit 8 in 5.
  static constexpr int kGroup = BITS == 5 ? 8 : 8 / BITS;
  static constexpr int kGroupBytes = BITS == 5 ? 5 : 1;
  static constexpr int kSign = 1 << (BITS - 1);  // the sign bit of a 4bit or 5bit code
  static int64_t bytes(int64_t n) { return (n * BITS + 7) / 8; }  // (a last 5bit group may be cut short)
  static int64_t words(int64_t n) { return (n * BITS + 31) / 32; }

  // The dequantized value of a code, given the levels t[0..num_levels).  Codes that the encoder never
  // produces (2bit 0b01, a negative zero, and levels above num_levels) decode to +0.
  static inline float value(int c, const float* t, int num_levels) {
    if (BITS == 2) return c == 3 ? t[0] : (c == 2 ? -t[0] : 0.0f);
    int m = c & (kSign - 1);
    if (m == 0 || m > num_levels) return 0.0f;
    return (c & kSign) ? -t[m - 1] : t[m - 1];
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

// A table {0, x1, ..., x15} of floats in registers: all of it in ``lo`` with 16 lanes (AVX-512), in ``lo``
// and ``hi`` with 8 (AVX2); 4bit's 8 entries are in ``lo`` from 8 lanes on.
struct Table {
  VFloat lo = VFloat{}, hi = VFloat{};
  Table(const float* x, int count) {  // x1 .. x_count
    for (int k = 0; k < count && k + 1 < 2 * kLanes; ++k) (k + 1 < kLanes ? lo[k + 1] : hi[k + 1 - kLanes]) = x[k];
  }
};

// For each lane, table entry i (i <= L): one permute of a register (L < kLanes) or of two (AVX2, 5bit).
template <int L>
inline VFloat lookup(const Table& t, const VInt& i) {
  if constexpr (L < kLanes) {
    return __builtin_shuffle(t.lo, i);
  } else {
    return __builtin_shuffle(t.lo, t.hi, i);
  }
}

// Whether this copy looks levels up in registers: AVX2 or AVX-512, more than one level, and a table of
// at most two registers.
template <int L>
constexpr bool kRegisterTable =
#if defined(__AVX2__)
    L > 1 && L < 2 * kLanes;
#else
    false;
#endif

// t_m for each lane (0 where m = 0): a register lookup, or (baseline, one level) a chain of selects.
template <int L>
inline VFloat level_value(const VInt& m, const VFloat& mag, const float* levels, const float* bounds,
                          const Table& values) {
  if constexpr (kRegisterTable<L>) {
    return lookup<L>(values, m);
  } else {
    VFloat q = VFloat{};
    for (int k = 0; k < L; ++k) q = mag >= bounds[k] ? levels[k] : q;
    return q;
  }
}

// For each lane, m = the number of bounds <= mag.  With register tables and 7 or 15 levels a binary
// search of 3 or 4 steps (bounds padded with +inf); otherwise one comparison per bound.
template <int L>
inline VInt level_of(const VFloat& mag, const float* bounds, const Table& cuts) {
  if constexpr (kRegisterTable<L> && (L == 7 || L == 15)) {
    constexpr int half = (L + 1) / 2;  // 4 or 8
    VInt m = (mag >= bounds[half - 1]) & half;
    for (int step = half / 2; step >= 1; step /= 2) m += (mag >= lookup<L>(cuts, m + step)) & step;
    return m;
  } else {
    VInt m = VInt{};
    for (int k = 0; k < L; ++k) m -= (mag >= bounds[k]);  // a true lane compares as -1
    return m;
  }
}

// Quantizes kLanes values: updates r in place, writes one code per value, and subtracts 1 from the
// lane of ``bad`` of each non-finite gradient value (NaN or inf: all exponent bits set).  Written with
// vector types because compilers do not find the register-table lookup on their own.
//   levels, bounds: the group's levels and decision bounds, padded with +inf to L;
//   values = {0, t1, ..., tL}, cuts = {0, d1, ..., dL} as register tables.
template <int BITS, int L>
inline void quantize_lanes(const float* g_in, float* r_io, uint8_t* codes, const float* levels,
                           const float* bounds, const Table& values, const Table& cuts, VInt& bad) {
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
  // 2bit (MXNet 1.9.1): +t -> 0b11, -t -> 0b10, zero -> 0b00.  4bit: sign << 3 | m; 5bit: sign << 4 | m.
  const VInt code = BITS == 2 ? ((m << 1) | (m & ~negative)) : (m | (negative & (m != 0) & Layout<BITS>::kSign));
  const VByte bytes = __builtin_convertvector(code, VByte);
  std::memcpy(codes, &bytes, sizeof(bytes));
}

// Quantizes elements [0, len) of one block: updates residual in place and writes Layout<BITS>::bytes(len)
// packed bytes.  A non-finite sum (NaN or +-inf) is dropped: code 0, the residual keeps its old value.
// Returns the number of non-finite gradient values, counted in the same pass.
template <int BITS, int L>
inline int64_t encode_block(const float* __restrict__ grad, float* __restrict__ residual,
                         uint8_t* __restrict__ out, int64_t len, const float* levels, const float* bounds) {
  using Lay = Layout<BITS>;
  const Table values(levels, L), cuts(bounds, L);
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
  const int64_t groups = (len + Lay::kGroup - 1) / Lay::kGroup;
  for (int64_t i = len; i < groups * Lay::kGroup; ++i) codes[i] = 0;  // odd tail: code 0
  if constexpr (BITS == 5) {
    // Pack: a group's 8 codes into the low 40 bits of an integer, the first code highest, then its
    // 5 bytes from the top down (the last group only the bytes its values reach).
    for (int64_t b = 0; b < groups; ++b) {
      uint64_t bits = 0;
      for (int j = 0; j < 8; ++j) bits = bits << 5 | codes[b * 8 + j];
      const int64_t used = std::min<int64_t>(5, Lay::bytes(len) - b * 5);
      for (int j = 0; j < used; ++j) out[b * 5 + j] = static_cast<uint8_t>(bits >> (8 * (4 - j)));
    }
  } else {
    // Pack: the kGroup codes of one byte are read as one little-endian integer (a wide, contiguous
    // load that vectorizes) and their low BITS bits placed from the byte's top down.
    using Group = typename std::conditional<BITS == 2, uint32_t, uint16_t>::type;
    for (int64_t b = 0; b < groups; ++b) {
      Group w;
      std::memcpy(&w, codes + b * Lay::kGroup, sizeof(w));
      unsigned byte = 0;
      for (int j = 0; j < Lay::kGroup; ++j)
        byte |= ((w >> (8 * j)) & ((1u << BITS) - 1)) << (8 - BITS * (j + 1));
      out[b] = static_cast<uint8_t>(byte);
    }
  }
  int64_t count = 0;
  for (int j = 0; j < kLanes; ++j) count -= bad[j];
  return count;
}

// The values of codes: for 2bit and 4bit, the kGroup values of every possible payload byte; for
// 5bit, the value of each of the 32 codes.
template <int BITS>
struct ByteTable {
  static constexpr int kRows = BITS == 5 ? 32 : 256, kCols = BITS == 5 ? 1 : Layout<BITS>::kGroup;
  float v[kRows][kCols];
  ByteTable(const float* levels, int num_levels) {
    for (int row = 0; row < kRows; ++row)
      for (int j = 0; j < kCols; ++j) {
        const int c = BITS == 5 ? row : (row >> (8 - BITS * (j + 1))) & ((1 << BITS) - 1);
        v[row][j] = Layout<BITS>::value(c, levels, num_levels);
      }
  }
};

// out[i] = value(code i) (ADD = false) or out[i] = acc[i] + value(code i) (ADD = true), i in [0, len).
// out may be acc (in-place accumulation).
template <int BITS, bool ADD>
inline void decode_block(const uint8_t* __restrict__ in, const float* acc, float* out, int64_t len,
                         const ByteTable<BITS>& table) {
  constexpr int P = Layout<BITS>::kGroup;
  auto group_values = [&](int64_t b, float* v) {  // the P values of group b
    if constexpr (BITS == 5) {
      const int64_t used = std::min<int64_t>(5, Layout<5>::bytes(len) - b * 5);  // (a last group cut short)
      uint64_t bits = 0;
      for (int j = 0; j < 5; ++j) bits = bits << 8 | (j < used ? in[b * 5 + j] : 0);
      for (int j = 0; j < 8; ++j) v[j] = table.v[(bits >> (5 * (7 - j))) & 31][0];
    } else {
      std::memcpy(v, table.v[in[b]], P * sizeof(float));
    }
  };
  const int64_t full = len / P;
  float v[P];
  for (int64_t b = 0; b < full; ++b) {
    group_values(b, v);
    for (int j = 0; j < P; ++j) {
      const int64_t i = b * P + j;
      out[i] = ADD ? acc[i] + v[j] : v[j];
    }
  }
  if (full * P < len) {
    group_values(full, v);
    for (int64_t i = full * P, j = 0; i < len; ++i, ++j) out[i] = ADD ? acc[i] + v[j] : v[j];
  }
}

}  // namespace MXGC_ISA
}  // namespace mxgc
