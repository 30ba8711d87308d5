// The codecs by name, for message plans: "dense" (float32 copies) and every line of codecs.def.
#include <cstring>
#include <memory>
#include <string>

#include "codec.h"
#define MXGC_CODEC_HEADERS
#include "codecs.def"
#undef MXGC_CODEC_HEADERS

namespace mxgc {
namespace {

// Dense float32 segments, a plain copy.  One optional parameter: nonzero drops NaN and inf values (sent
// as 0), as the codecs drop them.
struct DenseCodec {
  static constexpr const char* kName = "dense";
  struct Params {
    bool drop_nonfinite = false;
  };
  static bool parse(const double* v, int count, Params* p, std::string* error) {
    if (count > 1) {
      *error = "dense: takes at most one parameter (drop non-finite values), got " + std::to_string(count);
      return false;
    }
    p->drop_nonfinite = count == 1 && v[0] != 0;
    return true;
  }
  static bool check_size(const Params&, int64_t, std::string*) { return true; }
  static int64_t payload_words(const Params&, int64_t n) { return n; }
  static int64_t state_words(const Params&, int64_t) { return 0; }
  // Counts each NaN or inf (all exponent bits set: an integer test) in the copy's pass, sent as 0 when
  // dropping them.
  static int64_t encode(const Params& p, const float* values, float*, float* payload, int64_t n) {
    const uint32_t* bits = reinterpret_cast<const uint32_t*>(values);
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool bad = (bits[i] & 0x7f800000u) == 0x7f800000u;
      nonfinite += bad;
      payload[i] = bad && p.drop_nonfinite ? 0.0f : values[i];
    }
    return nonfinite;
  }
  static bool decode(const Params&, const float* payload, const float* acc, float* out, int64_t n, std::string*) {
    if (!acc) {
      std::memcpy(out, payload, n * sizeof(float));
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = acc[i] + payload[i];
    }
    return true;
  }
  static bool encode_sum(const Params& p, const float* sum, float*, float* payload, int64_t n, std::string*) {
    encode(p, sum, nullptr, payload, n);
    return true;
  }
};

#define MXGC_CODEC(NAME, TYPE) \
  static_assert(same_name(TYPE::kName, #NAME), "codecs.def: a line's name must be its description's kName");
#include "codecs.def"
#undef MXGC_CODEC

template <class C>
std::unique_ptr<Codec> make(const double* params, int count, int64_t n, std::string* error) {
  typename C::Params p;
  if (!C::parse(params, count, &p, error) || !C::check_size(p, n, error)) return nullptr;
  return std::unique_ptr<Codec>(new BoundCodec<C>(p, n));
}

struct Entry {
  const char* name;
  std::unique_ptr<Codec> (*make)(const double*, int, int64_t, std::string*);
};

#define MXGC_CODEC(NAME, TYPE) {#NAME, make<TYPE>},
const Entry kCodecs[] = {{"dense", make<DenseCodec>},
#include "codecs.def"
};
#undef MXGC_CODEC

}  // namespace

std::unique_ptr<Codec> make_codec(const std::string& name, const double* params, int count, int64_t n,
                                  std::string* error) {
  if (n < 1) {
    *error = "a segment needs at least one value, got " + std::to_string(n);
    return nullptr;
  }
  for (const Entry& entry : kCodecs)
    if (name == entry.name) return entry.make(params, count, n, error);
  std::string names;
  for (const Entry& entry : kCodecs) names += std::string(names.empty() ? "" : ", ") + entry.name;
  *error = "unknown codec '" + name + "' (this library has " + names + ")";
  return nullptr;
}

}  // namespace mxgc
