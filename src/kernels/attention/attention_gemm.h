// src/kernels/attention/attention_gemm.h — internal: the tile products of the tiled
// attention kernels (attention_flash.h), and the packing of their operands.
// How these headers are compiled: attention_common.h.
//
// Every tile product is C (M x N) (+)= A (M x K) B (K x N) by one
// register-blocked micro-kernel (MR x NV registers of C held while K runs;
// V's kMR x kNV unless the product names its own): A read by scalar
// broadcasts at any strides, B and C by vectors along N. A and B hold V::Op
// where V names one (attention_avx512_bf16.cpp: 32-bit words of two bf16,
// multiplied pairwise into f32 sums), else T, like C. Two optional steps ride
// on the micro-kernel's pass over C (TileEpilogue): C scaled per column
// before it accumulates, and the largest value of each column after.
#pragma once

#include <type_traits>

#include "kernels/attention/attention_common.h"

namespace attn::detail {
namespace {

template <class V, class = void>
struct TileOperand {
  using type = typename V::T;
};
template <class V>
struct TileOperand<V, std::void_t<typename V::Op>> {
  using type = typename V::Op;
};

// Per-column steps on C (N lanes each, or null): with accumulation, C(:, n)
// is first multiplied by scale[n]; afterwards colmax[n] = max(colmax[n],
// C(:, n)) over the rows this product wrote.
template <class T>
struct TileEpilogue {
  const T* scale = nullptr;
  T* colmax = nullptr;
  TileEpilogue at(i64 n) const {
    return {scale ? scale + n : nullptr, colmax ? colmax + n : nullptr};
  }
};

// The register block of the forward's products (K short: the head dim, or
// a key tile): V's kFwdMR x kFwdNV where it names one, else kMR x kNV.
template <class V, class = void>
struct FwdBlock {
  static constexpr int mr = V::kMR, nv = V::kNV;
};
template <class V>
struct FwdBlock<V, std::void_t<decltype(V::kFwdMR)>> {
  static constexpr int mr = V::kFwdMR, nv = V::kFwdNV;
};

template <class V, int MR_ = V::kMR, int NV_ = V::kNV>
struct TileGemm {
  using T = typename V::T;
  using Op = typename TileOperand<V>::type;
  using R = typename V::R;
  using Epilogue = TileEpilogue<T>;
  static constexpr int W = V::W;
  static constexpr int MR = MR_;
  static constexpr int NV = NV_;

  // C (MRk x NVk*W) (+)= A (MRk x K) B (K x NVk*W), A(m, k) = A[m * ars + k * acs],
  // B(k, :) = B + k * ldb, C(m, :) = C + m * ldc. The block stays in registers.
  template <int MRk, int NVk>
  static inline void micro(i64 K, const Op* A, i64 ars, i64 acs, const Op* B, i64 ldb, T* C,
                           i64 ldc, bool accumulate, Epilogue e = {}) {
    R c[MRk][NVk];
    if (accumulate && e.scale) {
      R sc[NVk];
#pragma GCC unroll 8
      for (int j = 0; j < NVk; ++j) sc[j] = V::load(e.scale + j * W);
#pragma GCC unroll 32
      for (int m = 0; m < MRk; ++m)
#pragma GCC unroll 8
        for (int j = 0; j < NVk; ++j) c[m][j] = V::mul(V::load(C + m * ldc + j * W), sc[j]);
    } else if (accumulate) {
#pragma GCC unroll 32
      for (int m = 0; m < MRk; ++m)
#pragma GCC unroll 8
        for (int j = 0; j < NVk; ++j) c[m][j] = V::load(C + m * ldc + j * W);
    } else {
#pragma GCC unroll 32
      for (int m = 0; m < MRk; ++m)
#pragma GCC unroll 8
        for (int j = 0; j < NVk; ++j) c[m][j] = V::zero();
    }
    for (i64 k = 0; k < K; ++k) {
      const Op* b = B + k * ldb;
      const Op* a = A + k * acs;
      decltype(V::load(b)) bv[NVk];
#pragma GCC unroll 8
      for (int j = 0; j < NVk; ++j) bv[j] = V::load(b + j * W);
#pragma GCC unroll 32
      for (int m = 0; m < MRk; ++m) {
        const auto av = V::set1(a[m * ars]);
#pragma GCC unroll 8
        for (int j = 0; j < NVk; ++j) c[m][j] = V::fma(av, bv[j], c[m][j]);
      }
    }
#pragma GCC unroll 32
    for (int m = 0; m < MRk; ++m)
#pragma GCC unroll 8
      for (int j = 0; j < NVk; ++j) V::store(C + m * ldc + j * W, c[m][j]);
    if (e.colmax) {
#pragma GCC unroll 8
      for (int j = 0; j < NVk; ++j) {
        R mx = V::load(e.colmax + j * W);
#pragma GCC unroll 32
        for (int m = 0; m < MRk; ++m) mx = V::max(mx, c[m][j]);
        V::store(e.colmax + j * W, mx);
      }
    }
  }

  // One column panel (NVk registers wide), all M rows: full MR blocks, then
  // the remaining rows with the micro-kernel of that height.
  template <int NVk>
  static void panel(i64 M, i64 K, const Op* A, i64 ars, i64 acs, const Op* B, i64 ldb, T* C,
                    i64 ldc, bool accumulate, Epilogue e) {
    i64 i = 0;
    for (; i + MR <= M; i += MR)
      micro<MR, NVk>(K, A + i * ars, ars, acs, B, ldb, C + i * ldc, ldc, accumulate, e);
    const int rest = static_cast<int>(M - i);
    if (rest == 0) return;
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (void)((rest == I + 1 ? (micro<I + 1, NVk>(K, A + i * ars, ars, acs, B, ldb, C + i * ldc, ldc,
                                                 accumulate, e),
                               true)
                            : false) ||
             ...);
    }
    (std::make_integer_sequence<int, MR - 1>{});
  }

  // C (M x N) (+)= A (M x K) B (K x N), N a multiple of W; e's steps on
  // the way (TileEpilogue).
  static void gemm(i64 M, i64 N, i64 K, const Op* A, i64 ars, i64 acs, const Op* B, i64 ldb, T* C,
                   i64 ldc, bool accumulate, Epilogue e = {}) {
    if (M <= 0 || N <= 0) return;
    const i64 nvec = N / W;
    i64 j = 0;
    for (; j + NV <= nvec; j += NV)
      panel<NV>(M, K, A, ars, acs, B + j * W, ldb, C + j * W, ldc, accumulate, e.at(j * W));
    const int rest = static_cast<int>(nvec - j);
    if (rest == 0) return;
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (void)((rest == I + 1 ? (panel<I + 1>(M, K, A, ars, acs, B + j * W, ldb, C + j * W, ldc,
                                            accumulate, e.at(j * W)),
                               true)
                            : false) ||
             ...);
    }
    (std::make_integer_sequence<int, NV - 1>{});
  }

  // Leading dimension for packed rows of d elements: whole registers, and
  // not a multiple of 512 bytes, so that the rows a micro-kernel reads at
  // once do not all fall into the same few L1 sets.
  static i64 packed_ld(i64 d) {
    i64 ld = round_up(std::max<i64>(d, 1), W);
    if (ld * static_cast<i64>(sizeof(T)) % 512 == 0) ld += W;
    return ld;
  }

  // dst[0, n) = src[0, n): whole registers, then a scalar tail (rows here are
  // short; a library call per row costs more than the copy).
  static void copy_row(const T* src, i64 n, T* dst) {
    i64 j = 0;
    for (; j + W <= n; j += W) V::store(dst + j, V::load(src + j));
    for (; j < n; ++j) dst[j] = src[j];
  }

  // Copies rows (rows x d, row stride ld) into dst (rows x ldp), zero padded.
  static void pack_rows(const T* src, i64 ld, i64 rows, i64 d, i64 ldp, T* dst) {
    for (i64 r = 0; r < std::min(rows, kPrefetchRows); ++r) prefetch_span(src + r * ld, d);
    for (i64 r = 0; r < rows; ++r) {
      if (r + kPrefetchRows < rows) prefetch_span(src + (r + kPrefetchRows) * ld, d);
      T* o = dst + r * ldp;
      copy_row(src + r * ld, d, o);
      for (i64 j = d; j < ldp; ++j) o[j] = T(0);
    }
  }
};

}  // namespace
}  // namespace attn::detail
