// The few-row int8 product of kernels/gemm/int8_gemm.h: its layout and its
// plain reference (the AVX-512 VNNI tiles: int8_gemm_vnni.cpp).
#include "kernels/gemm/int8_gemm.h"

#include <cmath>
#include <cstring>

#include "kernels/gemm/gemm_tiles.h"

namespace attn::detail {

using gemm_tiles::kAhead;
using gemm_tiles::kGroup;

std::vector<std::int8_t> pack_int8_gemm(const std::int8_t* wq, std::int64_t N, std::int64_t K) {
  const std::int64_t groups = (N + kGroup - 1) / kGroup, k4 = (K + 3) / 4;
  std::vector<std::int8_t> p(static_cast<std::size_t>((groups * k4 + kAhead) * kGroup * 4), 0);
  for (std::int64_t n = 0; n < N; ++n) {
    const std::int64_t g = n / kGroup, c = n % kGroup;
    for (std::int64_t k = 0; k < K; ++k)
      p[static_cast<std::size_t>(((g * k4 + k / 4) * kGroup + c) * 4 + k % 4)] = wq[n * K + k];
  }
  return p;
}

void int8_gemm_reference(const Int8GemmArgs& a, const std::int8_t* wq) {
  int8_reference_rows(a.x, a.ldx, wq, a.comp, a.sx, a.sw, a.bias, a.M, a.N, a.K, a.y);
}

}  // namespace attn::detail
