// The AVX-512 kernels of kernels/row_stats/row_stats.h: row_stats_kernel.h
// over VecAvx512 (its exp: Cephes' polynomial, 2^n by vscalefps). Compiled
// for AVX-512 F and DQ whatever the build targets and called only where the
// CPU has it.
#include <immintrin.h>  // here, for the baseline target; then the kernels' pragma

#include <cmath>
#include <cstdint>

#include "kernels/row_stats/row_stats.h"
#include "kernels/target.h"

ATTN_TARGET_BEGIN_AVX512("avx512f,avx512dq")
#include "kernels/row_stats/row_stats_kernel.h"
#include "kernels/vec/vec_avx512.h"
ATTN_ROW_STATS_KERNELS(avx512, VecAvx512)
ATTN_TARGET_END_AVX512

ATTN_ROW_STATS_ENTRIES(avx512)
