// The attention kernels (attention_kernels.h) for AVX-512: 16 floats per
// register, a 6 x 4-register micro-kernel (24 accumulators of 32 registers).
// Compiled for AVX-512 whatever the build's -march; attention.cpp calls these
// only when the CPU has AVX-512F/DQ.
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
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")
#if defined(__clang__)  // clang ignores the GCC pragma (the fuzz build)
#pragma clang attribute push( \
    __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma"))), apply_to = function)
#endif
// GCC 12 warns inside its own AVX-512 intrinsics (_mm512_undefined_ps used as
// the pass-through of an unmasked operation; GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "ops/attention_kernels.h"
#include "ops/attention_vec_avx512.h"

namespace attn::detail {

const AttnKernelTable<float>* attention_kernels_avx512() {
  static const AttnKernelTable<float> table =
      make_attention_kernels<VecAvx512>("avx512", AttnTiles{64, 96, 48, 96});
  return &table;
}

}  // namespace attn::detail

#pragma GCC diagnostic pop
#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options
#else
namespace attn::detail {
const AttnKernelTable<float>* attention_kernels_avx512() { return nullptr; }
}  // namespace attn::detail
#endif
