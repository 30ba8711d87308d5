// The threshold quantizers as MXNet custom operators (lib_api.h), so they run on MXNet's engine:
// asynchronous, ordered by the engine's read/write dependencies, the residual mutated in place.
//
//   mxgc_{2,4}bit_encode(grad, residual; levels)     -> payload   (residual is updated in place)
//   mxgc_{2,4}bit_decode(payload; levels, shape)     -> values
//   mxgc_{2,4}bit_decode_add(payload, acc; levels)   -> acc + values   (call with out=acc to accumulate)
//
// levels: comma-separated float32 thresholds, strictly increasing (2bit: exactly one).
// shape: comma-separated dimensions of the decoded array.
//
//   mxgc_topk_encode(grad, state; density, momentum, gamma, delta, reset_every, capacity) -> payload
//   mxgc_topk_decode(payload; capacity, shape)       -> values
//   mxgc_topk_decode_add(payload, acc; capacity)     -> acc + values
//
// The layer-wise sparsifier (topk_sparsifier.h): state is updated in place; parameters as there.
//
//   mxgc_count_nonfinite(a_1, ..., a_N; num_arrays=N) -> counts (N,): NaN and +-inf values in each a_i
#include <cerrno>
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
using Shapes = std::vector<std::vector<unsigned int>>;

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

template <int BITS>
bool parse_levels(const Attrs& attrs, std::vector<float>* levels) {
  const char* codec = BITS == 2 ? "2bit" : "4bit";
  if (!parse_list<float>(attrs, "levels", [](const char* s, char** e) { return std::strtof(s, e); },
                         levels)) {
    MX_ERROR_MSG << "mxnet_gc " << codec << ": attribute 'levels' missing or not a list of numbers";
    return false;
  }
  const size_t max_levels = BITS == 2 ? 1 : mxgc::kMaxLevels;
  if (levels->empty() || levels->size() > max_levels) {
    MX_ERROR_MSG << "mxnet_gc " << codec << ": needs 1 to " << max_levels << " levels, got "
                 << levels->size();
    return false;
  }
  for (size_t k = 0; k < levels->size(); ++k) {
    const float t = (*levels)[k];
    if (!(t > 0.0f) || !std::isfinite(t) || (k > 0 && !(t > (*levels)[k - 1]))) {
      MX_ERROR_MSG << "mxnet_gc " << codec
                   << ": levels must be finite, positive and strictly increasing (level " << k + 1
                   << " is " << t << ")";
      return false;
    }
  }
  return true;
}

bool parse_shape(const Attrs& attrs, std::vector<unsigned int>* shape) {
  std::vector<long> dims;
  if (!parse_list<long>(attrs, "shape", [](const char* s, char** e) { return std::strtol(s, e, 10); },
                        &dims) ||
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

int64_t numel(const std::vector<unsigned int>& shape) {
  int64_t n = 1;
  for (unsigned int d : shape) n *= d;
  return n;
}

// Every input must be float32 (the payload is float32 words as in MXNet's 2bit); outputs are float32.
MXReturnValue all_float32(const Attrs&, std::vector<int>* in, std::vector<int>* out) {
  for (size_t i = 0; i < in->size(); ++i) {
    if ((*in)[i] != kFloat32) {
      MX_ERROR_MSG << "mxnet_gc: input " << i << " must be float32 (dtype code 0), got dtype code "
                   << (*in)[i];
      return MX_FAIL;
    }
  }
  (*out)[0] = kFloat32;
  return MX_SUCCESS;
}

// Attributes of the two-input operators (encode: grad, residual; decode_add: payload, acc).
template <int BITS>
MXReturnValue two_input_attrs(const Attrs& attrs, int* num_in, int* num_out) {
  std::vector<float> levels;
  if (!parse_levels<BITS>(attrs, &levels)) return MX_FAIL;
  *num_in = 2;
  *num_out = 1;
  return MX_SUCCESS;
}

// ---- encode ----

template <int BITS>
MXReturnValue encode_shape(const Attrs&, Shapes* in, Shapes* out) {
  if ((*in)[0] != (*in)[1]) {
    MX_ERROR_MSG << "mxnet_gc encode: gradient and residual must have the same shape";
    return MX_FAIL;
  }
  (*out)[0] = {static_cast<unsigned int>(mxgc::payload_words(BITS, numel((*in)[0])))};
  return MX_SUCCESS;
}

MXReturnValue residual_is_mutated(const Attrs&, std::vector<int>* indices) {
  indices->push_back(1);
  return MX_SUCCESS;
}

template <int BITS>
MXReturnValue encode_forward(const Attrs& attrs, std::vector<MXTensor>* in, std::vector<MXTensor>* out,
                             const OpResource&) {
  std::vector<float> levels;
  if (!parse_levels<BITS>(attrs, &levels)) return MX_FAIL;
  mxgc::encode(BITS, (*in)[0].data<float>(), (*in)[1].data<float>(), (*out)[0].data_ptr,
               (*in)[0].size(), levels.data(), static_cast<int>(levels.size()));
  return MX_SUCCESS;
}

// ---- decode into a fresh array ----

template <int BITS>
MXReturnValue decode_attrs(const Attrs& attrs, int* num_in, int* num_out) {
  std::vector<float> levels;
  std::vector<unsigned int> shape;
  if (!parse_levels<BITS>(attrs, &levels) || !parse_shape(attrs, &shape)) return MX_FAIL;
  *num_in = 1;
  *num_out = 1;
  return MX_SUCCESS;
}

// The payload must hold exactly words(n) float32 words for the n values it decodes to.
template <int BITS>
bool check_payload(const std::vector<unsigned int>& payload_shape, int64_t n) {
  const int64_t want = mxgc::payload_words(BITS, n);
  if (payload_shape.size() != 1 || payload_shape[0] != want) {
    MX_ERROR_MSG << "mxnet_gc " << BITS << "bit decode: payload has " << numel(payload_shape)
                 << " float32 words, expected " << want << " for " << n << " values";
    return false;
  }
  return true;
}

template <int BITS>
MXReturnValue decode_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
  std::vector<unsigned int> shape;
  if (!parse_shape(attrs, &shape) || !check_payload<BITS>((*in)[0], numel(shape))) return MX_FAIL;
  (*out)[0] = shape;
  return MX_SUCCESS;
}

template <int BITS>
MXReturnValue decode_forward(const Attrs& attrs, std::vector<MXTensor>* in, std::vector<MXTensor>* out,
                             const OpResource&) {
  std::vector<float> levels;
  if (!parse_levels<BITS>(attrs, &levels)) return MX_FAIL;
  mxgc::decode(BITS, (*in)[0].data_ptr, nullptr, (*out)[0].data<float>(), (*out)[0].size(), levels.data(),
               static_cast<int>(levels.size()));
  return MX_SUCCESS;
}

// ---- decode and add ----

template <int BITS>
MXReturnValue decode_add_shape(const Attrs&, Shapes* in, Shapes* out) {
  if (!check_payload<BITS>((*in)[0], numel((*in)[1]))) return MX_FAIL;
  (*out)[0] = (*in)[1];
  return MX_SUCCESS;
}

template <int BITS>
MXReturnValue decode_add_forward(const Attrs& attrs, std::vector<MXTensor>* in, std::vector<MXTensor>* out,
                                 const OpResource&) {
  std::vector<float> levels;
  if (!parse_levels<BITS>(attrs, &levels)) return MX_FAIL;
  mxgc::decode(BITS, (*in)[0].data_ptr, (*in)[1].data<float>(), (*out)[0].data<float>(), (*out)[0].size(),
               levels.data(), static_cast<int>(levels.size()));
  return MX_SUCCESS;
}

// ---- layer-wise top-k sparsification ----

bool parse_number(const Attrs& attrs, const char* key, double* value) {
  std::vector<double> v;
  if (!parse_list<double>(attrs, key, [](const char* s, char** e) { return std::strtod(s, e); }, &v) ||
      v.size() != 1) {
    MX_ERROR_MSG << "mxnet_gc topk: attribute '" << key << "' missing or not one number";
    return false;
  }
  *value = v[0];
  return true;
}

bool parse_capacity(const Attrs& attrs, int64_t* capacity) {
  double c;
  if (!parse_number(attrs, "capacity", &c)) return false;
  if (!(c >= 1) || c != std::floor(c)) {
    MX_ERROR_MSG << "mxnet_gc topk: capacity must be an integer >= 1, got " << c;
    return false;
  }
  *capacity = static_cast<int64_t>(c);
  return true;
}

bool parse_topk(const Attrs& attrs, mxgc::TopkParams* p) {
  double density, momentum, gamma, delta, reset_every;
  if (!parse_number(attrs, "density", &density) || !parse_number(attrs, "momentum", &momentum) ||
      !parse_number(attrs, "gamma", &gamma) || !parse_number(attrs, "delta", &delta) ||
      !parse_number(attrs, "reset_every", &reset_every) || !parse_capacity(attrs, &p->capacity))
    return false;
  if (!(density > 0 && density <= 1) || !(momentum >= 0 && momentum < 1) || !(gamma > 0 && gamma < 1) ||
      !(delta >= 0 && delta < 1) || !(reset_every >= 1)) {
    MX_ERROR_MSG << "mxnet_gc topk: needs 0 < density <= 1, 0 <= momentum < 1, 0 < gamma < 1, 0 <= delta < 1 "
                    "and reset_every >= 1";
    return false;
  }
  p->density = density;
  p->momentum = static_cast<float>(momentum);
  p->gamma = static_cast<float>(gamma);
  p->delta = static_cast<float>(delta);
  p->reset_every = static_cast<int>(reset_every);
  return true;
}

MXReturnValue topk_encode_attrs(const Attrs& attrs, int* num_in, int* num_out) {
  mxgc::TopkParams p;
  if (!parse_topk(attrs, &p)) return MX_FAIL;
  *num_in = 2;
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue topk_encode_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
  mxgc::TopkParams p;
  if (!parse_topk(attrs, &p)) return MX_FAIL;
  const int64_t n = numel((*in)[0]);
  const int64_t state = numel((*in)[1]);
  if ((*in)[1].size() != 1 || state != mxgc::topk_state_words(n, p.momentum > 0)) {
    MX_ERROR_MSG << "mxnet_gc topk encode: the state must be flat with "
                 << mxgc::topk_state_words(n, p.momentum > 0) << " words for " << n << " values, got "
                 << state;
    return MX_FAIL;
  }
  if (p.capacity < mxgc::topk_target(n, p.density)) {
    MX_ERROR_MSG << "mxnet_gc topk encode: capacity " << p.capacity << " is below the " << mxgc::topk_target(n, p.density)
                 << " values density " << p.density << " aims to send of " << n;
    return MX_FAIL;
  }
  (*out)[0] = {static_cast<unsigned int>(mxgc::topk_payload_words(p.capacity))};
  return MX_SUCCESS;
}

MXReturnValue topk_encode_forward(const Attrs& attrs, std::vector<MXTensor>* in, std::vector<MXTensor>* out,
                                  const OpResource&) {
  mxgc::TopkParams p;
  if (!parse_topk(attrs, &p)) return MX_FAIL;
  mxgc::topk_encode((*in)[0].data<float>(), (*in)[1].data<float>(), (*in)[0].size(), p, (*out)[0].data<float>());
  return MX_SUCCESS;
}

bool check_topk_payload(const std::vector<unsigned int>& payload_shape, int64_t capacity) {
  if (payload_shape.size() != 1 || payload_shape[0] != mxgc::topk_payload_words(capacity)) {
    MX_ERROR_MSG << "mxnet_gc topk decode: payload has " << numel(payload_shape) << " float32 words, expected "
                 << mxgc::topk_payload_words(capacity) << " for capacity " << capacity;
    return false;
  }
  return true;
}

MXReturnValue topk_decode_attrs(const Attrs& attrs, int* num_in, int* num_out) {
  int64_t capacity;
  std::vector<unsigned int> shape;
  if (!parse_capacity(attrs, &capacity) || !parse_shape(attrs, &shape)) return MX_FAIL;
  *num_in = 1;
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue topk_decode_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
  int64_t capacity;
  std::vector<unsigned int> shape;
  if (!parse_capacity(attrs, &capacity) || !parse_shape(attrs, &shape) || !check_topk_payload((*in)[0], capacity))
    return MX_FAIL;
  (*out)[0] = shape;
  return MX_SUCCESS;
}

MXReturnValue topk_decode_add_attrs(const Attrs& attrs, int* num_in, int* num_out) {
  int64_t capacity;
  if (!parse_capacity(attrs, &capacity)) return MX_FAIL;
  *num_in = 2;
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue topk_decode_add_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
  int64_t capacity;
  if (!parse_capacity(attrs, &capacity) || !check_topk_payload((*in)[0], capacity)) return MX_FAIL;
  (*out)[0] = (*in)[1];
  return MX_SUCCESS;
}

// decode (one input) and decode_add (payload, acc) share this forward.
MXReturnValue topk_decode_forward(const Attrs& attrs, std::vector<MXTensor>* in, std::vector<MXTensor>* out,
                                  const OpResource&) {
  int64_t capacity;
  if (!parse_capacity(attrs, &capacity)) return MX_FAIL;
  const float* acc = in->size() > 1 ? (*in)[1].data<float>() : nullptr;
  std::string error;
  if (!mxgc::topk_decode((*in)[0].data<float>(), capacity, acc, (*out)[0].data<float>(), (*out)[0].size(),
                         &error)) {
    MX_ERROR_MSG << "mxnet_gc topk decode: " << error;
    return MX_FAIL;
  }
  return MX_SUCCESS;
}

// ---- non-finite values ----

bool parse_num_arrays(const Attrs& attrs, int* n) {
  std::vector<long> v;
  if (!parse_list<long>(attrs, "num_arrays", [](const char* s, char** e) { return std::strtol(s, e, 10); }, &v) ||
      v.size() != 1 || v[0] < 1) {
    MX_ERROR_MSG << "mxnet_gc count_nonfinite: attribute 'num_arrays' missing or not an integer >= 1";
    return false;
  }
  *n = static_cast<int>(v[0]);
  return true;
}

MXReturnValue count_attrs(const Attrs& attrs, int* num_in, int* num_out) {
  if (!parse_num_arrays(attrs, num_in)) return MX_FAIL;
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue count_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
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

#define MXGC_REGISTER_CODEC(BITS)                                                                 \
  REGISTER_OP(mxgc_##BITS##bit_encode)                                                            \
      .setParseAttrs(two_input_attrs<BITS>)                                                       \
      .setInferType(all_float32)                                                                  \
      .setInferShape(encode_shape<BITS>)                                                          \
      .setMutateInputs(residual_is_mutated)                                                       \
      .setForward(encode_forward<BITS>, "cpu");                                                   \
  REGISTER_OP(mxgc_##BITS##bit_decode)                                                            \
      .setParseAttrs(decode_attrs<BITS>)                                                          \
      .setInferType(all_float32)                                                                  \
      .setInferShape(decode_shape<BITS>)                                                          \
      .setForward(decode_forward<BITS>, "cpu");                                                   \
  REGISTER_OP(mxgc_##BITS##bit_decode_add)                                                        \
      .setParseAttrs(two_input_attrs<BITS>)                                                       \
      .setInferType(all_float32)                                                                  \
      .setInferShape(decode_add_shape<BITS>)                                                      \
      .setForward(decode_add_forward<BITS>, "cpu");

MXGC_REGISTER_CODEC(2)
MXGC_REGISTER_CODEC(4)

REGISTER_OP(mxgc_topk_encode)
    .setParseAttrs(topk_encode_attrs)
    .setInferType(all_float32)
    .setInferShape(topk_encode_shape)
    .setMutateInputs(residual_is_mutated)
    .setForward(topk_encode_forward, "cpu");
REGISTER_OP(mxgc_topk_decode)
    .setParseAttrs(topk_decode_attrs)
    .setInferType(all_float32)
    .setInferShape(topk_decode_shape)
    .setForward(topk_decode_forward, "cpu");
REGISTER_OP(mxgc_topk_decode_add)
    .setParseAttrs(topk_decode_add_attrs)
    .setInferType(all_float32)
    .setInferShape(topk_decode_add_shape)
    .setForward(topk_decode_forward, "cpu");

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
