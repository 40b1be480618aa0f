// The int8 product of kernels/gemm/int8_gemm.h on AVX2, in 7 bits (vpmaddubsw
// on u = xq + 64 and Wq, two steps' pairs added in int16 before vpmaddwd
// widens them; int8_gemm_reference's formula, exact). The kernel is
// compiled for AVX2 and FMA whatever the build targets and called only
// where the CPU has them.
//
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/gemm/gemm_tiles.h"
#include "kernels/gemm/int8_gemm.h"
#include "kernels/target.h"

namespace attn::detail {

using gemm_tiles::kGroup;

bool int8_gemm_avx2_cpu() {
  return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
}

}  // namespace attn::detail

ATTN_TARGET_BEGIN("avx2,fma")
#include "kernels/gemm/int8_epilogue_avx2.h"

namespace attn::detail {
namespace {

// No standard-library templates in here: their instances, compiled for
// AVX2, could be the ones the linker keeps for every caller.

// acc += the sums of 8 products of each column: the row's 4 bytes of step
// s (xa) and of step s + 1 (xb), broadcast, times the weights of the two
// steps (wa, wb: s8), each pair into int16 (vpmaddubsw: at most
// 2 x 127 x 63 = 16002 with 7-bit operands), the two steps' pairs added in
// int16 (vpaddw: at most 32004, no wrap), then pairs of those into int32
// (vpmaddwd by ones), in place. The instructions by hand: with the
// intrinsics, GCC 12 added the sums into a new register and moved them back
// at each step, and kept some on the stack.
__attribute__((target("avx2,fma"), always_inline)) inline void dot8(__m256i& acc, __m256i xa,
                                                                    __m256i xb, __m256i wa,
                                                                    __m256i wb, __m256i ones) {
  __m256i t, u;
  asm("vpmaddubsw %[wa], %[xa], %[t]\n\t"
      "vpmaddubsw %[wb], %[xb], %[u]\n\t"
      "vpaddw %[u], %[t], %[t]\n\t"
      "vpmaddwd %[ones], %[t], %[t]\n\t"
      "vpaddd %[t], %[acc], %[acc]"
      : [acc] "+x"(acc), [t] "=&x"(t), [u] "=&x"(u)
      : [xa] "x"(xa), [xb] "x"(xb), [wa] "x"(wa), [wb] "x"(wb), [ones] "x"(ones));
}

// The 4 bytes at p in every lane (vbroadcastss: a load alone; the bytes
// moved through a general register cost two shuffles on one port).
__attribute__((target("avx2,fma"), always_inline)) inline __m256i broadcast4(
    const std::uint8_t* p) {
  return _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(p)));
}

// acc += the sums of the 4 products of one step (the last of an odd count).
__attribute__((target("avx2,fma"), always_inline)) inline void dot4(__m256i& acc, __m256i x,
                                                                    __m256i w, __m256i ones) {
  __m256i t;
  asm("vpmaddubsw %[w], %[x], %[t]\n\t"
      "vpmaddwd %[ones], %[t], %[t]\n\t"
      "vpaddd %[t], %[acc], %[acc]"
      : [acc] "+x"(acc), [t] "=&x"(t)
      : [x] "x"(x), [w] "x"(w), [ones] "x"(ones));
}

// One row's step: its 4 bytes broadcast, two dot4. Named sums, not an
// array (as in kernels/gemm/int8_gemm.cpp: GCC kept an array's sums on the stack).
// One row's two steps: its 2 x 4 bytes broadcast, times the two steps'
// weights of the 16 columns (4 registers; with the 8 sums, 2 broadcasts,
// 2 temporaries and the ones, one register more than AVX2 has: GCC keeps
// one sum on the stack, and that is still 1.1x faster than the weights
// of 8 columns read from memory at each row). Then a lone step.
#define ATTN_INT8_ROW_STEPS16(r)                              \
  if constexpr (S > r) {                                      \
    const __m256i xa = broadcast4(x + (r)*a.ldx + 4 * s);     \
    const __m256i xb = broadcast4(x + (r)*a.ldx + 4 * s + 4); \
    dot8(lo##r, xa, xb, wa, wb, ones);                        \
    dot8(hi##r, xa, xb, wc, wd, ones);                        \
  }
#define ATTN_INT8_ROW_STEP8(r)                              \
  if constexpr (S > r) {                                    \
    std::int32_t four;                                      \
    std::memcpy(&four, x + (r)*a.ldx + 4 * s, sizeof four); \
    const __m256i xb = _mm256_set1_epi32(four);             \
    dot4(lo##r, xb, w0, ones);                              \
    dot4(hi##r, xb, w1, ones);                              \
  }
#define ATTN_INT8_ROW_STORE8(r) \
  if constexpr (S > r) int8_store_row16(a, m0 + (r), n0, lo##r, hi##r, e);

struct Int8Tiles256 {
  static constexpr std::int64_t kPerStep = 4;
  // Rows [m0, m0 + S) (S <= 4) of columns [32 g + 16 h, 32 g + 16 h + 16):
  // 8 int32 sums in registers over all of K, with the step's two registers
  // of |Wq|, two of masks, the ones and a broadcast, while the 64
  // bytes at pf + 128 s + 64 h are brought into L1 at each step s (the
  // weights a later tile reads, as the VNNI kernel does, half a step each).
  template <int S>
  __attribute__((target("avx2,fma"), noinline)) static void block(const Int8GemmArgs& a,
                                                                  std::int64_t m0, std::int64_t g,
                                                                  std::int64_t h,
                                                                  const std::int8_t* pf) {
    static_assert(S >= 1 && S <= 4);
    const std::int64_t k4 = (a.K + 3) / 4;
    const std::int8_t* w = a.packed + g * k4 * kGroup * 4 + 32 * 2 * h;
    const std::int8_t* f = pf + 64 * h;
    const std::uint8_t* x = a.x + m0 * a.ldx;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i z = _mm256_setzero_si256();
    ATTN_GEMM_ROWS_4(ATTN_GEMM_ZERO_SUMS)
    std::int64_t s = 0;
    for (; s + 2 <= k4; s += 2) {
      const __m256i wa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + s * 128));
      const __m256i wb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + s * 128 + 128));
      _mm_prefetch(reinterpret_cast<const char*>(f + s * 128), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(f + s * 128 + 128), _MM_HINT_T0);
      const __m256i wc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + s * 128 + 32));
      const __m256i wd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + s * 128 + 160));
      ATTN_GEMM_ROWS_4(ATTN_INT8_ROW_STEPS16)
    }
    if (s < k4) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + s * 128));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + s * 128 + 32));
      _mm_prefetch(reinterpret_cast<const char*>(f + s * 128), _MM_HINT_T0);
      ATTN_GEMM_ROWS_4(ATTN_INT8_ROW_STEP8)
    }
    const std::int64_t n0 = g * kGroup + 16 * h;
    const Epilogue8 e = int8_epilogue8(a, n0);
    ATTN_GEMM_ROWS_4(ATTN_INT8_ROW_STORE8)
  }

  // The tile of gemm_tiles (R <= 12 rows, group g): blocks of equal height
  // (at most 4 rows), the group's first 16 columns, then its last 16 where
  // N reaches them.
  template <int R>
  __attribute__((target("avx2,fma"), noinline)) static void tile(const Int8GemmArgs& a,
                                                                 std::int64_t m0, std::int64_t g,
                                                                 const std::int8_t* pf) {
    static_assert(R >= 1 && R <= gemm_tiles::kTileRows);
    constexpr int kBlocks = (R + 3) / 4;
    constexpr int kFirst = (R + kBlocks - 1) / kBlocks;
    constexpr int kSecond = kBlocks > 1 ? (R - kFirst + kBlocks - 2) / (kBlocks - 1) : 0;
    constexpr int kThird = R - kFirst - kSecond;
    static_assert(kFirst <= 4 && kSecond <= 4 && kThird >= 0 && kThird <= 4);
    const std::int64_t halves = a.N - g * kGroup > 16 ? 2 : 1;
    for (std::int64_t h = 0; h < halves; ++h) {
      block<kFirst>(a, m0, g, h, pf);
      if constexpr (kSecond > 0) block<kSecond>(a, m0 + kFirst, g, h, pf);
      if constexpr (kThird > 0) block<kThird>(a, m0 + kFirst + kSecond, g, h, pf);
    }
  }
};

}  // namespace
}  // namespace attn::detail

ATTN_TARGET_END

// The tiles in gemm_tiles' order (kernels/gemm/gemm_tiles.h).
ATTN_GEMM_ENTRY(int8_gemm_avx2, Int8GemmArgs, Int8Tiles256)
