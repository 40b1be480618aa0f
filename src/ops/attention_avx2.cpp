// The attention kernels (attention_kernels.h) for AVX2 + FMA, on the vector
// type of attention_vec_avx2.h. Compiled for AVX2 whatever the build's
// -march; attention.cpp calls these only when the CPU has AVX2 and FMA.
//
// Headers first, for the baseline target; then the target pragma.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "ops/attention_kernel.h"
#include "ops/philox_inline.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#if defined(__clang__)  // clang ignores the GCC pragma (the fuzz build)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#endif

#include "ops/attention_kernels.h"
#include "ops/attention_vec_avx2.h"

namespace attn::detail {

const AttnKernelTable<float>* attention_kernels_avx2() {
  static const AttnKernelTable<float> table =
      make_attention_kernels<VecAvx2>("avx2", AttnTiles{32, 96});
  return &table;
}

}  // namespace attn::detail

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
#else
namespace attn::detail {
const AttnKernelTable<float>* attention_kernels_avx2() { return nullptr; }
}  // namespace attn::detail
#endif
