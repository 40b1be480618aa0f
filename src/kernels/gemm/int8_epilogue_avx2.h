// src/kernels/gemm/int8_epilogue_avx2.h — internal: the way out of the int8
// kernels on 256-bit registers (int8_gemm_avx2.cpp, int8_gemm_avx_vnni.cpp):
// a block of rows x 16 columns, 8 int32 sums a register, into floats as
// int8_gemm_reference computes them, fma(float(acc - comp), sx * sw, b).
// Included inside an AVX2 target region (kernels/target.h): internal
// linkage, no standard-library templates.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm/int8_gemm.h"

namespace attn::detail {
namespace {

// Lanes [0, n) of 8 (the columns that exist), as a maskload/maskstore mask.
__attribute__((target("avx2,fma"), always_inline)) inline __m256i int8_first_lanes8(
    std::int64_t n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int c = n >= 8 ? 8 : n <= 0 ? 0 : static_cast<int>(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), lane);
}

// What turns 16 columns' sums into floats: comp, sw, the bias (zeros
// without one), the masks of the columns that exist.
struct Epilogue8 {
  __m256 slo, shi, blo, bhi;
  __m256i clo, chi, mlo, mhi;
  bool full, hi_cols;
};

// Columns [n0, n0 + 16) of a's product (fewer where N ends first).
__attribute__((target("avx2,fma"), always_inline)) inline Epilogue8 int8_epilogue8(
    const Int8GemmArgs& a, std::int64_t n0) {
  const std::int64_t cols = a.N - n0;
  Epilogue8 e;
  e.full = cols >= 16;
  e.hi_cols = cols > 8;
  e.mlo = int8_first_lanes8(cols);
  e.mhi = int8_first_lanes8(cols - 8);
  e.clo = _mm256_maskload_epi32(a.comp + n0, e.mlo);
  e.chi = _mm256_maskload_epi32(a.comp + n0 + 8, e.mhi);
  e.slo = _mm256_maskload_ps(a.sw + n0, e.mlo);
  e.shi = _mm256_maskload_ps(a.sw + n0 + 8, e.mhi);
  e.blo = a.bias ? _mm256_maskload_ps(a.bias + n0, e.mlo) : _mm256_setzero_ps();
  e.bhi = a.bias ? _mm256_maskload_ps(a.bias + n0 + 8, e.mhi) : _mm256_setzero_ps();
  return e;
}

// One register of 8 sums on its way out: the compensation taken off, then
// fma(float(acc), sx * sw, b) (b 0 without a bias).
__attribute__((target("avx2,fma"), always_inline)) inline void int8_store8(
    float* y, __m256i acc, __m256i comp, __m256 vsx, __m256 s, __m256 b, __m256i mask, bool full) {
  const __m256 v =
      _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc, comp)), _mm256_mul_ps(vsx, s), b);
  if (full)
    _mm256_storeu_ps(y, v);
  else
    _mm256_maskstore_ps(y, mask, v);
}

// Row m's 16 columns (its sums lo, hi) at y[m, n0].
__attribute__((target("avx2,fma"), always_inline)) inline void int8_store_row16(
    const Int8GemmArgs& a, std::int64_t m, std::int64_t n0, __m256i lo, __m256i hi,
    const Epilogue8& e) {
  const __m256 vsx = _mm256_set1_ps(a.sx[m]);
  float* y = a.y + m * a.N + n0;
  int8_store8(y, lo, e.clo, vsx, e.slo, e.blo, e.mlo, e.full);
  if (e.hi_cols) int8_store8(y + 8, hi, e.chi, vsx, e.shi, e.bhi, e.mhi, e.full);
}

}  // namespace
}  // namespace attn::detail
