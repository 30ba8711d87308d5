// The k largest |values| of an array, for learned gradient compression's leader and innovation
// selections (mxnet_gc/lgc/vectors.py): exact, in the order largest first, ties to the lower index,
// NaN below every number (numpy's stable argsort of -|values| gives the same list).
//
// Magnitudes are compared as IEEE bit patterns (monotonic for non-negative floats): a small k keeps
// the best k in a heap over one pass; a larger k counts the patterns' top 12 bits (exponent and 4
// mantissa bits) in a histogram that stays in L1, which tells the bucket holding the k-th largest, and a
// second pass collects that bucket and those above it.  Either way O(n) without a copy of the array,
// against numpy's argpartition of the whole array plus a sort.
#include <algorithm>
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

}  // namespace

extern "C" {

// Writes into out the indices of the k largest |values[0..n)|, largest first (ties: lower index first;
// NaN last).  Returns 0, or -1 (nothing written) unless 0 <= k <= n.
int mxgc_top_indices(const float* values, int64_t n, int64_t k, int64_t* out) {
  if (k < 0 || k > n) return -1;
  if (k == 0) return 0;
  std::vector<Entry> chosen;
  chosen.reserve(k);
  if (k <= kHeapMax) {
    // heap's top: the last of the kept entries in output order (the first to drop)
    std::priority_queue<Entry, std::vector<Entry>, decltype(&before)> kept(&before);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t key = magnitude_key(values[i]);
      if (static_cast<int64_t>(kept.size()) < k) {
        kept.push({key, i});
      } else if (key > kept.top().first) {  // (an equal key comes later: it loses the tie)
        kept.pop();
        kept.push({key, i});
      }
    }
    for (; !kept.empty(); kept.pop()) chosen.push_back(kept.top());
  } else {
    std::vector<int64_t> count(kBuckets + 1, 0);  // count[b + 1]: keys in bucket b; count[0]: NaN
    for (int64_t i = 0; i < n; ++i) {
      const int32_t key = magnitude_key(values[i]);
      ++count[key < 0 ? 0 : (key >> kBucketShift) + 1];
    }
    int cut = kBuckets;  // the bucket (+1) holding the k-th largest: every key of buckets above is in
    for (int64_t above = 0; above + count[cut] < k; --cut) above += count[cut];
    for (int64_t i = 0; i < n; ++i) {
      const int32_t key = magnitude_key(values[i]);
      if ((key < 0 ? 0 : (key >> kBucketShift) + 1) >= cut) chosen.push_back({key, i});
    }
    std::nth_element(chosen.begin(), chosen.begin() + (k - 1), chosen.end(), before);
    chosen.resize(k);
  }
  std::sort(chosen.begin(), chosen.end(), before);
  for (int64_t j = 0; j < k; ++j) out[j] = chosen[j].second;
  return 0;
}

}  // extern "C"
