// Threshold quantizers with error feedback: the kernels behind the '2bit' and '4bit' codecs.
//
// Both codecs are one algorithm with a different code width (see docs/wire_format.md):
//   a = residual + grad;  m = number of decision bounds d_k with |a| >= d_k;  q = sign(a) * t_m;
//   residual = a - q;     emit the code of (m, sign).
// The bounds are the levels (d_k = t_k: floor, MXNet's 2bit) or the midpoints between them
// (d_k = (t_{k-1} + t_k) / 2, t_0 = 0: nearest); the codec chooses them, the decoder needs only t.
// Codes are packed from the high bits of each byte towards the low bits, bytes in memory order,
// so the payload is ceil(n * BITS / 8) bytes, padded with zero bytes to whole float32 words.
//
// This header has no MXNet dependency; src_cpp/mxnet_ops.cc wraps it as MXNet operators.
// The kernels are in quantizer_kernels.{h,cc}, the CPU dispatch in dispatch.cc.
#pragma once

#include <cstdint>

namespace mxgc {

constexpr int kMaxLevels = 7;

// Float32 payload words for n values of a BITS-bit codec (16 values a word for 2bit, 8 for 4bit).
inline int64_t payload_words(int bits, int64_t n) {
  const int64_t per_word = 32 / bits;
  return (n + per_word - 1) / per_word;
}

// Number of threads the kernels use; set from Python through mxgc_set_num_threads.
int num_threads();

// Whole-array entry points (bits = 2 or 4), parallel over blocks, on the best kernels for this CPU.
// encode: n values; updates residual in place; writes payload_words(bits, n) words, padding zeroed;
//   returns the number of non-finite (NaN, inf) values of grad, counted in the same pass.
// decode: out = values (acc == nullptr) or out = acc + values; out may be acc.
int64_t encode(int bits, const float* grad, float* residual, void* payload, int64_t n, const float* levels,
               const float* bounds, int num_levels);
void decode(int bits, const void* payload, const float* acc, float* out, int64_t n, const float* levels,
            int num_levels);

}  // namespace mxgc
