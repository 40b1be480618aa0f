// The Philox words of kernels/philox/philox.h in 16 lanes of AVX-512
// (philox_kernel.h over VecAvx512), compiled for AVX-512 F whatever the
// build targets and called only where the CPU has it.
#include <immintrin.h>

#include <cstdint>

#include "kernels/philox/philox.h"
#include "kernels/philox/philox_inline.h"
#include "kernels/target.h"

ATTN_TARGET_BEGIN_AVX512("avx512f")
#include "kernels/philox/philox_kernel.h"
#include "kernels/vec/vec_avx512.h"
ATTN_PHILOX_KERNELS(avx512, VecAvx512)
ATTN_TARGET_END_AVX512

ATTN_PHILOX_ENTRIES(avx512)
