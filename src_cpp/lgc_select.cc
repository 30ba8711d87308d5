// Learned gradient compression's worker pass (mxnet_gc/lgc/vectors.py, mxnet_gc/lgc/coder.py): the
// accumulation of a step's gradient and, from the same pass, the leader's and the innovation's
// selections, the k largest |values|: exact, in the order largest first, ties to the lower index, NaN
// below every number (numpy's stable argsort of -|values| gives the same list).
//
// Magnitudes are compared as IEEE bit patterns (monotonic for non-negative floats).  One pass keeps the
// candidates that beat a floor in a buffer of about 2k; when the buffer is full, nth_element keeps its
// best k and the floor rises to the k-th (a run of 64 values whose largest cannot beat the floor is
// skipped whole).  The buffer fills at most every k new candidates, so the pass is O(n) whatever the
// order of the values, without a copy of the array: against numpy's argpartition of the whole array
// plus a sort.
//
// A worker's LGC accumulation (mxgc_lgc_accumulate) feeds both selections from its own pass over the
// accumulator, so that a step reads the accumulator once; from kParallelMin values each of mxgc's threads
// takes a contiguous range with selectors of its own, and their best k are merged (the same list).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "codec.h"  // mxgc::num_threads
#include "dgc_momentum.h"

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

using Entry = std::pair<int32_t, int64_t>;  // (key, index)

// a before b in the output: larger key, then lower index.
inline bool before(const Entry& a, const Entry& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); }

// The k largest of a stream of (key, index), fed in index order a block at a time (``add_block``);
// ``finish`` writes them.
class TopSelector {
 public:
  explicit TopSelector(int64_t k) : k_(k), capacity_(k + std::max<int64_t>(k, 1024)) {
    kept_.reserve(std::min<int64_t>(capacity_, 1 << 16));
  }

  // keys[0..m): the keys of indices first..first + m.
  void add_block(const int32_t* keys, int64_t m, int64_t first) {
    if (k_ == 0) return;
    for (int64_t c = 0; c < m; c += kRun) {  // (a run's largest, vectorized, skips most runs whole)
      const int64_t end = std::min(m, c + kRun);
      int32_t largest = -1;
      for (int64_t j = c; j < end; ++j) largest = std::max(largest, keys[j]);
      if (largest <= floor_) continue;
      for (int64_t j = c; j < end; ++j) {
        if (keys[j] <= floor_) continue;  // (an equal key comes later: it loses the tie)
        kept_.push_back({keys[j], first + j});
        if (static_cast<int64_t>(kept_.size()) == capacity_) shrink();
      }
    }
  }

  // Writes the k indices, largest first, of all that ``parts`` (selectors of one k, fed disjoint ranges
  // of indices that hold k values together) were fed: each part's best k hold them.
  static void finish(std::vector<TopSelector>& parts, int64_t* out) {
    TopSelector& all = parts[0];
    if (all.k_ == 0) return;
    for (size_t p = 1; p < parts.size(); ++p) {
      parts[p].shrink();
      all.kept_.insert(all.kept_.end(), parts[p].kept_.begin(), parts[p].kept_.end());
    }
    all.shrink();
    std::sort(all.kept_.begin(), all.kept_.end(), before);
    for (int64_t j = 0; j < all.k_; ++j) out[j] = all.kept_[j].second;
  }

 private:
  // Keeps the best k candidates; the floor becomes the last of them.
  void shrink() {
    if (static_cast<int64_t>(kept_.size()) < k_) return;
    std::nth_element(kept_.begin(), kept_.begin() + (k_ - 1), kept_.end(), before);
    kept_.resize(k_);
    floor_ = kept_[k_ - 1].first;
  }

  static constexpr int64_t kRun = 64;

  int64_t k_, capacity_;
  int32_t floor_ = -2;  // a key must beat this to be kept (below every key, NaN's -1 too, until k are kept)
  std::vector<Entry> kept_;
};

constexpr int64_t kBlock = 2048;  // values per block: computed (vectorized), then selected from L1
constexpr int64_t kParallelMin = 1 << 18;  // from this many values the accumulation runs on mxgc's threads

}  // namespace

extern "C" {

// Writes into out the indices of the k largest |values[0..n)|, largest first (ties: lower index first;
// NaN last).  Returns 0, or -1 (nothing written) unless 0 <= k <= n.
int mxgc_top_indices(const float* values, int64_t n, int64_t k, int64_t* out) {
  if (k < 0 || k > n) return -1;
  std::vector<TopSelector> top(1, TopSelector(k));
  int32_t keys[kBlock];
  for (int64_t b = 0; k > 0 && b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    for (int64_t j = 0; j < m; ++j) keys[j] = magnitude_key(values[b + j]);
    top[0].add_block(keys, m, b);
  }
  TopSelector::finish(top, out);
  return 0;
}

// One step of a worker's LGC accumulation over a tensor's n values, in one pass: DGC's step
// (dgc_momentum.h) with momentum (``velocity`` not null: velocity = momentum * velocity + g, v +=
// velocity) or without (v += g); where the new v is not finite (a non-finite g, an overflow) both keep
// their values.  The same pass selects
// the k_lead and k_innov largest |v| after the step (as mxgc_top_indices; a count of 0 selects none)
// into lead and innov, writes the largest finite |v| to *largest and the number of non-finite g to
// *nonfinite (the store's count of them, from this pass).  Returns 0, or -1 (nothing changed) unless
// both counts are within 0..n.
int mxgc_lgc_accumulate(float* v, float* velocity, const float* g, int64_t n, float momentum, int64_t k_lead,
                        int64_t* lead, int64_t k_innov, int64_t* innov, double* largest, int64_t* nonfinite) {
  if (k_lead < 0 || k_lead > n || k_innov < 0 || k_innov > n) return -1;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const int64_t wanted = n >= kParallelMin ? mxgc::num_threads() : 1;
  const int threads = static_cast<int>(std::max<int64_t>(1, std::min(wanted, blocks)));
  std::vector<TopSelector> first(threads, TopSelector(k_lead)), second(threads, TopSelector(k_innov));
  std::vector<int32_t> top(threads, 0);  // the largest finite key of each thread's range
  std::vector<int64_t> dropped(threads, 0);  // the non-finite g of each thread's range
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), used = omp_get_num_threads();
    int64_t bad = 0;
    for (int64_t b = blocks * t / used * kBlock; b < std::min(n, blocks * (t + 1) / used * kBlock); b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      int32_t keys[kBlock];
      float* __restrict vb = v + b;
      const float* __restrict gb = g + b;
      if (velocity) {
        float* __restrict ub = velocity + b;
        for (int64_t j = 0; j < m; ++j) {
          float uj = ub[j], vj = vb[j];
          mxgc::dgc_step<true, float, int32_t>(gb[j], uj, vj, momentum);
          ub[j] = uj;
          vb[j] = vj;
          bad += !finite(gb[j]);
        }
      } else {
        for (int64_t j = 0; j < m; ++j) {
          float unused = 0, vj = vb[j];
          mxgc::dgc_step<false, float, int32_t>(gb[j], unused, vj, 0.0f);
          vb[j] = vj;
          bad += !finite(gb[j]);
        }
      }
      int32_t largest = top[t];
      for (int64_t j = 0; j < m; ++j) {
        const int32_t key = magnitude_key(vb[j]);
        keys[j] = key;
        largest = std::max(largest, key < kInfKey ? key : 0);
      }
      top[t] = largest;
      first[t].add_block(keys, m, b);
      second[t].add_block(keys, m, b);
    }
    dropped[t] = bad;
  }
  TopSelector::finish(first, lead);
  TopSelector::finish(second, innov);
  const int32_t top_key = *std::max_element(top.begin(), top.end());
  float largest_value;
  std::memcpy(&largest_value, &top_key, sizeof top_key);
  *largest = largest_value;
  *nonfinite = std::accumulate(dropped.begin(), dropped.end(), int64_t{0});
  return 0;
}

// One step of the velocities LGC pushes dense, over n values: velocity = momentum * velocity + g by
// DGC's step with no accumulator (where the new velocity is not finite it keeps its value).  Returns
// the number of non-finite g.
int64_t mxgc_dgc_velocity(float* velocity, const float* g, int64_t n, float momentum) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    float none = 0;
    mxgc::dgc_step<true, float, int32_t>(g[i], velocity[i], none, momentum);
    bad += !finite(g[i]);
  }
  return bad;
}

}  // extern "C"
