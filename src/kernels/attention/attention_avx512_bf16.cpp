// The tiled attention kernels in bf16 (attention_kernel.h,
// attention_forward_bf16 and attention_backward_bf16): FlashAttention<VecAvx512>'s
// algorithm (attention_flash.h, whose drivers and tile steps they share) with
// every tile product on AVX-512 BF16. The forward's two:
//
//   S^T = k_j q_i^T     k and q rounded to bf16, scale applied to the f32 sums
//   O^T += v_j^T P^T    v and the tile's exp(S - m) rounded to bf16
//
// and the backward's five (listed at FlashBf16's backward below).
//
// VDPBF16PS multiplies 16 pairs of bf16 and adds each lane's two products to
// an f32 sum, so both operands are read as 32-bit words of two bf16 that are
// adjacent along the reduction: keys as their own rows (pairs of head
// dimensions), the query tile transposed with each lane holding a pair of its
// row, values packed two keys to a word, and P^T two keys to a word per
// query lane. Masks, the online softmax, dropout, the sums l and the output's
// normalization stay in f32, as in the f32 kernel. Only the CPU's AVX-512
// BF16 runs this; attention.cpp opens it only in a bf16 PrecisionScope, which
// such a CPU alone allows.
//
// Headers first, for the baseline target; then the target pragma.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include "kernels/attention/attention_kernel.h"
#include "kernels/philox/philox_inline.h"
#include "kernels/target.h"

#if defined(__x86_64__) && defined(__GNUC__)
ATTN_TARGET_BEGIN_AVX512("avx512f,avx512dq,avx512vl,avx512bw,avx512bf16,avx2,fma")

#include "kernels/attention/attention_flash.h"
#include "kernels/vec/vec_avx512.h"

namespace attn::detail {
namespace {

using u32 = std::uint32_t;

// TileGemm's V for bf16 operands: A and B are words of two bf16 (Op), C is
// f32; fma(a, b, c) = c + a.lo * b.lo + a.hi * b.hi in each lane.
struct VecBf16Pairs {
  using T = float;
  using Op = u32;
  using R = __m512;
  static constexpr int W = 16;
  static constexpr int kMR = 6, kNV = 4;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512bh load(const u32* p) { return (__m512bh)_mm512_loadu_si512(p); }
  static void store(float* p, R x) { _mm512_storeu_ps(p, x); }
  static __m512bh set1(u32 pair) { return (__m512bh)_mm512_set1_epi32(static_cast<int>(pair)); }
  static R fma(__m512bh a, __m512bh b, R c) { return _mm512_dpbf16_ps(c, a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }  // on C (TileEpilogue)
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
};

struct FlashBf16 {
  using V = VecAvx512;
  using F = FlashAttention<V>;
  using Gemm = TileGemm<VecBf16Pairs>;
  static constexpr int W = 16;

  // n floats from x rounded to bf16 into out (16 at a time, the tail masked).
  static void row_to_bf16(const float* x, i64 n, std::uint16_t* out) {
    for (i64 i = 0; i < n; i += W) {
      const __mmask16 m = static_cast<__mmask16>((1u << std::min<i64>(W, n - i)) - 1u);
      _mm256_mask_storeu_epi16(out + i, m,
                               (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i)));
    }
  }

  // Row r of x (rows x n, row stride ldx) rounded to bf16 into words w + r *
  // ldw, two consecutive elements to a word, an odd last one with 0.
  static void rows_to_pairs(const float* x, i64 ldx, i64 rows, i64 n, u32* w, i64 ldw) {
    for (i64 r = 0; r < rows; ++r) {
      auto* out = reinterpret_cast<std::uint16_t*>(w + r * ldw);
      if (n % 2) out[n] = 0;
      row_to_bf16(x + r * ldx, n, out);
    }
  }

  // 16 words, word j = (a[j], b[j]) rounded to bf16.
  static __m512i pairs(__m512 a, __m512 b) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                         8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    // a's 16 bf16 in 16-bit elements 0..15, b's in 16..31; interleaved.
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(b, a));
  }

  // Words w with w[j] = (lo[j], hi[j]) rounded to bf16, j < n; hi null: zeros.
  static void interleave_to_bf16(const float* lo, const float* hi, i64 n, u32* w) {
    for (i64 j = 0; j < n; j += W) {
      const __mmask16 m = static_cast<__mmask16>((1u << std::min<i64>(W, n - j)) - 1u);
      const __m512 a = _mm512_maskz_loadu_ps(m, lo + j);
      const __m512 b = hi ? _mm512_maskz_loadu_ps(m, hi + j) : _mm512_setzero_ps();
      _mm512_mask_storeu_epi32(w + j, m, pairs(a, b));
    }
  }

  // Rows q0 .. q0 + br - 1 of x (b, h; d wide) as lanes of pairs: word
  // dst[d2 * ld + r] = the pair d2 of row q0 + r, 0 for br <= r < brp. 16
  // rows by 16 words at a time: each row's 32 floats rounded to 16 words, then
  // a 16 x 16 transpose of the words in registers.
  static void pair_lanes(const HeadView<const float>& x, i64 b, i64 h, i64 q0, i64 br, i64 brp,
                         i64 d, u32* dst, i64 ld) {
    const i64 d2n = ceil_div(d, 2);
    for (i64 r0 = 0; r0 < brp; r0 += W) {
      for (i64 r = r0 + W; r < std::min(br, r0 + 2 * W); ++r) prefetch_span(x.row(b, h, q0 + r), d);
      for (i64 w0 = 0; w0 < d2n; w0 += W) {
        const i64 n = std::min<i64>(2 * W, d - 2 * w0);  // floats of each row
        const __mmask16 lo = static_cast<__mmask16>((1u << std::min<i64>(W, n)) - 1u);
        const __mmask16 hi = static_cast<__mmask16>((1u << std::max<i64>(0, n - W)) - 1u);
        __m512 r[W];
        for (int l = 0; l < W; ++l) {
          if (r0 + l >= br) {
            r[l] = _mm512_setzero_ps();
            continue;
          }
          const float* p = x.row(b, h, q0 + r0 + l) + 2 * w0;
          r[l] = (__m512)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, p + W),
                                             _mm512_maskz_loadu_ps(lo, p));
        }
        V::transpose16(r);
        for (i64 j = 0; j < std::min<i64>(W, d2n - w0); ++j)
          _mm512_storeu_ps(reinterpret_cast<float*>(dst + (w0 + j) * ld + r0), r[j]);
      }
    }
  }

  // FlashAttention::softmax_tile on scale * S^T (scale > 0, so that the
  // masks' -inf stay -inf), writing exp(scale S^T - m) as P^T's pairs of keys
  // (pt, ceil(bc / 2) x brp words) instead of back into st.
  static void softmax_to_pairs(const float* st, i64 bc, i64 brp, float scale, float* m, float* l,
                               float* alpha, u32* pt) {
    const __m512 sc = _mm512_set1_ps(scale);
    for (i64 j = 0; j < brp; j += W) {
      const __m512 mo = _mm512_loadu_ps(m + j);
      __m512 m0 = mo, m1 = mo;
      i64 c = 0;
      for (; c + 2 <= bc; c += 2) {
        m0 = _mm512_max_ps(m0, _mm512_mul_ps(_mm512_loadu_ps(st + c * brp + j), sc));
        m1 = _mm512_max_ps(m1, _mm512_mul_ps(_mm512_loadu_ps(st + (c + 1) * brp + j), sc));
      }
      if (c < bc) m0 = _mm512_max_ps(m0, _mm512_mul_ps(_mm512_loadu_ps(st + c * brp + j), sc));
      const __m512 mx = _mm512_max_ps(m0, m1);
      const __m512 al = V::exp(_mm512_sub_ps(mo, mx));
      __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
      for (c = 0; c + 2 <= bc; c += 2) {
        const __m512 p0 = V::exp(_mm512_fmsub_ps(_mm512_loadu_ps(st + c * brp + j), sc, mx));
        const __m512 p1 = V::exp(_mm512_fmsub_ps(_mm512_loadu_ps(st + (c + 1) * brp + j), sc, mx));
        _mm512_storeu_si512(pt + c / 2 * brp + j, pairs(p0, p1));
        s0 = _mm512_add_ps(s0, p0);
        s1 = _mm512_add_ps(s1, p1);
      }
      if (c < bc) {
        const __m512 p0 = V::exp(_mm512_fmsub_ps(_mm512_loadu_ps(st + c * brp + j), sc, mx));
        _mm512_storeu_si512(pt + c / 2 * brp + j, pairs(p0, _mm512_setzero_ps()));
        s0 = _mm512_add_ps(s0, p0);
      }
      _mm512_storeu_ps(l + j, _mm512_fmadd_ps(_mm512_loadu_ps(l + j), al, _mm512_add_ps(s0, s1)));
      _mm512_storeu_ps(m + j, mx);
      _mm512_storeu_ps(alpha + j, al);
    }
  }

  struct Slice : F::FwdTiles {
    u32 *kp, *vp, *qt, *pt;
  };

  // Br query lanes by Bc keys (even); D2 = words per key row (D / 2 rounded
  // up); K2 = key pairs.
  struct Geom {
    i64 Br, Bc, D2, K2;
  };

  static Slice carve(Carver& cv, const AttnArgs<float>& a, const Geom& g) {
    Slice s{};
    s.kp = cv.take<u32>(a.K * g.D2);
    s.vp = cv.take<u32>(g.K2 * std::max<i64>(a.Dv, 1));
    s.qt = cv.take<u32>(g.D2 * g.Br);
    s.pt = cv.take<u32>(g.Bc / 2 * g.Br);
    static_cast<F::FwdTiles&>(s) = F::carve_fwd_tiles(cv, a, g.Br, g.Bc);
    return s;
  }

  // Head n's keys as rows of D2 words, its values as K2 rows of Dv words
  // (keys 2c and 2c + 1 in word (c, d); a missing last key is 0).
  static void pack_head(const AttnArgs<float>& a, const Geom& g, i64 n, const Slice& s) {
    const i64 b = n / a.H, h = n % a.H;
    for (i64 c = 0; c < std::min(a.K, kPrefetchRows); ++c) prefetch_span(a.k.row(b, h, c), a.D);
    for (i64 c = 0; c < 2 * std::min(g.K2, kPrefetchRows); ++c)
      if (c < a.K) prefetch_span(a.v.row(b, h, c), a.Dv);
    for (i64 c = 0; c < a.K; ++c) {
      if (c + kPrefetchRows < a.K) prefetch_span(a.k.row(b, h, c + kPrefetchRows), a.D);
      auto* row = reinterpret_cast<std::uint16_t*>(s.kp + c * g.D2);
      if (a.D % 2) row[a.D] = 0;
      row_to_bf16(a.k.row(b, h, c), a.D, row);
    }
    for (i64 c2 = 0; c2 < g.K2; ++c2) {
      for (i64 c = 2 * (c2 + kPrefetchRows); c < std::min(a.K, 2 * (c2 + kPrefetchRows + 1)); ++c)
        prefetch_span(a.v.row(b, h, c), a.Dv);
      const float* hi = 2 * c2 + 1 < a.K ? a.v.row(b, h, 2 * c2 + 1) : nullptr;
      interleave_to_bf16(a.v.row(b, h, 2 * c2), hi, a.Dv, s.vp + c2 * a.Dv);
    }
  }

  static void forward_tile(const AttnArgs<float>& a, const Geom& g, i64 n, i64 q0, i64 br,
                           const Slice& s) {
    const i64 b = n / a.H, h = n % a.H;
    const i64 brp = round_up(br, W), Dv = a.Dv;
    const auto t = F::tile_limits(a, b, q0, br, brp, s.lim, s.zero);
    // q^T: word (d2, r) = the pair d2 of query r; zero in the padded lanes.
    pair_lanes(a.q, b, h, q0, br, brp, a.D, s.qt, brp);
    F::start_tile(Dv, brp, s.m, s.l, s.ot);
    const float scale = static_cast<float>(a.scale);
    const std::uint64_t row0 = static_cast<std::uint64_t>(n * a.Q + q0);
    for (i64 c0 = 0; c0 < t.lmax; c0 += g.Bc) {
      const i64 bc = std::min(g.Bc, t.lmax - c0), bc2 = ceil_div(bc, 2);
      Gemm::gemm(bc, brp, g.D2, s.kp + c0 * g.D2, g.D2, 1, s.qt, brp, s.st, brp, false);
      const bool masked = t.any_zero || c0 + bc > t.lmin;
      if (scale > 0 && !a.drop.on) {
        if (masked) F::mask_tile(s.st, bc, brp, c0, s.lim, s.zero);
        softmax_to_pairs(s.st, bc, brp, scale, s.m, s.l, s.alpha, s.pt);
      } else {
        const __m512 sc = _mm512_set1_ps(scale);
        for (i64 i = 0; i < bc * brp; i += W)
          _mm512_storeu_ps(s.st + i, _mm512_mul_ps(_mm512_loadu_ps(s.st + i), sc));
        if (masked) F::mask_tile(s.st, bc, brp, c0, s.lim, s.zero);
        F::softmax_tile(s.st, bc, brp, s.m, s.l, s.alpha);
        if (a.drop.on)
          F::dropout_tile(a.drop, row0, a.K, c0, br, brp, bc, s.st, nullptr, nullptr, s.words);
        // P^T two keys to a word per query lane; an odd last key pairs with 0.
        for (i64 c2 = 0; c2 < bc2; ++c2) {
          const float* hi = 2 * c2 + 1 < bc ? s.st + (2 * c2 + 1) * brp : nullptr;
          interleave_to_bf16(s.st + 2 * c2 * brp, hi, brp, s.pt + c2 * brp);
        }
      }
      // O^T (Dv x brp) = alpha O^T + v_j^T P^T; A(d, c2) = vp[(c0 / 2 + c2) * Dv + d].
      Gemm::gemm(Dv, brp, bc2, s.vp + c0 / 2 * Dv, 1, Dv, s.pt, brp, s.ot, brp, true,
                 {c0 != 0 ? s.alpha : nullptr, nullptr});
    }
    F::finish_tile(a, n, q0, br, brp, s.ot, s.m, s.l);
  }

  static void forward(const AttnArgs<float>& a, AttnTiles tiles) {
    Geom g{};
    g.Br = round_up(std::max<i64>(tiles.br, W), W);
    g.Bc = round_up(std::max<i64>(tiles.bc, 2), 2);
    g.D2 = ceil_div(a.D, 2);
    g.K2 = ceil_div(a.K, 2);
    F::forward_units(
        a, g.Br, [&](Carver& cv) { return carve(cv, a, g); },
        [&](i64 n, const Slice& s) { pack_head(a, g, n, s); },
        [&](i64 n, i64 q0, i64 br, const Slice& s) { forward_tile(a, g, n, q0, br, s); });
  }

  // ---- backward ----
  //
  // FlashAttention::backward_unit's algorithm, its five products on bf16
  // pairs along each one's reduction:
  //   S^T  = k_j q_i^T     keys as rows (pairs along D), q^T per tile
  //   dP^T = v_j dO_i^T    values as rows (pairs along Dv), dO^T per tile
  //   dV_j += W^T dO_i     W^T's rows (pairs of queries), dO two rows a word
  //   dK_j += dS^T q_i     dS^T's rows (pairs of queries), q two rows a word
  //   dQ_i += dS k_j       dS^T two keys a word per query lane, k two rows a word
  // P, dP, dS, the statistics and every sum stay f32.

  struct BwdSlice : F::BwdTiles {
    u32 *qt, *dot, *qpairs, *dopairs, *krows, *vrows, *kpairs, *w16, *ds16, *dsp;
  };

  struct BwdGeom {
    i64 Br, Bc, Qp, D2, Dv2, Dp, Dvp, nqt, nkt;
  };

  static BwdSlice carve_bwd(Carver& cv, const AttnArgs<float>& a, const BwdGeom& g, i64 nkc) {
    BwdSlice s{};
    const i64 kr = round_up(std::min(a.K, ceil_div(g.nkt, nkc) * g.Bc), 2);
    s.qt = cv.take<u32>(g.nqt * g.D2 * g.Br);
    s.dot = cv.take<u32>(g.nqt * g.Dv2 * g.Br);
    s.qpairs = cv.take<u32>(g.Qp / 2 * g.Dp);
    s.dopairs = cv.take<u32>(g.Qp / 2 * g.Dvp);
    s.krows = cv.take<u32>(kr * g.D2);
    s.vrows = cv.take<u32>(kr * g.Dv2);
    s.kpairs = cv.take<u32>(kr / 2 * g.Dp);
    s.w16 = cv.take<u32>(g.Bc * g.Br / 2);
    s.ds16 = cv.take<u32>(g.Bc * g.Br / 2);
    s.dsp = cv.take<u32>(g.Bc / 2 * g.Br);
    static_cast<F::BwdTiles&>(s) = F::carve_tiles(cv, a, g.Qp, g.nqt, g.Br, g.Bc, g.Dp, g.Dvp);
    return s;
  }

  // Rows [r0, r0 + rows) of x two to a word: word (r2, j) = (x[r0 + 2 r2][j],
  // x[r0 + 2 r2 + 1][j]), j < d, in rows of ld words; a missing row is 0.
  static void pair_rows(const HeadView<const float>& x, i64 b, i64 h, i64 r0, i64 rows, i64 d,
                        i64 ld, u32* out) {
    for (i64 r2 = 0; r2 < ceil_div(rows, 2); ++r2) {
      const float* hi = 2 * r2 + 1 < rows ? x.row(b, h, r0 + 2 * r2 + 1) : nullptr;
      interleave_to_bf16(x.row(b, h, r0 + 2 * r2), hi, d, out + r2 * ld);
      std::fill(out + r2 * ld + d, out + (r2 + 1) * ld, u32{0});
    }
  }

  static const float* backward_unit(const AttnArgs<float>& a, const BwdGeom& g, i64 n, i64 kt_begin,
                                    i64 kt_end, const BwdSlice& s) {
    const i64 b = n / a.H, h = n % a.H;
    const i64 Q = a.Q, K = a.K, Br = g.Br, Bc = g.Bc, Dp = g.Dp, Dvp = g.Dvp;
    const float scale = static_cast<float>(a.scale);
    for (i64 i = 0; i < g.nqt; ++i) {
      const i64 br = std::min(Br, Q - i * Br), brp = round_up(br, W);
      pair_lanes(a.q, b, h, i * Br, br, brp, a.D, s.qt + i * g.D2 * Br, Br);
      pair_lanes(a.dout, b, h, i * Br, br, brp, a.Dv, s.dot + i * g.Dv2 * Br, Br);
    }
    pair_rows(a.q, b, h, 0, Q, a.D, Dp, s.qpairs);
    pair_rows(a.dout, b, h, 0, Q, a.Dv, Dvp, s.dopairs);
    std::fill(s.qpairs + ceil_div(Q, 2) * Dp, s.qpairs + g.Qp / 2 * Dp, u32{0});
    std::fill(s.dopairs + ceil_div(Q, 2) * Dvp, s.dopairs + g.Qp / 2 * Dvp, u32{0});
    const i64 k_first = kt_begin * Bc, k_last = std::min(K, kt_end * Bc), kr = k_last - k_first;
    rows_to_pairs(a.k.row(b, h, k_first), a.k.st, kr, a.D, s.krows, g.D2);
    rows_to_pairs(a.v.row(b, h, k_first), a.v.st, kr, a.Dv, s.vrows, g.Dv2);
    pair_rows(a.k, b, h, k_first, kr, a.D, Dp, s.kpairs);
    F::head_stats(a, n, Br, g.nqt, g.Qp, s);
    std::fill(s.dqacc, s.dqacc + Q * Dp, 0.0f);
    const __m512 sc = _mm512_set1_ps(scale);
    for (i64 kt = kt_begin; kt < kt_end; ++kt) {
      const i64 c0 = kt * Bc, bc = std::min(Bc, K - c0);
      std::fill(s.dkacc, s.dkacc + bc * Dp, 0.0f);
      std::fill(s.dvacc, s.dvacc + bc * Dvp, 0.0f);
      for (i64 i = 0; i < g.nqt; ++i) {
        if (s.tmax[i] <= c0) continue;  // no query of this tile sees these keys
        const i64 q0 = i * Br, br = std::min(Br, Q - q0), brp = round_up(br, W);
        const i64 br2 = ceil_div(br, 2), bce = std::min(bc, s.tmax[i] - c0);
        const i64 bce2 = ceil_div(bce, 2);
        // P^T = exp(scale S^T - lse)
        Gemm::gemm(bce, brp, g.D2, s.krows + (c0 - k_first) * g.D2, g.D2, 1, s.qt + i * g.D2 * Br,
                   Br, s.pt, brp, false);
        for (i64 e = 0; e < bce * brp; e += W)
          _mm512_storeu_ps(s.pt + e, _mm512_mul_ps(_mm512_loadu_ps(s.pt + e), sc));
        if (s.tzero[i] || c0 + bce > s.tmin[i])
          F::mask_tile(s.pt, bce, brp, c0, s.lim + q0, s.zero + q0);
        F::exp_tile(s.pt, bce, brp, s.lse + q0);
        // dP^T = v_j dO_i^T
        Gemm::gemm(bce, brp, g.Dv2, s.vrows + (c0 - k_first) * g.Dv2, g.Dv2, 1,
                   s.dot + i * g.Dv2 * Br, Br, s.dpt, brp, false);
        const float* wt = s.pt;
        if (a.drop.on) {
          F::dropout_tile(a.drop, static_cast<std::uint64_t>(n * Q + q0), K, c0, br, brp, bce, s.pt,
                          s.wt, s.dpt, s.words);
          wt = s.wt;
        }
        // dV_j += W^T dO_i
        rows_to_pairs(wt, brp, bce, brp, s.w16, brp / 2);
        Gemm::gemm(bce, Dvp, br2, s.w16, brp / 2, 1, s.dopairs + q0 / 2 * Dvp, Dvp, s.dvacc, Dvp,
                   true);
        F::ds_tile(s.pt, s.dpt, bce, br, brp, s.di + q0, s.tzero[i] ? s.zero + q0 : nullptr, scale);
        // dK_j += dS^T q_i ; dQ_i += dS k_j
        rows_to_pairs(s.dpt, brp, bce, brp, s.ds16, brp / 2);
        Gemm::gemm(bce, Dp, br2, s.ds16, brp / 2, 1, s.qpairs + q0 / 2 * Dp, Dp, s.dkacc, Dp, true);
        for (i64 c2 = 0; c2 < bce2; ++c2) {
          const float* hi = 2 * c2 + 1 < bce ? s.dpt + (2 * c2 + 1) * brp : nullptr;
          interleave_to_bf16(s.dpt + 2 * c2 * brp, hi, brp, s.dsp + c2 * brp);
        }
        Gemm::gemm(br, Dp, bce2, s.dsp, 1, brp, s.kpairs + (c0 - k_first) / 2 * Dp, Dp,
                   s.dqacc + q0 * Dp, Dp, true);
      }
      for (i64 c = 0; c < bc; ++c) {
        F::Gemm::copy_row(s.dkacc + c * Dp, a.D, a.dk.row(b, h, c0 + c));
        F::Gemm::copy_row(s.dvacc + c * Dvp, a.Dv, a.dv.row(b, h, c0 + c));
      }
    }
    return s.dqacc;
  }

  static void backward(const AttnArgs<float>& a, AttnTiles tiles) {
    BwdGeom g{};
    g.Br = round_up(std::max<i64>(tiles.br, W), W);
    g.Bc = round_up(std::max<i64>(tiles.bc, 2), 2);
    g.Qp = round_up(a.Q, W);
    g.D2 = ceil_div(a.D, 2);
    g.Dv2 = ceil_div(a.Dv, 2);
    g.Dp = round_up(a.D, W);
    g.Dvp = round_up(a.Dv, W);
    g.nqt = ceil_div(a.Q, g.Br);
    g.nkt = ceil_div(a.K, g.Bc);
    F::backward_units(
        a, g.nkt, g.Dp, [&](Carver& cv, i64 nkc) { return carve_bwd(cv, a, g, nkc); },
        [&](i64 n, i64 kt_begin, i64 kt_end, const BwdSlice& s) {
          return backward_unit(a, g, n, kt_begin, kt_end, s);
        });
  }
};

}  // namespace

AttnTiledFn attention_forward_bf16() { return &FlashBf16::forward; }
AttnTiledFn attention_backward_bf16() { return &FlashBf16::backward; }

}  // namespace attn::detail

ATTN_TARGET_END_AVX512
#else
namespace attn::detail {
AttnTiledFn attention_forward_bf16() { return nullptr; }
AttnTiledFn attention_backward_bf16() { return nullptr; }
}  // namespace attn::detail
#endif
