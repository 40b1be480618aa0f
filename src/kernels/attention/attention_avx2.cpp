// The attention kernels (attention_table.h) for AVX2 + FMA, on the vector
// type of vec_avx2.h. Compiled for AVX2 whatever the build's
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

#include "kernels/attention/attention_kernel.h"
#include "kernels/philox/philox_inline.h"
#include "kernels/target.h"

#if defined(__x86_64__) && defined(__GNUC__)
ATTN_TARGET_BEGIN("avx2,fma")

#include "kernels/attention/attention_table.h"
#include "kernels/vec/vec_avx2.h"

namespace attn::detail {

const AttnKernelTable<float>* attention_kernels_avx2() {
  static const AttnKernelTable<float> table =
      make_attention_kernels<VecAvx2>("avx2", AttnTiles{32, 96});
  return &table;
}

}  // namespace attn::detail

ATTN_TARGET_END
#else
namespace attn::detail {
const AttnKernelTable<float>* attention_kernels_avx2() { return nullptr; }
}  // namespace attn::detail
#endif
