// The AVX2 kernels of kernels/row_stats/row_stats.h: row_stats_kernel.h over
// VecAvx2 (its exp: exp_simd's own steps, 8 at a time). Compiled for AVX2 and
// FMA whatever the build targets and called only where the CPU has it.
#include <immintrin.h>  // here, for the baseline target; then the kernels' pragma

#include <cmath>
#include <cstdint>

#include "kernels/row_stats/row_stats.h"
#include "kernels/target.h"

ATTN_TARGET_BEGIN("avx2,fma")
#include "kernels/row_stats/row_stats_kernel.h"
#include "kernels/vec/vec_avx2.h"
ATTN_ROW_STATS_KERNELS(avx2, VecAvx2)
ATTN_TARGET_END

ATTN_ROW_STATS_ENTRIES(avx2)
