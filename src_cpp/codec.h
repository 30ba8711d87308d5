// What a codec is to the C++ side: one description (a struct), from which the MXNet operators
// (mxnet_ops.cc) and the message plans (message_plan.cc) are both made.  The codecs are listed once,
// in codecs.def.
//
// A description is a struct of static members:
//
//   kName                     the codec's kernel name: operators mxgc_<kName>_encode/_decode/_decode_add,
//                             and the name a message plan's segment gives (Python: Codec.kernel_name)
//   Params                    its parsed parameters
//   parse(v, count, &p, &e)   the flat parameter list (Python: Codec.kernel_params(n)), every check on
//                             it; false with a message in e
//   check_size(p, n, &e)      the checks that depend on the number of values n (>= 1)
//   payload_words(p, n)       float32 words of a payload for n values
//   state_words(p, n)         float32 words of a worker's state (the residual: n; 0: none)
//   encode(p, grad, state, payload, n)             a worker's push: error feedback in state; returns the
//                                                  number of non-finite values of grad (the same pass)
//   decode(p, payload, acc, out, n, &e)            out = values (acc null) or acc + values (out may be acc);
//                                                  false, out untouched, for a corrupt payload
//   encode_sum(p, sum, residual, payload, n, &e)   a server's re-encoding of a sum for a compressed pull,
//                                                  with the server's residual (n words)
//   example_params(n)         a valid flat parameter list for n values (the fuzz driver runs every codec
//                             of codecs.def with it: tests/asan/kernel_fuzz.cc)
//
// A codec with no parameters whose state is its residual derives from ParameterlessCodec<C> (below),
// which writes all but kName, payload_words, encode and decode.
//
// To add a codec: its kernels and description in one header (src_cpp/<name>_codec.h), a line in
// codecs.def, its Python class (mxnet_gc/codecs/) and its import in mxnet_gc/codecs/__init__.py.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace mxgc {

// The kernels' thread count (dispatch.cc; Python sets it through mxgc_set_num_threads).
int num_threads();

// A number as a message shows it (%g).
inline std::string str(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", v);
  return buffer;
}

// The members every codec with no parameters, a residual for its state and a sum re-encoded as a
// gradient shares: a description C derives from ParameterlessCodec<C> and writes kName, payload_words,
// encode and decode (the 'sign' and '8bit' codecs).
template <class C>
struct ParameterlessCodec {
  struct Params {};

  static bool parse(const double*, int count, Params*, std::string* error) {
    if (count == 0) return true;
    *error = std::string(C::kName) + ": takes no parameters, got " + std::to_string(count);
    return false;
  }
  static bool check_size(const Params&, int64_t, std::string*) { return true; }
  static std::vector<double> example_params(int64_t) { return {}; }
  static int64_t state_words(const Params&, int64_t n) { return n; }
  static bool encode_sum(const Params& p, const float* sum, float* residual, float* payload, int64_t n,
                         std::string*) {
    C::encode(p, sum, residual, payload, n);
    return true;
  }
  // A decoder's check of a payload's scale: a finite number >= 0.
  static bool scale_ok(float scale, std::string* error) {
    if (scale >= 0.0f && scale <= 3.4028234663852886e38f) return true;
    *error = std::string(C::kName) + ": the scale " + str(scale) + " is not a finite number >= 0";
    return false;
  }
};

// For codecs.def's check that each line's name is its description's kName.
constexpr bool same_name(const char* a, const char* b) { return *a == *b && (*a == 0 || same_name(a + 1, b + 1)); }

// A codec with its parameters, for n values: a message plan's segment.
class Codec {
 public:
  virtual ~Codec() = default;
  virtual int64_t payload_words() const = 0;
  virtual int64_t state_words() const = 0;
  virtual int64_t encode(const float* grad, float* state, float* payload) const = 0;
  virtual bool decode(const float* payload, const float* acc, float* out, std::string* error) const = 0;
  virtual bool encode_sum(const float* sum, float* residual, float* payload, std::string* error) const = 0;
};

// The description C bound to its parsed parameters and a size.
template <class C>
class BoundCodec : public Codec {
 public:
  BoundCodec(const typename C::Params& p, int64_t n) : p_(p), n_(n) {}
  int64_t payload_words() const override { return C::payload_words(p_, n_); }
  int64_t state_words() const override { return C::state_words(p_, n_); }
  int64_t encode(const float* grad, float* state, float* payload) const override {
    return C::encode(p_, grad, state, payload, n_);
  }
  bool decode(const float* payload, const float* acc, float* out, std::string* error) const override {
    return C::decode(p_, payload, acc, out, n_, error);
  }
  bool encode_sum(const float* sum, float* residual, float* payload, std::string* error) const override {
    return C::encode_sum(p_, sum, residual, payload, n_, error);
  }

 private:
  typename C::Params p_;
  int64_t n_;
};

// The codec named ``name`` ("dense" or an entry of codecs.def) with ``count`` parameters for n values;
// null with a message in *error for an unknown name or bad parameters.
std::unique_ptr<Codec> make_codec(const std::string& name, const double* params, int count, int64_t n,
                                  std::string* error);

}  // namespace mxgc
