// Threshold quantizers with error feedback: the kernels behind the '2bit', '4bit' and '5bit' codecs.
//
// The codecs are one algorithm with a different code width (see docs/wire_format.md):
//   a = residual + grad;  m = number of decision bounds d_k with |a| >= d_k;  q = sign(a) * t_m;
//   residual = a - q;     emit the code of (m, sign).
// The bounds are the levels (d_k = t_k: floor, MXNet's 2bit) or the midpoints between them
// (d_k = (t_{k-1} + t_k) / 2, t_0 = 0: nearest); the codec chooses them, the decoder needs only t.
// The codes are one bit stream, each code's most significant bit first, bytes in memory order (2bit:
// 4 codes a byte, 4bit: 2, 5bit: 8 codes in 5 bytes), padded with zero bits to whole float32 words.
//
// This header has no MXNet dependency; src_cpp/mxnet_ops.cc wraps it as MXNet operators.
// The kernels are in quantizer_kernels.{h,cc}, the CPU dispatch in dispatch.cc.
#pragma once

#include <cstdint>

namespace mxgc {

constexpr int kMaxLevels = 7;    // 4bit: levels per sign
constexpr int kMaxLevels5 = 15;  // 5bit

// Float32 payload words for n values of a BITS-bit codec: n * bits bits rounded up to words (16
// values a word for 2bit, 8 for 4bit, 32 in 5 words for 5bit).
inline int64_t payload_words(int bits, int64_t n) { return (n * bits + 31) / 32; }

// Number of threads the kernels use; set from Python through mxgc_set_num_threads.
int num_threads();

// Whole-array entry points (bits = 2, 4 or 5), parallel over blocks, on the best kernels for this CPU.
// encode: n values; updates residual in place; writes payload_words(bits, n) words, padding zeroed;
//   returns the number of non-finite (NaN, inf) values of grad, counted in the same pass.
// decode: out = values (acc == nullptr) or out = acc + values; out may be acc.
int64_t encode(int bits, const float* grad, float* residual, void* payload, int64_t n, const float* levels,
               const float* bounds, int num_levels);
void decode(int bits, const void* payload, const float* acc, float* out, int64_t n, const float* levels,
            int num_levels);

}  // namespace mxgc
