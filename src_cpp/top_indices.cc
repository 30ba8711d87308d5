// The k largest |values| of an array, for learned gradient compression's leader and innovation
// selections (mxnet_gc/lgc/vectors.py, mxnet_gc/lgc/coder.py): exact, in the order largest first, ties to
// the lower index, NaN below every number (numpy's stable argsort of -|values| gives the same list).
//
// Magnitudes are compared as IEEE bit patterns (monotonic for non-negative floats): a small k keeps
// the best k in a heap over one pass; a larger k counts the patterns' top 12 bits (exponent and 4
// mantissa bits) in a histogram that stays in L1, which tells the bucket holding the k-th largest, and a
// second pass collects that bucket and those above it.  Either way O(n) without a copy of the array,
// against numpy's argpartition of the whole array plus a sort.
//
// A worker's LGC accumulation (mxgc_lgc_accumulate) feeds the selections from its own pass over the
// accumulator, so that a step reads the accumulator once (twice for a leader's large k).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <queue>
#include <utility>
#include <vector>

namespace {

// |v| as an integer ordered like the magnitude; NaN: -1, below every number.
inline int32_t magnitude_key(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits &= 0x7fffffffu;
  return bits > 0x7f800000u ? -1 : static_cast<int32_t>(bits);
}

constexpr int64_t kHeapMax = 64;  // up to this k, one pass with a heap of the best k so far
constexpr int kBucketShift = 19;  // a key's bucket: its top 12 bits (keys are below 2^31)
constexpr int kBuckets = 1 << (31 - kBucketShift);

using Entry = std::pair<int32_t, int64_t>;  // (key, index)

// a before b in the output: larger key, then lower index.
inline bool before(const Entry& a, const Entry& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); }

inline int bucket(int32_t key) { return key < 0 ? 0 : (key >> kBucketShift) + 1; }  // 0: NaN

// The k largest of a stream of (key, index), fed in index order by ``add``; ``finish`` writes them.
class TopSelector {
 public:
  explicit TopSelector(int64_t k) : k_(k), kept_(&before) {
    if (k_ > kHeapMax) count_.assign(kBuckets + 1, 0);
  }

  inline void add(int32_t key, int64_t i) {
    if (k_ == 0) return;
    if (k_ > kHeapMax) {
      ++count_[bucket(key)];
    } else if (static_cast<int64_t>(kept_.size()) < k_) {
      kept_.push({key, i});
    } else if (key > kept_.top().first) {  // (an equal key comes later: it loses the tie)
      kept_.pop();
      kept_.push({key, i});
    }
  }

  // Writes the k indices, largest first; ``values`` (the n values fed) for the histogram's second pass.
  void finish(const float* values, int64_t n, int64_t* out) {
    if (k_ == 0) return;
    std::vector<Entry> chosen;
    chosen.reserve(k_);
    if (k_ <= kHeapMax) {
      for (; !kept_.empty(); kept_.pop()) chosen.push_back(kept_.top());
    } else {
      int cut = kBuckets;  // the bucket (+1) holding the k-th largest: every key of buckets above is in
      for (int64_t above = 0; above + count_[cut] < k_; --cut) above += count_[cut];
      for (int64_t i = 0; i < n; ++i) {
        const int32_t key = magnitude_key(values[i]);
        if (bucket(key) >= cut) chosen.push_back({key, i});
      }
      std::nth_element(chosen.begin(), chosen.begin() + (k_ - 1), chosen.end(), before);
      chosen.resize(k_);
    }
    std::sort(chosen.begin(), chosen.end(), before);
    for (int64_t j = 0; j < k_; ++j) out[j] = chosen[j].second;
  }

 private:
  int64_t k_;
  std::vector<int64_t> count_;  // count_[b + 1]: keys in bucket b; count_[0]: NaN
  std::priority_queue<Entry, std::vector<Entry>, decltype(&before)> kept_;  // top: the first to drop
};

}  // namespace

extern "C" {

// Writes into out the indices of the k largest |values[0..n)|, largest first (ties: lower index first;
// NaN last).  Returns 0, or -1 (nothing written) unless 0 <= k <= n.
int mxgc_top_indices(const float* values, int64_t n, int64_t k, int64_t* out) {
  if (k < 0 || k > n) return -1;
  TopSelector top(k);
  for (int64_t i = 0; i < n; ++i) top.add(magnitude_key(values[i]), i);
  top.finish(values, n, out);
  return 0;
}

// One step of a worker's LGC accumulation over a tensor's n values, in one pass: with momentum
// (``velocity`` not null) velocity = momentum * velocity + g and v += velocity, else v += g; a
// non-finite g leaves both unchanged there (the codecs drop such values too).  The same pass selects
// the k_lead and k_innov largest |v| after the step (as mxgc_top_indices; a count of 0 selects none)
// into lead and innov, and writes the largest finite |v| to *largest.  Returns 0, or -1 (nothing
// changed) unless both counts are within 0..n.
int mxgc_lgc_accumulate(float* v, float* velocity, const float* g, int64_t n, float momentum, int64_t k_lead,
                        int64_t* lead, int64_t k_innov, int64_t* innov, double* largest) {
  if (k_lead < 0 || k_lead > n || k_innov < 0 || k_innov > n) return -1;
  TopSelector first(k_lead), second(k_innov);
  float top = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    if (std::isfinite(gi)) {
      if (velocity) {
        const float u = momentum * velocity[i];  // (two roundings, as numpy's u *= m; u += g)
        velocity[i] = u + gi;
        v[i] += velocity[i];
      } else {
        v[i] += gi;
      }
    }
    const int32_t key = magnitude_key(v[i]);
    first.add(key, i);
    second.add(key, i);
    const float a = std::fabs(v[i]);
    if (a > top && a <= 3.402823466e38f) top = a;
  }
  first.finish(v, n, lead);
  second.finish(v, n, innov);
  *largest = top;
  return 0;
}

}  // extern "C"
