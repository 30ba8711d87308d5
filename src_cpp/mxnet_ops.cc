// The codecs' kernels as MXNet custom operators (lib_api.h), so they run on MXNet's engine:
// asynchronous, ordered by the engine's read/write dependencies, the state mutated in place.  Every
// line of codecs.def (a codec's description, codec.h) gets three operators:
//
//   mxgc_<codec>_encode(grad, state; params)        -> payload   (state, such as the residual, updated in place)
//   mxgc_<codec>_decode(payload; params, shape)     -> values
//   mxgc_<codec>_decode_add(payload, acc; params)   -> acc + values   (call with out=acc to accumulate)
//
// ``params``: the codec's parameters, comma-separated numbers, as Python's Codec.kernel_params gives
// them; the description checks them.  The state has the description's state_words, shaped like the
// gradient or flat.  ``shape``: comma-separated dimensions of the decoded array.
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "codec.h"
#include "mxnet/lib_api.h"
#include "threshold_quantizer.h"
#define MXGC_CODEC_HEADERS
#include "codecs.def"
#undef MXGC_CODEC_HEADERS

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

// The parameters of an operator call, parsed from its ``params`` attribute and kept per thread for the
// same attribute (an operator's attributes are parsed for each of its calls' three steps otherwise).
template <class Codec>
bool params_of(const Attrs& attrs, typename Codec::Params* p) {
  thread_local std::unordered_map<std::string, typename Codec::Params> parsed;
  auto it = attrs.find("params");
  const std::string key = it == attrs.end() ? std::string() : it->second;
  auto hit = parsed.find(key);
  if (hit != parsed.end()) {
    *p = hit->second;
    return true;
  }
  std::vector<double> numbers;
  std::string error;
  if (!parse_numbers(attrs, "params", &numbers)) {
    MX_ERROR_MSG << "mxnet_gc " << Codec::kName << ": attribute 'params' missing or not a list of numbers";
    return false;
  }
  if (!Codec::parse(numbers.data(), static_cast<int>(numbers.size()), p, &error)) {
    MX_ERROR_MSG << "mxnet_gc " << error;
    return false;
  }
  if (parsed.size() > 4096) parsed.clear();
  parsed.emplace(key, *p);
  return true;
}

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

  // The state: the codec's state_words, shaped like the gradient or flat; and the checks for n values.
  static bool check_state(const Params& p, const Shape& grad, const Shape& state) {
    const int64_t n = numel(grad), want = Codec::state_words(p, n);
    std::string error;
    if (!Codec::check_size(p, n, &error)) {
      MX_ERROR_MSG << "mxnet_gc encode: " << error;
      return false;
    }
    if (numel(state) == want && (state == grad || state.size() == 1)) return true;
    MX_ERROR_MSG << "mxnet_gc " << Codec::kName << " encode: the state for " << n << " values must have " << want
                 << " words, shaped like the gradient or flat, got " << numel(state);
    return false;
  }

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
    if (!params_of<Codec>(attrs, &p)) return MX_FAIL;
    *num_in = 2;
    *num_out = 1;
    return MX_SUCCESS;
  }
  static MXReturnValue decode_attrs(const Attrs& attrs, int* num_in, int* num_out) {
    Params p;
    Shape shape;
    if (!params_of<Codec>(attrs, &p) || !parse_shape(attrs, &shape)) return MX_FAIL;
    *num_in = 1;
    *num_out = 1;
    return MX_SUCCESS;
  }

  static MXReturnValue encode_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
    Params p;
    if (!params_of<Codec>(attrs, &p) || !check_state(p, (*in)[0], (*in)[1])) return MX_FAIL;
    (*out)[0] = {static_cast<unsigned int>(Codec::payload_words(p, numel((*in)[0])))};
    return MX_SUCCESS;
  }
  static MXReturnValue decode_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
    Params p;
    Shape shape;
    if (!params_of<Codec>(attrs, &p) || !parse_shape(attrs, &shape) ||
        !check_payload(p, (*in)[0], numel(shape)))
      return MX_FAIL;
    (*out)[0] = shape;
    return MX_SUCCESS;
  }
  static MXReturnValue decode_add_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
    Params p;
    if (!params_of<Codec>(attrs, &p) || !check_payload(p, (*in)[0], numel((*in)[1]))) return MX_FAIL;
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
    if (!params_of<Codec>(attrs, &p)) return MX_FAIL;
    const float* acc = in->size() > 1 ? (*in)[1].data<float>() : nullptr;
    std::string error;
    if (!Codec::decode(p, (*in)[0].data<float>(), acc, (*out)[0].data<float>(), (*out)[0].size(), &error)) {
      MX_ERROR_MSG << "mxnet_gc " << Codec::kName << " decode: " << error;
      return MX_FAIL;
    }
    return MX_SUCCESS;
  }
};

}  // namespace

// Every codec of codecs.def: its encode, decode and decode_add operators.
#define MXGC_CODEC(NAME, CODEC)                                      \
  REGISTER_OP(mxgc_##NAME##_encode)                                           \
      .setParseAttrs(CodecOps<mxgc::CODEC>::encode_attrs)                           \
      .setInferType(all_float32)                                              \
      .setInferShape(CodecOps<mxgc::CODEC>::encode_shape)                           \
      .setMutateInputs(state_is_mutated)                                      \
      .setForward(CodecOps<mxgc::CODEC>::encode, "cpu");                            \
  REGISTER_OP(mxgc_##NAME##_decode)                                           \
      .setParseAttrs(CodecOps<mxgc::CODEC>::decode_attrs)                           \
      .setInferType(all_float32)                                              \
      .setInferShape(CodecOps<mxgc::CODEC>::decode_shape)                           \
      .setForward(CodecOps<mxgc::CODEC>::decode, "cpu");                            \
  REGISTER_OP(mxgc_##NAME##_decode_add)                                       \
      .setParseAttrs(CodecOps<mxgc::CODEC>::decode_add_attrs)                       \
      .setInferType(all_float32)                                              \
      .setInferShape(CodecOps<mxgc::CODEC>::decode_add_shape)                       \
      .setForward(CodecOps<mxgc::CODEC>::decode, "cpu");

#include "codecs.def"
#undef MXGC_CODEC

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
