// Picks the kernels (quantizers and the top-k sparsifier) built for the best instruction-set level this
// CPU supports, and holds the kernels' thread count.  mxgc_select_isa asks for a given level (Python
// passes MXNET_GC_ISA through it: mxnet_gc/config.py reads the environment, this file does not).  The
// kernels are compiled once per level (see setup.py); on CPUs other than x86-64 only the baseline copy
// exists.
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "threshold_quantizer.h"
#include "topk_sparsifier.h"

namespace mxgc {

// Each level's copy of every kernel of kernels.def.
#define MXGC_KERNEL(RETURN, NAME, PARAMS, ARGS) RETURN NAME PARAMS;
namespace baseline {
#include "kernels.def"
}
#ifdef MXGC_MULTI_ISA
namespace x86_64_v3 {
#include "kernels.def"
}
namespace x86_64_v4 {
#include "kernels.def"
}
#endif
#undef MXGC_KERNEL

namespace {

// One level's kernels: a pointer per entry of kernels.def, and the level's name.
struct Kernels {
#define MXGC_KERNEL(RETURN, NAME, PARAMS, ARGS) decltype(&baseline::NAME) NAME;
#include "kernels.def"
#undef MXGC_KERNEL
  const char* isa;
};

// The best level the CPU supports or, when ``wanted`` names one it supports, that one; nullptr otherwise.
const Kernels* pick_kernels(const std::string& wanted) {
#define MXGC_KERNEL(RETURN, NAME, PARAMS, ARGS) MXGC_TABLE_ISA::NAME,
  static const Kernels candidates[] = {
#ifdef MXGC_MULTI_ISA
#define MXGC_TABLE_ISA x86_64_v4
      {
#include "kernels.def"
          "x86-64-v4"},
#undef MXGC_TABLE_ISA
#define MXGC_TABLE_ISA x86_64_v3
      {
#include "kernels.def"
          "x86-64-v3"},
#undef MXGC_TABLE_ISA
#endif
#define MXGC_TABLE_ISA baseline
      {
#include "kernels.def"
          "baseline"},
#undef MXGC_TABLE_ISA
  };
#undef MXGC_KERNEL
#ifdef MXGC_MULTI_ISA
  __builtin_cpu_init();
  const bool supported[] = {static_cast<bool>(__builtin_cpu_supports("x86-64-v4")),
                            static_cast<bool>(__builtin_cpu_supports("x86-64-v3")), true};
#else
  const bool supported[] = {true};
#endif
  for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); ++i)
    if (supported[i] && (wanted.empty() || wanted == candidates[i].isa)) return &candidates[i];
  return nullptr;
}

const Kernels* g_kernels = pick_kernels("");

// The number of cores.  (Not omp_get_max_threads(): MXNet sets its own threads' OpenMP default to 1.)
int default_threads() { return omp_get_num_procs(); }

int g_num_threads = default_threads();

}  // namespace

int num_threads() { return g_num_threads; }

// The mxgc:: entry points (threshold_quantizer.h, topk_sparsifier.h): the copy in use.
#define MXGC_KERNEL(RETURN, NAME, PARAMS, ARGS) \
  RETURN NAME PARAMS { return g_kernels->NAME ARGS; }
#include "kernels.def"
#undef MXGC_KERNEL

}  // namespace mxgc

extern "C" {

// For Python (mxnet_gc.set_num_threads / kernel_info); n < 1 restores the default.
void mxgc_set_num_threads(int n) { mxgc::g_num_threads = n > 0 ? n : mxgc::default_threads(); }
int mxgc_get_num_threads() { return mxgc::num_threads(); }
const char* mxgc_kernel_isa() { return mxgc::g_kernels->isa; }

// Runs the kernels built for ``isa`` ("" for the best this CPU supports); returns -1, changing
// nothing, when the CPU cannot run it or it was not built.
int mxgc_select_isa(const char* isa) {
  const mxgc::Kernels* kernels = mxgc::pick_kernels(isa ? isa : "");
  if (kernels == nullptr) return -1;
  mxgc::g_kernels = kernels;
  return 0;
}

}  // extern "C"
