// The codecs' kernels as MXNet custom operators (lib_api.h), so they run on MXNet's engine:
// asynchronous, ordered by the engine's read/write dependencies, the state mutated in place.  Every
// codec gets three operators from one description (a struct below) and one registration line:
//
//   mxgc_<codec>_encode(grad, state; params)        -> payload   (state, such as the residual, updated in place)
//   mxgc_<codec>_decode(payload; params, shape)     -> values
//   mxgc_<codec>_decode_add(payload, acc; params)   -> acc + values   (call with out=acc to accumulate)
//
// 2bit and 4bit: params ``levels``, comma-separated float32 thresholds, strictly increasing (2bit:
// exactly one); the state is the residual, shaped like the gradient.  topk (the layer-wise
// sparsifier, topk_sparsifier.h): params density, momentum, gamma, delta, reset_every, capacity; the
// state is flat (topk_state_words).  ``shape``: comma-separated dimensions of the decoded array.
//
//   mxgc_count_nonfinite(a_1, ..., a_N; num_arrays=N) -> counts (N,): NaN and +-inf values in each a_i
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "mxnet/lib_api.h"
#include "threshold_quantizer.h"
#include "topk_sparsifier.h"

using mxnet::ext::MXReturnValue;
using mxnet::ext::MXTensor;
using mxnet::ext::OpResource;
using mxnet::ext::MX_FAIL;
using mxnet::ext::MX_SUCCESS;
using Attrs = std::unordered_map<std::string, std::string>;
using Shape = std::vector<unsigned int>;
using Shapes = std::vector<Shape>;

namespace {

constexpr int kFloat32 = mxnet::ext::kFloat32;

// Comma-separated numbers of an attribute; false if it is missing or a field does not parse.
template <typename T, typename Parse>
bool parse_list(const Attrs& attrs, const char* key, Parse parse, std::vector<T>* out) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return false;
  const char* p = it->second.c_str();
  out->clear();
  while (*p) {
    char* end = nullptr;
    errno = 0;
    const T v = parse(p, &end);
    if (end == p || errno) return false;
    out->push_back(v);
    p = end;
    while (*p == ',' || *p == ' ' || *p == '(' || *p == ')') ++p;
  }
  return true;
}

bool parse_numbers(const Attrs& attrs, const char* key, std::vector<double>* out) {
  return parse_list<double>(attrs, key, [](const char* s, char** e) { return std::strtod(s, e); }, out);
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (unsigned int d : shape) n *= d;
  return n;
}

bool parse_shape(const Attrs& attrs, Shape* shape) {
  std::vector<long> dims;
  if (!parse_list<long>(attrs, "shape", [](const char* s, char** e) { return std::strtol(s, e, 10); }, &dims) ||
      dims.empty()) {
    MX_ERROR_MSG << "mxnet_gc decode: attribute 'shape' missing or not a list of dimensions";
    return false;
  }
  shape->clear();
  for (long d : dims) {
    if (d < 0) {
      MX_ERROR_MSG << "mxnet_gc decode: negative dimension " << d;
      return false;
    }
    shape->push_back(static_cast<unsigned int>(d));
  }
  return true;
}

// The parameters of an operator call, parsed from its attributes and kept per thread for the same
// attributes (an operator's attributes are parsed for each of its calls' three steps otherwise).
// ``decoding``: the decode operators, which take only what decoding needs.
template <class Codec>
bool params_of(const Attrs& attrs, typename Codec::Params* p, bool decoding = false) {
  thread_local std::unordered_map<std::string, typename Codec::Params> parsed;
  std::string key(1, decoding ? 'd' : 'e');
  for (const char* name : Codec::kAttributes) {
    auto it = attrs.find(name);
    key += it == attrs.end() ? std::string("\x01") : it->second;
    key += '\x02';
  }
  auto hit = parsed.find(key);
  if (hit != parsed.end()) {
    *p = hit->second;
    return true;
  }
  if (!Codec::parse(attrs, p, decoding)) return false;
  if (parsed.size() > 4096) parsed.clear();
  parsed.emplace(key, *p);
  return true;
}

// ---- the codecs ----

template <int BITS>
struct ThresholdCodec {
  struct Params {
    std::vector<float> levels;
    std::vector<float> bounds;  // the encoder's decision bounds; by default the levels (floor)
  };
  static constexpr const char* kName = BITS == 2 ? "2bit" : "4bit";
  static constexpr const char* kAttributes[] = {"levels", "bounds"};

  static bool parse(const Attrs& attrs, Params* p, bool) {
    if (!parse_list<float>(attrs, "levels", [](const char* s, char** e) { return std::strtof(s, e); }, &p->levels)) {
      MX_ERROR_MSG << "mxnet_gc " << kName << ": attribute 'levels' missing or not a list of numbers";
      return false;
    }
    const size_t max_levels = BITS == 2 ? 1 : mxgc::kMaxLevels;
    if (p->levels.empty() || p->levels.size() > max_levels) {
      MX_ERROR_MSG << "mxnet_gc " << kName << ": needs 1 to " << max_levels << " levels, got " << p->levels.size();
      return false;
    }
    for (size_t k = 0; k < p->levels.size(); ++k) {
      const float t = p->levels[k];
      if (!(t > 0.0f) || !std::isfinite(t) || (k > 0 && !(t > p->levels[k - 1]))) {
        MX_ERROR_MSG << "mxnet_gc " << kName << ": levels must be finite, positive and strictly increasing (level "
                     << k + 1 << " is " << t << ")";
        return false;
      }
    }
    if (attrs.find("bounds") == attrs.end()) {
      p->bounds = p->levels;
    } else if (!parse_list<float>(attrs, "bounds", [](const char* s, char** e) { return std::strtof(s, e); },
                                  &p->bounds) || p->bounds.size() != p->levels.size()) {
      MX_ERROR_MSG << "mxnet_gc " << kName << ": attribute 'bounds' must list one number per level";
      return false;
    }
    return true;
  }
  static int64_t payload_words(const Params&, int64_t n) { return mxgc::payload_words(BITS, n); }
  // The residual: shaped like the gradient.
  static bool check_state(const Params&, const Shape& grad, const Shape& state) {
    if (grad == state) return true;
    MX_ERROR_MSG << "mxnet_gc encode: gradient and residual must have the same shape";
    return false;
  }
  static void encode(const Params& p, const float* grad, float* state, float* payload, int64_t n) {
    mxgc::encode(BITS, grad, state, payload, n, p.levels.data(), p.bounds.data(), static_cast<int>(p.levels.size()));
  }
  static bool decode(const Params& p, const float* payload, const float* acc, float* out, int64_t n, std::string*) {
    mxgc::decode(BITS, payload, acc, out, n, p.levels.data(), static_cast<int>(p.levels.size()));
    return true;
  }
};

struct TopkCodec {
  using Params = mxgc::TopkParams;
  static constexpr const char* kName = "topk";
  static constexpr const char* kAttributes[] = {"density", "momentum", "gamma", "delta", "reset_every", "capacity"};

  // Decoding needs only the capacity (the others then keep valid defaults).
  static bool parse(const Attrs& attrs, Params* p, bool decoding) {
    double v[6] = {1, 0, 0.5, 0, 1, 0};
    std::vector<double> field;
    for (int i = decoding ? 5 : 0; i < 6; ++i) {
      if (!parse_numbers(attrs, kAttributes[i], &field) || field.size() != 1) {
        MX_ERROR_MSG << "mxnet_gc topk: attribute '" << kAttributes[i] << "' missing or not one number";
        return false;
      }
      v[i] = field[0];
    }
    const double density = v[0], momentum = v[1], gamma = v[2], delta = v[3], reset_every = v[4], capacity = v[5];
    if (!(capacity >= 1) || capacity != std::floor(capacity)) {
      MX_ERROR_MSG << "mxnet_gc topk: capacity must be an integer >= 1, got " << capacity;
      return false;
    }
    if (!(density > 0 && density <= 1) || !(momentum >= 0 && momentum < 1) || !(gamma > 0 && gamma < 1) ||
        !(delta >= 0 && delta < 1) || !(reset_every >= 1)) {
      MX_ERROR_MSG << "mxnet_gc topk: needs 0 < density <= 1, 0 <= momentum < 1, 0 < gamma < 1, 0 <= delta < 1 "
                      "and reset_every >= 1";
      return false;
    }
    *p = Params{density, static_cast<float>(momentum), static_cast<float>(gamma), static_cast<float>(delta),
                static_cast<int>(reset_every), static_cast<int64_t>(capacity)};
    return true;
  }
  static int64_t payload_words(const Params& p, int64_t) { return mxgc::topk_payload_words(p.capacity); }
  // The state: flat, topk_state_words values; and room in a payload for the k values a step aims at.
  static bool check_state(const Params& p, const Shape& grad, const Shape& state) {
    const int64_t n = numel(grad), want = mxgc::topk_state_words(n, p.momentum > 0);
    if (state.size() != 1 || numel(state) != want) {
      MX_ERROR_MSG << "mxnet_gc topk encode: the state must be flat with " << want << " words for " << n
                   << " values, got " << numel(state);
      return false;
    }
    if (p.capacity < mxgc::topk_target(n, p.density)) {
      MX_ERROR_MSG << "mxnet_gc topk encode: capacity " << p.capacity << " is below the "
                   << mxgc::topk_target(n, p.density) << " values density " << p.density << " aims to send of " << n;
      return false;
    }
    return true;
  }
  static void encode(const Params& p, const float* grad, float* state, float* payload, int64_t n) {
    mxgc::topk_encode(grad, state, n, p, payload);
  }
  static bool decode(const Params& p, const float* payload, const float* acc, float* out, int64_t n,
                     std::string* error) {
    return mxgc::topk_decode(payload, p.capacity, acc, out, n, error);
  }
};

// ---- the three operators of a codec ----

// Every input must be float32 (payloads are float32 words); outputs are float32.
MXReturnValue all_float32(const Attrs&, std::vector<int>* in, std::vector<int>* out) {
  for (size_t i = 0; i < in->size(); ++i) {
    if ((*in)[i] != kFloat32) {
      MX_ERROR_MSG << "mxnet_gc: input " << i << " must be float32 (dtype code 0), got dtype code " << (*in)[i];
      return MX_FAIL;
    }
  }
  (*out)[0] = kFloat32;
  return MX_SUCCESS;
}

MXReturnValue state_is_mutated(const Attrs&, std::vector<int>* indices) {
  indices->push_back(1);
  return MX_SUCCESS;
}

template <class Codec>
struct CodecOps {
  using Params = typename Codec::Params;

  // The payload must hold exactly the codec's number of words for the n values it decodes to.
  static bool check_payload(const Params& p, const Shape& payload, int64_t n) {
    const int64_t want = Codec::payload_words(p, n);
    if (payload.size() == 1 && payload[0] == want) return true;
    MX_ERROR_MSG << "mxnet_gc " << Codec::kName << " decode: payload has " << numel(payload)
                 << " float32 words, expected " << want << " for " << n << " values";
    return false;
  }

  static MXReturnValue encode_attrs(const Attrs& attrs, int* num_in, int* num_out) {
    Params p;
    if (!params_of<Codec>(attrs, &p)) return MX_FAIL;
    *num_in = 2;
    *num_out = 1;
    return MX_SUCCESS;
  }
  static MXReturnValue decode_add_attrs(const Attrs& attrs, int* num_in, int* num_out) {
    Params p;
    if (!params_of<Codec>(attrs, &p, true)) return MX_FAIL;
    *num_in = 2;
    *num_out = 1;
    return MX_SUCCESS;
  }
  static MXReturnValue decode_attrs(const Attrs& attrs, int* num_in, int* num_out) {
    Params p;
    Shape shape;
    if (!params_of<Codec>(attrs, &p, true) || !parse_shape(attrs, &shape)) return MX_FAIL;
    *num_in = 1;
    *num_out = 1;
    return MX_SUCCESS;
  }

  static MXReturnValue encode_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
    Params p;
    if (!params_of<Codec>(attrs, &p) || !Codec::check_state(p, (*in)[0], (*in)[1])) return MX_FAIL;
    (*out)[0] = {static_cast<unsigned int>(Codec::payload_words(p, numel((*in)[0])))};
    return MX_SUCCESS;
  }
  static MXReturnValue decode_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
    Params p;
    Shape shape;
    if (!params_of<Codec>(attrs, &p, true) || !parse_shape(attrs, &shape) ||
        !check_payload(p, (*in)[0], numel(shape)))
      return MX_FAIL;
    (*out)[0] = shape;
    return MX_SUCCESS;
  }
  static MXReturnValue decode_add_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
    Params p;
    if (!params_of<Codec>(attrs, &p, true) || !check_payload(p, (*in)[0], numel((*in)[1]))) return MX_FAIL;
    (*out)[0] = (*in)[1];
    return MX_SUCCESS;
  }

  static MXReturnValue encode(const Attrs& attrs, std::vector<MXTensor>* in, std::vector<MXTensor>* out,
                              const OpResource&) {
    Params p;
    if (!params_of<Codec>(attrs, &p)) return MX_FAIL;
    Codec::encode(p, (*in)[0].data<float>(), (*in)[1].data<float>(), (*out)[0].data<float>(), (*in)[0].size());
    return MX_SUCCESS;
  }
  // decode (one input) and decode_add (payload, acc) share this forward.
  static MXReturnValue decode(const Attrs& attrs, std::vector<MXTensor>* in, std::vector<MXTensor>* out,
                              const OpResource&) {
    Params p;
    if (!params_of<Codec>(attrs, &p, true)) return MX_FAIL;
    const float* acc = in->size() > 1 ? (*in)[1].data<float>() : nullptr;
    std::string error;
    if (!Codec::decode(p, (*in)[0].data<float>(), acc, (*out)[0].data<float>(), (*out)[0].size(), &error)) {
      MX_ERROR_MSG << "mxnet_gc " << Codec::kName << " decode: " << error;
      return MX_FAIL;
    }
    return MX_SUCCESS;
  }
};

// ---- non-finite values ----

MXReturnValue count_attrs(const Attrs& attrs, int* num_in, int* num_out) {
  std::vector<double> n;
  if (!parse_numbers(attrs, "num_arrays", &n) || n.size() != 1 || n[0] < 1 || n[0] != std::floor(n[0])) {
    MX_ERROR_MSG << "mxnet_gc count_nonfinite: attribute 'num_arrays' missing or not an integer >= 1";
    return MX_FAIL;
  }
  *num_in = static_cast<int>(n[0]);
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue count_shape(const Attrs&, Shapes* in, Shapes* out) {
  (*out)[0] = {static_cast<unsigned int>(in->size())};
  return MX_SUCCESS;
}

// A float32 is NaN or +-inf when its exponent bits are all set: an integer test, exact under any
// floating-point flags, that the compiler vectorizes.
int64_t count_nonfinite(const uint32_t* bits, int64_t n) {
  int64_t count = 0;
  const int threads = n >= (1 << 18) ? mxgc::num_threads() : 1;
#pragma omp parallel for reduction(+ : count) num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) count += (bits[i] & 0x7f800000u) == 0x7f800000u;
  return count;
}

MXReturnValue count_forward(const Attrs&, std::vector<MXTensor>* in, std::vector<MXTensor>* out,
                            const OpResource&) {
  float* counts = (*out)[0].data<float>();
  for (size_t i = 0; i < in->size(); ++i)
    counts[i] = static_cast<float>(count_nonfinite(static_cast<const uint32_t*>((*in)[i].data_ptr), (*in)[i].size()));
  return MX_SUCCESS;
}

}  // namespace

// One line per codec: its encode, decode and decode_add operators.
#define MXGC_REGISTER_CODEC(NAME, CODEC)                                      \
  REGISTER_OP(mxgc_##NAME##_encode)                                           \
      .setParseAttrs(CodecOps<CODEC>::encode_attrs)                           \
      .setInferType(all_float32)                                              \
      .setInferShape(CodecOps<CODEC>::encode_shape)                           \
      .setMutateInputs(state_is_mutated)                                      \
      .setForward(CodecOps<CODEC>::encode, "cpu");                            \
  REGISTER_OP(mxgc_##NAME##_decode)                                           \
      .setParseAttrs(CodecOps<CODEC>::decode_attrs)                           \
      .setInferType(all_float32)                                              \
      .setInferShape(CodecOps<CODEC>::decode_shape)                           \
      .setForward(CodecOps<CODEC>::decode, "cpu");                            \
  REGISTER_OP(mxgc_##NAME##_decode_add)                                       \
      .setParseAttrs(CodecOps<CODEC>::decode_add_attrs)                       \
      .setInferType(all_float32)                                              \
      .setInferShape(CodecOps<CODEC>::decode_add_shape)                       \
      .setForward(CodecOps<CODEC>::decode, "cpu");

MXGC_REGISTER_CODEC(2bit, ThresholdCodec<2>)
MXGC_REGISTER_CODEC(4bit, ThresholdCodec<4>)
MXGC_REGISTER_CODEC(topk, TopkCodec)

REGISTER_OP(mxgc_count_nonfinite)
    .setParseAttrs(count_attrs)
    .setInferType(all_float32)
    .setInferShape(count_shape)
    .setForward(count_forward, "cpu");

#ifndef MXGC_BUILD_ID
#define MXGC_BUILD_ID "unknown"
#endif

extern "C" {

// Hash of the sources this library was built from; mxnet_gc compares it to detect a stale build.
const char* mxgc_build_id() { return MXGC_BUILD_ID; }

}  // extern "C"

MXReturnValue initialize(int version) {
  if (version >= 10900) return MX_SUCCESS;
  MX_ERROR_MSG << "mxnet_gc needs MXNet 1.9 or newer, found version code " << version;
  return MX_FAIL;
}
