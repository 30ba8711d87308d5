// Runs the C++ kernels on fuzz inputs, for a build with AddressSanitizer and UndefinedBehaviorSanitizer
// (tests/test_kernel_fuzz.py builds it with the library's kernel sources and runs a corpus through it).
//
//   kernel_fuzz FILE...        each file is one input; exit code 0 when every input ran clean
//   KERNEL_FUZZ_SELFTEST=1     first reads past a buffer on purpose: shows the sanitizer is on
//   MXNET_GC_ISA=NAME          runs that instruction-set copy of the kernels
//
// An input's bytes: [target][n: 4][capacity: 4][levels: 1][data...]; target 6 runs the codec table's
// entry chosen by the levels byte.  Every buffer is allocated with
// exactly the size the kernel's contract gives it, so a read or write past it is reported.  Payloads are
// filled from the data bytes (any bit pattern: NaN, huge counts, indices out of range, not ascending);
// sizes and levels come from the receiver's own configuration in real use, so they are kept valid here.
// LLVMFuzzerTestOneInput also lets clang's libFuzzer drive it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <memory>
#include <vector>

#include "codec.h"
#include "threshold_quantizer.h"
#include "topk_sparsifier.h"
#define MXGC_CODEC_HEADERS
#include "codecs.def"
#undef MXGC_CODEC_HEADERS

namespace {

const float kLevels[mxgc::kMaxLevels] = {0.25f, 0.5f, 1.0f, 2.0f, 4.0f, 8.0f, 16.0f};
const float kMidpoints[mxgc::kMaxLevels] = {0.125f, 0.375f, 0.75f, 1.5f, 3.0f, 6.0f, 12.0f};

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// n floats whose bytes repeat the data bytes (zeros when there are none).
std::vector<float> filled(size_t n, const uint8_t* data, size_t size) {
  std::vector<float> out(n);
  uint8_t* bytes = reinterpret_cast<uint8_t*>(out.data());
  for (size_t i = 0; i < 4 * n; ++i) bytes[i] = size ? data[i % size] : 0;
  return out;
}

void threshold_case(int bits, bool encode, int64_t n, int num_levels, const uint8_t* data, size_t size) {
  const int64_t words = mxgc::payload_words(bits, n);
  if (encode) {
    std::vector<float> grad = filled(n, data, size), residual(n, 0.0f), payload(words);
    for (int step = 0; step < 2; ++step)  // floor, then nearest (bounds at the midpoints)
      mxgc::encode(bits, grad.data(), residual.data(), payload.data(), n, kLevels, step ? kMidpoints : kLevels,
                   num_levels);
    return;
  }
  std::vector<float> payload = filled(words, data, size), out(n), acc(n, 1.0f);
  mxgc::decode(bits, payload.data(), nullptr, out.data(), n, kLevels, num_levels);
  mxgc::decode(bits, payload.data(), acc.data(), acc.data(), n, kLevels, num_levels);
}

void topk_case(int target, int64_t n, int64_t capacity, const uint8_t* data, size_t size) {
  const int64_t words = mxgc::topk_payload_words(capacity);
  std::string error;
  if (target == 3) {  // decode: the one entry point whose input comes from the wire unchecked
    std::vector<float> payload = filled(words, data, size), out(n), acc(n, 1.0f);
    if (size >= 4) {  // half the time, a count in range so the index checks run too
      int32_t count = static_cast<int32_t>(read_u32(data) % (capacity + 2)) - 1;
      if (data[0] & 1) std::memcpy(payload.data(), &count, 4);
    }
    mxgc::topk_decode(payload.data(), capacity, nullptr, out.data(), n, &error);
    mxgc::topk_decode(payload.data(), capacity, acc.data(), acc.data(), n, &error);
  } else if (target == 4) {  // (an encode's capacity holds at least its target k, as the operator checks)
    const double density = 0.1;
    mxgc::TopkParams p{density, (size && data[0] & 1) ? 0.9f : 0.0f, 0.1f, 0.2f, 3,
                       std::max(capacity, mxgc::topk_target(n, density))};
    std::vector<float> grad = filled(n, data, size), payload(mxgc::topk_payload_words(p.capacity));
    std::vector<float> state(mxgc::topk_state_words(n, p.momentum > 0), 0.0f);
    for (int step = 0; step < 4; ++step) mxgc::topk_encode(grad.data(), state.data(), n, p, payload.data());
  } else {
    std::vector<float> values = filled(n, data, size), payload(words);
    mxgc::sparse_pack(values.data(), n, capacity, payload.data(), &error);
  }
}

// Every codec of the table (src_cpp/codecs.def) through its description, with valid parameters (a
// receiver's own configuration): decode a payload of any bytes, encode two steps, re-encode a sum.
struct TableCodec {
  const char* name;
  std::vector<double> params;  // for n values: its description's example_params(n)
};
std::vector<TableCodec> table_codecs(int64_t n) {
  return {{"dense", {1.0}},
#define MXGC_CODEC(name, Description) {mxgc::Description::kName, mxgc::Description::example_params(n)},
#include "codecs.def"
#undef MXGC_CODEC
  };
}

void table_case(int which, int64_t n, const uint8_t* data, size_t size) {
  const std::vector<TableCodec> codecs = table_codecs(n);
  const TableCodec& c = codecs[which % codecs.size()];
  std::string error;
  std::unique_ptr<mxgc::Codec> codec =
      mxgc::make_codec(c.name, c.params.data(), static_cast<int>(c.params.size()), n, &error);
  if (!codec) {
    std::fprintf(stderr, "kernel_fuzz: %s refused its parameters: %s\n", c.name, error.c_str());
    std::abort();
  }
  std::vector<float> payload = filled(codec->payload_words(), data, size), out(n), acc(n, 1.0f);
  codec->decode(payload.data(), nullptr, out.data(), &error);
  codec->decode(payload.data(), acc.data(), acc.data(), &error);
  std::vector<float> grad = filled(n, data, size), state(std::max<int64_t>(1, codec->state_words()), 0.0f),
                     residual(n, 0.0f);
  for (int step = 0; step < 2; ++step) codec->encode(grad.data(), state.data(), payload.data());
  codec->encode_sum(grad.data(), residual.data(), payload.data(), &error);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t size) {
  if (size < 10) return 0;
  const int target = input[0] % 7;
  const int64_t n = 1 + read_u32(input + 1) % 5000;
  const int64_t capacity = 1 + read_u32(input + 5) % n;
  const int num_levels = 1 + input[9] % mxgc::kMaxLevels;
  const uint8_t* data = input + 10;
  const size_t data_size = size - 10;
  switch (target) {
    case 0: threshold_case(2, false, n, 1, data, data_size); break;
    case 1: threshold_case(4, false, n, num_levels, data, data_size); break;
    case 2: threshold_case(input[9] & 1 ? 2 : 4, true, n, input[9] & 1 ? 1 : num_levels, data, data_size); break;
    case 6: table_case(input[9], n, data, data_size); break;
    default: topk_case(target, n, capacity, data, data_size); break;
  }
  return 0;
}

#ifndef MXGC_LIBFUZZER
extern "C" int mxgc_select_isa(const char* isa);

int main(int argc, char** argv) {
  const char* isa = std::getenv("MXNET_GC_ISA");  // the kernel copy to run (default: the best)
  if (mxgc_select_isa(isa ? isa : "") != 0) {
    std::fprintf(stderr, "kernel_fuzz: this CPU cannot run the %s kernels\n", isa);
    return 2;
  }
  if (std::getenv("KERNEL_FUZZ_SELFTEST")) {  // a read past a buffer, which the sanitizer must report
    std::vector<float> v(3);
    volatile float past = v.data()[3];
    (void)past;
  }
  for (int i = 1; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "kernel_fuzz: cannot read %s\n", argv[i]);
      return 2;
    }
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("kernel_fuzz: %d inputs ran\n", argc - 1);
  return 0;
}
#endif
