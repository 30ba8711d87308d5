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
#include <cstdint>
#include <cstring>
#include <queue>
#include <utility>
#include <vector>

namespace {

constexpr int32_t kInfKey = 0x7f800000;  // the key of infinity (keys above: NaN)

// |v| as an integer ordered like the magnitude; NaN: -1, below every number.
inline int32_t magnitude_key(float v) {
  int32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits &= 0x7fffffff;
  return bits > kInfKey ? -1 : bits;
}

// std::isfinite as a bit test (which the compiler vectorizes).
inline bool finite(float v) {
  int32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits & kInfKey) != kInfKey;
}

constexpr int64_t kHeapMax = 64;  // up to this k, one pass with a heap of the best k so far
constexpr int kBucketShift = 19;  // a key's bucket: its top 12 bits (keys are below 2^31)
constexpr int kBuckets = 1 << (31 - kBucketShift);

using Entry = std::pair<int32_t, int64_t>;  // (key, index)

// a before b in the output: larger key, then lower index.
inline bool before(const Entry& a, const Entry& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); }

inline int bucket(int32_t key) { return key < 0 ? 0 : (key >> kBucketShift) + 1; }  // 0: NaN

// The k largest of a stream of (key, index), fed in index order a block at a time (``add_block``);
// ``finish`` writes them.
class TopSelector {
 public:
  explicit TopSelector(int64_t k) : k_(k), kept_(&before) {
    if (k_ > kHeapMax) count_.assign(kSubHistograms * (kBuckets + 1), 0);
  }

  // keys[0..m): the keys of indices first..first + m.
  void add_block(const int32_t* keys, int64_t m, int64_t first) {
    if (k_ == 0) return;
    if (k_ > kHeapMax) {  // (interleaved histograms: a run of one bucket does not wait on one counter)
      int64_t j = 0;
      for (; j + kSubHistograms <= m; j += kSubHistograms)
        for (int h = 0; h < kSubHistograms; ++h) ++count_[h * (kBuckets + 1) + bucket(keys[j + h])];
      for (; j < m; ++j) ++count_[bucket(keys[j])];
    } else {
      int32_t largest = -1;  // (a block whose largest key cannot enter is skipped whole)
      for (int64_t j = 0; j < m; ++j) largest = std::max(largest, keys[j]);
      if (largest <= floor_) return;
      for (int64_t j = 0; j < m; ++j)
        if (keys[j] > floor_) keep(keys[j], first + j);
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
      std::vector<int64_t> count(kBuckets + 1, 0);
      for (int h = 0; h < kSubHistograms; ++h)
        for (int b = 0; b <= kBuckets; ++b) count[b] += count_[h * (kBuckets + 1) + b];
      int cut = kBuckets;  // the bucket (+1) holding the k-th largest: every key of buckets above is in
      for (int64_t above = 0; above + count[cut] < k_; --cut) above += count[cut];
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
  static constexpr int kSubHistograms = 4;

  // The heap path: keeps (key, i), which beats the kept entries' last (or fills the heap); an equal key
  // comes later and loses the tie.
  void keep(int32_t key, int64_t i) {
    if (static_cast<int64_t>(kept_.size()) == k_) kept_.pop();
    kept_.push({key, i});
    if (static_cast<int64_t>(kept_.size()) == k_) floor_ = kept_.top().first;
  }

  int64_t k_;
  int32_t floor_ = -2;  // a key must beat this to enter the heap (below every key until the heap is full)
  std::vector<uint32_t> count_;  // count_[h * (kBuckets + 1) + b + 1]: keys of bucket b in sub-histogram h
                                 // (b + 1 = 0: NaN); each counts at most 2^32 - 1
  std::priority_queue<Entry, std::vector<Entry>, decltype(&before)> kept_;  // top: the first to drop
};

constexpr int64_t kBlock = 2048;  // values per block: computed (vectorized), then selected from L1

}  // namespace

extern "C" {

// Writes into out the indices of the k largest |values[0..n)|, largest first (ties: lower index first;
// NaN last).  Returns 0, or -1 (nothing written) unless 0 <= k <= n.
int mxgc_top_indices(const float* values, int64_t n, int64_t k, int64_t* out) {
  if (k < 0 || k > n) return -1;
  TopSelector top(k);
  int32_t keys[kBlock];
  for (int64_t b = 0; k > 0 && b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    for (int64_t j = 0; j < m; ++j) keys[j] = magnitude_key(values[b + j]);
    top.add_block(keys, m, b);
  }
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
  int32_t keys[kBlock];
  int32_t top = 0;  // the largest finite key
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    float* __restrict vb = v + b;
    const float* __restrict gb = g + b;
    if (velocity) {
      float* __restrict ub = velocity + b;
      for (int64_t j = 0; j < m; ++j) {
        const float gj = gb[j], uj = ub[j], vj = vb[j];
        const bool ok = finite(gj);
        const float un = momentum * uj + gj;  // (two roundings: -ffp-contract=off, as numpy's)
        const float vn = vj + un;
        ub[j] = ok ? un : uj;
        vb[j] = ok ? vn : vj;
      }
    } else {
      for (int64_t j = 0; j < m; ++j) vb[j] = finite(gb[j]) ? vb[j] + gb[j] : vb[j];
    }
    for (int64_t j = 0; j < m; ++j) {
      const int32_t key = magnitude_key(vb[j]);
      keys[j] = key;
      top = std::max(top, key < kInfKey ? key : 0);
    }
    first.add_block(keys, m, b);
    second.add_block(keys, m, b);
  }
  first.finish(v, n, lead);
  second.finish(v, n, innov);
  float largest_value;
  std::memcpy(&largest_value, &top, sizeof top);
  *largest = largest_value;
  return 0;
}

}  // extern "C"
