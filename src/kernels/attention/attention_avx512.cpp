// The attention kernels (attention_table.h) for AVX-512: 16 floats per
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

#include "kernels/attention/attention_kernel.h"
#include "kernels/philox/philox_inline.h"
#include "kernels/target.h"

#if defined(__x86_64__) && defined(__GNUC__)
ATTN_TARGET_BEGIN_AVX512("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")

#include "kernels/attention/attention_table.h"
#include "kernels/vec/vec_avx512.h"

namespace attn::detail {

const AttnKernelTable<float>* attention_kernels_avx512() {
  static const AttnKernelTable<float> table =
      make_attention_kernels<VecAvx512>("avx512", AttnTiles{64, 96, 48, 96});
  return &table;
}

}  // namespace attn::detail

ATTN_TARGET_END_AVX512
#else
namespace attn::detail {
const AttnKernelTable<float>* attention_kernels_avx512() { return nullptr; }
}  // namespace attn::detail
#endif
