// src/kernels/attention/attention_transpose.h — internal: blocks of W rows turned into W
// lanes and back, for the attention kernels. How these headers are compiled:
// attention_common.h.
//
// The small path keeps W heads lane-interleaved; the tiled kernels keep the
// query tile transposed (q^T, dO^T, O^T: one lane per query). Both move W
// rows at a time: where V has interleave / deinterleave (a W x W transpose
// in registers, vec_avx512.h) through them, else element by
// element. Either way every element is multiplied by its scale once, so the
// two give the same bits.
#pragma once

#include "kernels/attention/attention_common.h"

namespace attn::detail {
namespace {

template <class V>
struct LaneTranspose {
  using T = typename V::T;
  static constexpr int W = V::W;
  static constexpr bool kInRegisters = requires(const T* const* s, const T* c, T* d, T* const* o) {
    V::interleave(s, 1, T(1), d);
    V::deinterleave(c, 1, T(1), o, 1);
  };

  // dst[j * W + l] = scale * src[l][j] for every lane l < W and j < n <= W.
  static void interleave(const T* const* src, int n, T scale, T* dst) {
    if constexpr (kInRegisters) {
      V::interleave(src, n, scale, dst);
    } else {
      for (int j = 0; j < n; ++j)
        for (int l = 0; l < W; ++l) dst[j * W + l] = src[l][j] * scale;
    }
  }

  // The reverse for the first `lanes` lanes: dst[l][j] = scale * src[j * W + l].
  static void deinterleave(const T* src, int n, T scale, T* const* dst, int lanes) {
    if constexpr (kInRegisters) {
      V::deinterleave(src, n, scale, dst, lanes);
    } else {
      for (int l = 0; l < lanes; ++l)
        for (int j = 0; j < n; ++j) dst[l][j] = src[j * W + l] * scale;
    }
  }

  // W rows of d elements (a null row reads as zeros) into columns:
  // dst[c * ld + l] = scale * src[l][c] for l < W, c < d.
  static void rows_to_lanes(const T* const* src, i64 d, T scale, T* dst, i64 ld) {
    alignas(64) static constexpr T kZeros[W] = {};
    alignas(64) T block[W * W];
    const T* p[W];
    for (i64 c0 = 0; c0 < d; c0 += W) {
      const int n = static_cast<int>(std::min<i64>(W, d - c0));
      for (int l = 0; l < W; ++l) p[l] = src[l] ? src[l] + c0 : kZeros;
      if (ld == W) {
        interleave(p, n, scale, dst + c0 * W);
        continue;
      }
      interleave(p, n, scale, block);
      for (int j = 0; j < n; ++j)
        std::copy(block + j * W, block + (j + 1) * W, dst + (c0 + j) * ld);
    }
  }

  // The reverse for the first `lanes` rows, each lane with its own scale:
  // dst[l][c] = src[c * ld + l] * scale[l] for l < lanes, c < d.
  static void lanes_to_rows(const T* src, i64 ld, i64 d, const T* scale, T* const* dst, int lanes) {
    alignas(64) T block[W * W];
    T* p[W];
    for (i64 c0 = 0; c0 < d; c0 += W) {
      const int n = static_cast<int>(std::min<i64>(W, d - c0));
      for (int j = 0; j < n; ++j)
        for (int l = 0; l < W; ++l) block[j * W + l] = src[(c0 + j) * ld + l] * scale[l];
      for (int l = 0; l < lanes; ++l) p[l] = dst[l] + c0;
      deinterleave(block, n, T(1), p, lanes);
    }
  }
};

}  // namespace
}  // namespace attn::detail
