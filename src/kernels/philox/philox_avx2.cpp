// The Philox words of kernels/philox/philox.h in 8 lanes of AVX2
// (philox_kernel.h over VecAvx2), compiled for AVX2 whatever the build
// targets and called only where the CPU has it. (Two groups of 8 side by
// side, their rounds interleaved, were no faster on a Zen 1: the rounds are
// bound by the vector pipes, not by the products' latency.)
#include <immintrin.h>

#include <cstdint>

#include "kernels/philox/philox.h"
#include "kernels/philox/philox_inline.h"
#include "kernels/target.h"

ATTN_TARGET_BEGIN("avx2")
#include "kernels/philox/philox_kernel.h"
#include "kernels/vec/vec_avx2.h"
ATTN_PHILOX_KERNELS(avx2, VecAvx2)
ATTN_TARGET_END

ATTN_PHILOX_ENTRIES(avx2)
