// The bf16 product of kernels/gemm/bf16_gemm.h: where it runs and its layout
// (the AVX-512 BF16 tiles: bf16_gemm_avx512.cpp). Its test
// (tests/kernels/bf16_gemm_test.cpp) holds it to the product in double of
// the same bf16 values.
#include "kernels/gemm/bf16_gemm.h"

#include <cstring>

#include "kernels/gemm/f32_gemm.h"
#include "kernels/gemm/gemm_tiles.h"

namespace attn::detail {

using gemm_tiles::kAhead;
using gemm_tiles::kGroup;

bool bf16_cpu_has() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

bool bf16_gemm_supported() {
  // f32_gemm_isa() reads ATTN_ISA (avx2 or portable: no AVX-512 tiles).
  static const bool supported = bf16_cpu_has() && f32_gemm_isa() == F32GemmIsa::avx512;
  return supported;
}

std::int64_t bf16_gemm_packed_size(std::int64_t N, std::int64_t K) {
  return ((N + kGroup - 1) / kGroup * ((K + 1) / 2) + kAhead) * kGroup * 2;
}

void pack_bf16_gemm(const std::uint16_t* w, std::int64_t N, std::int64_t K, std::int64_t ldn,
                    std::int64_t ldk, std::uint16_t* packed) {
  const std::int64_t k2 = (K + 1) / 2;
  std::memset(packed, 0, static_cast<std::size_t>(bf16_gemm_packed_size(N, K)) * 2);
  for (std::int64_t n = 0; n < N; ++n) {
    const std::int64_t g = n / kGroup, c = n % kGroup;
    for (std::int64_t k = 0; k < K; ++k)
      packed[((g * k2 + k / 2) * kGroup + c) * 2 + k % 2] = w[n * ldn + k * ldk];
  }
}

}  // namespace attn::detail
