// Layer-wise sparsification with an adaptive threshold: the kernels behind the 'layerwise_topk' codec
// (the wire format is in docs/wire_format.md).
//
// Per step, for one layer (or one chunk of it) of n values:
//   v = momentum * v + grad (with momentum > 0: DGC's momentum correction), a = residual + v (or + grad);
//   the threshold is the exact k-th largest |a| (k = topk_target(n, density)) on the first step and
//   every reset_every steps.  Selected: the nonzero a with |a| >= threshold; if more than `capacity`
//   pass, the capacity largest |a| (ties: lower index first).  They are sent and cleared from the
//   residual (and from v); the rest stays.  The next step's threshold: after a step where more than
//   capacity passed, the exact k-th largest |a| of that step (found among its candidates anyway); after
//   one that selected fewer than (1 - delta) k, times (1 - gamma); else unchanged.
//   A non-finite a is dropped: the residual and v keep their previous values.
//
// State (float32 words): [residual: n][v: n, only with momentum][threshold][steps (int32 bits)].
// Payload (float32 words, 1 + 2 * capacity): [count c (int32 bits)][c indices, ascending, int32 bits]
//   [c values][zeros].  Only the first 1 + 2c words carry information.
//
// No MXNet dependency; src_cpp/mxnet_ops.cc wraps these as MXNet operators.  The entry points below
// run the copy of topk_sparsifier.cc built for this CPU (src_cpp/dispatch.cc).
#pragma once

#include <cstdint>
#include <string>

namespace mxgc {

struct TopkParams {
  double density;    // target fraction of values sent, in (0, 1]
  float momentum;    // DGC momentum correction factor in [0, 1); 0 = off
  float gamma;       // threshold adaptation rate, > 0
  float delta;       // tolerance band around k, in [0, 1)
  int reset_every;   // exact top-k every this many steps (>= 1)
  int64_t capacity;  // most values one payload holds (>= 1)
};

// k: how many values a step aims to send; an encode's capacity must be at least k.
inline int64_t topk_target(int64_t n, double density) {
  const int64_t k = static_cast<int64_t>(density * n + 0.5);
  return k < 1 ? 1 : (k > n ? n : k);
}
inline int64_t topk_state_words(int64_t n, bool momentum) { return n * (momentum ? 2 : 1) + 2; }
inline int64_t topk_payload_words(int64_t capacity) { return 1 + 2 * capacity; }

// Encodes grad (n values) into payload (topk_payload_words(p.capacity) words); updates state in place.
// Returns the number of non-finite (NaN, inf) values of grad, counted in the same pass.
int64_t topk_encode(const float* grad, float* state, int64_t n, const TopkParams& p, float* payload);

// Packs every nonzero of values (n) into a payload of the same format, losslessly (a server's sum of
// workers' payloads, for a sparse pull).  Returns false, with a message in *error, if more than capacity
// values are nonzero; payload is then untouched.
bool sparse_pack(const float* values, int64_t n, int64_t capacity, float* payload, std::string* error);

// Scatters a payload into out (n values): out = values, or out = acc + values when acc is given (out may
// be acc).  Returns false, with a message in *error, for a payload that is not a valid one for n values
// and this capacity (count out of range, an index out of range or not ascending); out is then untouched.
bool topk_decode(const float* payload, int64_t capacity, const float* acc, float* out, int64_t n,
                 std::string* error);

}  // namespace mxgc
