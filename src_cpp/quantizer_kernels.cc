// Whole-array encode and decode, parallel over blocks with OpenMP.
//
// This file is compiled once per x86-64 instruction-set level (MXGC_ISA = baseline, v3 (AVX2), v4
// (AVX-512)); src_cpp/dispatch.cc picks the best one the CPU supports when the library loads.
#include <algorithm>

#include "quantizer_kernels.h"

namespace mxgc {
namespace MXGC_ISA {

namespace {

// Arrays below this many values run on one thread: waking a team costs more than it saves.
constexpr int64_t kParallelMin = 1 << 16;

int threads_for(int64_t n) { return n >= kParallelMin ? num_threads() : 1; }

template <int BITS, int L>
int64_t encode_all(const float* grad, float* residual, uint8_t* out, int64_t n, const float* levels,
                   const float* bounds) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  constexpr int64_t kBlockBytes = kBlock / Layout<BITS>::kGroup * Layout<BITS>::kGroupBytes;
  int64_t nonfinite = 0;
#pragma omp parallel for schedule(static) num_threads(threads_for(n)) reduction(+ : nonfinite)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock;
    nonfinite += encode_block<BITS, L>(grad + begin, residual + begin, out + b * kBlockBytes,
                                       std::min(kBlock, n - begin), levels, bounds);
  }
  const int64_t used = Layout<BITS>::bytes(n);
  std::memset(out + used, 0, Layout<BITS>::words(n) * 4 - used);
  return nonfinite;
}

template <int BITS, bool ADD>
void decode_all(const uint8_t* in, const float* acc, float* out, int64_t n, const ByteTable<BITS>& table) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  constexpr int64_t kBlockBytes = kBlock / Layout<BITS>::kGroup * Layout<BITS>::kGroupBytes;
#pragma omp parallel for schedule(static) num_threads(threads_for(n))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock;
    decode_block<BITS, ADD>(in + b * kBlockBytes, ADD ? acc + begin : nullptr, out + begin,
                            std::min(kBlock, n - begin), table);
  }
}

template <int BITS>
void decode_bits(const void* payload, const float* acc, float* out, int64_t n, const float* levels,
                 int num_levels) {
  const ByteTable<BITS> table(levels, num_levels);
  const auto* in = static_cast<const uint8_t*>(payload);
  if (acc) {
    decode_all<BITS, true>(in, acc, out, n, table);
  } else {
    decode_all<BITS, false>(in, nullptr, out, n, table);
  }
}

}  // namespace

int64_t encode(int bits, const float* grad, float* residual, void* payload, int64_t n, const float* levels,
               const float* bounds, int num_levels) {
  auto* out = static_cast<uint8_t*>(payload);
  if (bits == 2) return encode_all<2, 1>(grad, residual, out, n, levels, bounds);
  // one loop for every group size: missing levels are never reached
  float padded[kMaxLevels5], cuts[kMaxLevels5];
  const int most = bits == 4 ? kMaxLevels : kMaxLevels5;
  for (int k = 0; k < most; ++k) {
    padded[k] = k < num_levels ? levels[k] : std::numeric_limits<float>::infinity();
    cuts[k] = k < num_levels ? bounds[k] : std::numeric_limits<float>::infinity();
  }
  if (bits == 4) return encode_all<4, kMaxLevels>(grad, residual, out, n, padded, cuts);
  return encode_all<5, kMaxLevels5>(grad, residual, out, n, padded, cuts);
}

void decode(int bits, const void* payload, const float* acc, float* out, int64_t n, const float* levels,
            int num_levels) {
  if (bits == 2) {
    decode_bits<2>(payload, acc, out, n, levels, num_levels);
  } else if (bits == 4) {
    decode_bits<4>(payload, acc, out, n, levels, num_levels);
  } else {
    decode_bits<5>(payload, acc, out, n, levels, num_levels);
  }
}

}  // namespace MXGC_ISA
}  // namespace mxgc
