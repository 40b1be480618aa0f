// src/kernels/attention/attention_small.h — internal: the small-problem attention kernels,
// W heads at a time, one head per vector lane, forward and backward. How these
// headers are compiled: attention_common.h.
//
// With a handful of queries and keys per head (d2l's Transformer: 10 steps,
// head dim 8) tiles would be mostly padding and per-tile overhead. Here a
// group of W heads is gathered into lane-interleaved buffers, x[(t * d + i)
// * W + lane], and every product is elementwise across the lanes: no padding
// of queries or head dims, no broadcasts, the same arithmetic per head as the
// tiled kernels (notation and backward formulas: attention_flash.h). Groups
// run in parallel. The forward keeps its gathered q, k, v and output, and
// with dropout its multipliers, for the backward (AttnArgs::saved, laid out
// for this table's W): the backward draws no mask of its own.
#pragma once

#include "kernels/attention/attention_common.h"
#include "kernels/attention/attention_transpose.h"

namespace attn::detail {
namespace {

template <class V>
struct SmallAttention {
  ATTN_VEC_NAMES(V);
  using Lanes = LaneTranspose<V>;  // W rows to lanes and back

  // Group gi's part of a.saved: q (scaled), k, v, out, the masked scores
  // (small_scores: the backward does not compute them again), and with
  // dropout the multipliers (small_dropout_masks' keep), each
  // lane-interleaved.
  struct Saved {
    T *qg, *kg, *vg, *og, *sg, *keep;
  };
  static Saved saved_group(const AttnArgs<T>& a, i64 gi) {
    const i64 Dv = a.Dv, QK = a.Q * a.K;
    T* base = a.saved +
              gi * W * (a.Q * a.D + a.K * a.D + a.K * Dv + a.Q * Dv + QK + (a.drop.on ? QK : 0));
    Saved sv;
    sv.qg = base;
    sv.kg = sv.qg + a.Q * a.D * W;
    sv.vg = sv.kg + a.K * a.D * W;
    sv.og = sv.vg + a.K * Dv * W;
    sv.sg = sv.og + a.Q * Dv * W;
    sv.keep = a.drop.on ? sv.sg + QK * W : nullptr;
    return sv;
  }

  // The heads of a group: lane -> (b, h), `lanes` of them real.
  struct Group {
    i64 n0;
    int lanes;
    i64 b[W], h[W];
  };

  static Group make_group(const AttnArgs<T>& a, i64 n0) {
    Group g{};
    g.n0 = n0;
    g.lanes = static_cast<int>(std::min<i64>(W, a.B * a.H - n0));
    i64 b = n0 / a.H, h = n0 % a.H;
    for (int lane = 0; lane < g.lanes; ++lane) {
      g.b[lane] = b;
      g.h[lane] = h;
      if (++h == a.H) {
        h = 0;
        ++b;
      }
    }
    return g;
  }

  // The offset of each lane's head in x; lanes past the last head repeat
  // lane 0 (their results are never written back).
  template <class U>
  static void lane_offsets(const HeadView<U>& x, const Group& g, i64* off) {
    for (int lane = 0; lane < W; ++lane) {
      const int l = lane < g.lanes ? lane : 0;
      off[lane] = g.b[l] * x.sb + g.h[l] * x.sh;
    }
  }

  // buf[(t * d + i) * W + lane] = scale * x(head n0 + lane, t, i): for each
  // row t, W heads' rows (up to W elements at a time) made lane-interleaved.
  static void gather(const HeadView<const T>& x, const Group& g, i64 rows, i64 d, T scale, T* buf) {
    alignas(64) i64 off[W];
    lane_offsets(x, g, off);
    const T* src[W];
    for (i64 t = 0; t < rows; ++t) {
      for (int lane = 0; lane < W; ++lane) src[lane] = x.ptr + off[lane] + t * x.st;
      Lanes::rows_to_lanes(src, d, scale, buf + t * d * W, W);
    }
  }

  // x(head n0 + lane, t, i) = scale * buf[(t * d + i) * W + lane] for the real lanes.
  static void scatter(const T* buf, const Group& g, i64 rows, i64 d, T scale,
                      const HeadView<T>& x) {
    alignas(64) i64 off[W];
    lane_offsets(x, g, off);
    T* dst[W];
    for (i64 t = 0; t < rows; ++t)
      for (i64 i0 = 0; i0 < d; i0 += W) {
        const int n = static_cast<int>(std::min<i64>(W, d - i0));
        for (int lane = 0; lane < W; ++lane) dst[lane] = x.ptr + off[lane] + t * x.st + i0;
        Lanes::deinterleave(buf + (t * d + i0) * W, n, scale, dst, g.lanes);
      }
  }

  // Up to kBlock independent chains of FMAs side by side: d2l's head dim 8
  // makes each chain 8 steps of 4 cycles, so a product needs 8 of them in
  // flight to keep both FMA units busy (4 left half the issue slots idle).
  static constexpr int kBlock = 8;

  // Runs f.template block<n>(first) over [0, rows) in blocks of kBlock, then
  // one block of the rest.
  template <class F>
  [[gnu::always_inline]] static void in_blocks(i64 rows, F&& f) {
    i64 c = 0;
    for (; c + kBlock <= rows; c += kBlock) f.template operator()<kBlock>(c);
    const int rest = static_cast<int>(rows - c);
    if (rest == 0) return;
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (void)((rest == I + 1 ? (f.template operator()<I + 1>(c), true) : false) || ...);
    }
    (std::make_integer_sequence<int, kBlock - 1>{});
  }

  // out[c] = sum_i x[i] y[c][i] over d, for c < rows, per lane; x and y
  // lane-interleaved with row length d. Each sum in the order i = 0, 1, ...
  [[gnu::always_inline]] static void dot_rows(const T* x, const T* y, i64 rows, i64 d, T* out) {
    in_blocks(rows, [&]<int NB>(i64 c0) {
      R acc[NB];
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) acc[j] = V::zero();
      const T* y0 = y + c0 * d * W;
      for (i64 i = 0; i < d; ++i) {
        const R xv = V::load(x + i * W);
#pragma GCC unroll 8
        for (int j = 0; j < NB; ++j) acc[j] = V::fma(xv, V::load(y0 + (j * d + i) * W), acc[j]);
      }
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) V::store(out + (c0 + j) * W, acc[j]);
    });
  }

  // out[i] = sum_c p[c * ps] y[c][i] for i < d, per lane (ps: the stride of
  // p in elements, W for a vector of rows). Each sum in the order c = 0, 1, ...
  [[gnu::always_inline]] static void weigh_rows(const T* p, i64 ps, const T* y, i64 rows, i64 d,
                                                T* out) {
    in_blocks(d, [&]<int NB>(i64 i0) {
      R acc[NB];
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) acc[j] = V::zero();
      for (i64 c = 0; c < rows; ++c) {
        const R pc = V::load(p + c * ps);
        const T* yc = y + (c * d + i0) * W;
#pragma GCC unroll 8
        for (int j = 0; j < NB; ++j) acc[j] = V::fma(pc, V::load(yc + j * W), acc[j]);
      }
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) V::store(out + (i0 + j) * W, acc[j]);
    });
  }

  // out[t] = sum_i x[t][i] y[t][i] for t < rows, per lane.
  static void dot_pairs(const T* x, const T* y, i64 rows, i64 d, T* out) {
    for (i64 t = 0; t < rows; ++t) {
      R acc = V::zero();
      for (i64 i = 0; i < d; ++i)
        acc = V::fma(V::load(x + (t * d + i) * W), V::load(y + (t * d + i) * W), acc);
      V::store(out + t * W, acc);
    }
  }

  struct SmallSlice {
    T *qg, *kg, *vg, *dog, *dqg, *dkg, *dvg, *s, *p, *dp, *o, *di, *lse;
    // Every query's masking per lane (small_limits): zero (forward), keep (Q x W).
    T *zero, *keep;
    T *dkeep, *krows;  // the group's dropout multipliers (small_dropout_masks)
    T *wq, *dsq;  // backward: every query's weights (after dropout) and dS, (Q, K) x W
    i64* lim;  // Q x W
    unsigned char* masked;  // Q: whether any lane masks a key of query q
    std::uint32_t* words;
  };

  // Scratch of one thread; q, k, v only without saved buffers (forward).
  static SmallSlice carve_small(Carver& cv, const AttnArgs<T>& a, bool backward) {
    SmallSlice s{};
    const i64 Q = a.Q, K = a.K, D = a.D, Dv = std::max<i64>(a.Dv, 1);
    if (!a.saved) {
      s.qg = cv.take<T>(Q * D * W);
      s.kg = cv.take<T>(K * D * W);
      s.vg = cv.take<T>(K * Dv * W);
    }
    if (!backward) s.s = cv.take<T>(K * W);  // the backward reads Saved::sg
    s.o = cv.take<T>(Q * Dv * W);
    s.keep = cv.take<T>(Q * W);
    if (!backward) {  // the masks of the scores, which the backward reads saved
      s.zero = cv.take<T>(Q * W);
      s.lim = cv.take<i64>(Q * W);
      s.masked = cv.take<unsigned char>(Q);
    }
    if (a.drop.on && !backward) {  // the backward reads the forward's (Saved::keep)
      s.words = cv.take<std::uint32_t>(W * Q * K + 8);
      s.krows = cv.take<T>(Q * K * W);
      // With saved buffers the multipliers go there (Saved::keep).
      if (!a.saved) s.dkeep = cv.take<T>(Q * K * W);
    }
    if (backward) {
      s.dog = cv.take<T>(Q * Dv * W);
      s.dqg = cv.take<T>(Q * D * W);
      s.dkg = cv.take<T>(K * D * W);
      s.dvg = cv.take<T>(K * Dv * W);
      s.p = cv.take<T>(K * W);
      s.dp = cv.take<T>(K * W);
      s.di = cv.take<T>(Q * W);
      s.lse = cv.take<T>(Q * W);
      s.wq = cv.take<T>(Q * K * W);
      s.dsq = cv.take<T>(Q * K * W);
    }
    return s;
  }

  // The group's masking, once for all its queries: for query q and each
  // lane, lim[q * W + lane] (keys from it on are masked), zero and keep (1
  // and 0 on a lane whose row has length 0, else 0 and 1), and masked[q],
  // whether any lane masks a key; the backward (its scores saved) only
  // keep, the others null. Written here, read as vectors per query later:
  // written per query just before its vector loads, the lanes' scalar
  // stores could not be forwarded to them and stalled every query.
  static void small_limits(const AttnArgs<T>& a, const Group& g, const SmallSlice& s) {
    const i64 K = a.K;
    for (i64 q = 0; q < a.Q; ++q) {
      bool mask = false;
      for (int lane = 0; lane < W; ++lane) {
        const i64 L = lane < g.lanes ? a.mask.len(g.b[lane], q) : K;
        s.keep[q * W + lane] = L == 0 ? T(0) : T(1);
        if (!s.lim) continue;
        s.zero[q * W + lane] = L == 0 ? T(1) : T(0);
        mask = mask || L < K;
        s.lim[q * W + lane] = L == 0 ? K : L;
      }
      if (s.lim) s.masked[q] = mask ? 1 : 0;
    }
  }

  // The scores of query q for every lane: s[c] = q . k_c, masked: keys past a
  // lane's limit -inf, every key 0 on a lane whose row has length 0
  // (small_limits).
  static void small_scores(const AttnArgs<T>& a, i64 q, const SmallSlice& s, T* out) {
    const i64 K = a.K;
    dot_rows(s.qg + q * a.D * W, s.kg, K, a.D, out);
    if (!s.masked[q]) return;
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const i64* lim = s.lim + q * W;
    const T* zero = s.zero + q * W;
    for (i64 c = 0; c < K; ++c) {
      T* sc = out + c * W;
#pragma omp simd
      for (int lane = 0; lane < W; ++lane) {
        T x = c < lim[lane] ? sc[lane] : kNegInf;
        sc[lane] = zero[lane] != T(0) ? T(0) : x;
      }
    }
  }

  // The dropout multipliers of the whole group, keep[(q * K + c) * W + lane]
  // = the multiplier of (head n0 + lane, q, c) (0 on lanes past the last
  // head). The group's elements are one contiguous stretch of the dropout
  // stream, so its words come from one vectorized pass over the counters;
  // they become multipliers head by head in `rows` (W x Q K), then
  // lane-interleaved.
  static void small_dropout_masks(const AttnArgs<T>& a, const Group& g, std::uint32_t* words,
                                  T* rows, T* keep) {
    const i64 QK = a.Q * a.K, real = g.lanes * QK;
    const std::uint32_t* wd =
        dropout_words(a.drop, static_cast<std::uint64_t>(g.n0 * QK), real, words);
    const T scale = static_cast<T>(a.drop.scale);
    const std::uint32_t threshold = a.drop.threshold;
#pragma omp simd
    for (i64 j = 0; j < real; ++j) rows[j] = (wd[j] >> 8) >= threshold ? scale : T(0);
    std::fill(rows + real, rows + W * QK, T(0));
    const T* src[W];
    for (i64 j0 = 0; j0 < QK; j0 += W) {
      for (int lane = 0; lane < W; ++lane) src[lane] = rows + lane * QK + j0;
      Lanes::interleave(src, static_cast<int>(std::min<i64>(W, QK - j0)), T(1), keep + j0 * W);
    }
  }

  // x[c] *= keep[c] for c < K, per lane; with `copy_to`, copy_to[c] = x[c] *
  // keep[c] and also[c] *= keep[c] instead.
  static void small_dropout(const T* keep, i64 K, T* x, T* copy_to, T* also) {
    for (i64 c = 0; c < K; ++c) {
      const R z = V::load(keep + c * W);
      if (copy_to) {
        V::store(copy_to + c * W, V::mul(V::load(x + c * W), z));
        V::store(also + c * W, V::mul(V::load(also + c * W), z));
      } else {
        V::store(x + c * W, V::mul(V::load(x + c * W), z));
      }
    }
  }

  // Runs body(g, gi, s) for every group of W heads, groups split over the
  // threads (as many as `work` multiply-adds call for), each thread with its
  // own scratch slice s (carve_small).
  template <class Body>
  static void for_each_group(const AttnArgs<T>& a, bool backward, i64 work, Body body) {
    const i64 groups = ceil_div(a.B * a.H, W);
    Carver count(nullptr);
    carve_small(count, a, backward);
    const std::size_t slice = count.used();
    const int threads = static_cast<int>(std::min<i64>(team_threads(work), groups));
    std::byte* ws = tls_workspace.get(slice * static_cast<std::size_t>(threads));
    run_team(threads, [&] {
      Carver cv(ws + slice * static_cast<std::size_t>(omp_get_thread_num()));
      const SmallSlice s0 = carve_small(cv, a, backward);
#pragma omp for schedule(static)
      for (i64 gi = 0; gi < groups; ++gi) {
        SmallSlice s = s0;
        body(make_group(a, gi * W), gi, s);
      }
    });
    tls_workspace.trim();
  }

  static void forward(const AttnArgs<T>& a) {
    const i64 N = a.B * a.H, Q = a.Q, K = a.K, D = a.D, Dv = a.Dv;
    for_each_group(a, false, N * Q * K * (D + Dv), [&](const Group& g, i64 gi, SmallSlice& s) {
      T* og = nullptr;  // the normalized output, kept for the backward
      T* sg = nullptr;  // the scores, kept for the backward
      if (a.saved) {
        const Saved sv = saved_group(a, gi);
        s.qg = sv.qg;
        s.kg = sv.kg;
        s.vg = sv.vg;
        og = sv.og;
        sg = sv.sg;
        if (sv.keep) s.dkeep = sv.keep;
      }
      gather(a.q, g, Q, D, static_cast<T>(a.scale), s.qg);
      gather(a.k, g, K, D, T(1), s.kg);
      gather(a.v, g, K, Dv, T(1), s.vg);
      if (a.drop.on) small_dropout_masks(a, g, s.words, s.krows, s.dkeep);
      small_limits(a, g, s);
      for (i64 q = 0; q < Q; ++q) {
        // The scores, where the backward finds them (else in place of the
        // weights).
        T* sq = sg ? sg + q * K * W : s.s;
        small_scores(a, q, s, sq);
        R mx = V::set1(-std::numeric_limits<T>::infinity());
        for (i64 c = 0; c < K; ++c) mx = V::max(mx, V::load(sq + c * W));
        const R l = exp_shifted<V>(sq, K, W, mx, s.s);
        if (a.drop.on) small_dropout(s.dkeep + q * K * W, K, s.s, nullptr, nullptr);
        T* o = (og ? og : s.o) + q * Dv * W;
        weigh_rows(s.s, W, s.vg, K, Dv, o);
        const R inv = V::div(V::set1(T(1)), l);
        for (i64 d = 0; d < Dv; ++d) V::store(o + d * W, V::mul(V::load(o + d * W), inv));
        if (a.lse) {
          alignas(64) T lv[W], mv[W];
          V::store(lv, l);
          V::store(mv, mx);
          for (int lane = 0; lane < g.lanes; ++lane)
            a.lse[(g.n0 + lane) * Q + q] = mv[lane] + std::log(lv[lane]);
        }
      }
      scatter(og ? og : s.o, g, Q, Dv, T(1), a.o);
    });
  }

  static void backward(const AttnArgs<T>& a) {
    const i64 N = a.B * a.H, Q = a.Q, K = a.K, D = a.D, Dv = a.Dv;
    const T scale = static_cast<T>(a.scale);
    for_each_group(
        a, true, N * Q * K * (D + Dv) * 5 / 2, [&](const Group& g, i64 gi, SmallSlice& s) {
          gather(a.dout, g, Q, Dv, T(1), s.dog);
          // q, k, v as the forward gathered them; D_i = rowsum(dO o O) from its output.
          const Saved sv = saved_group(a, gi);
          s.qg = sv.qg;
          s.kg = sv.kg;
          s.vg = sv.vg;
          dot_pairs(s.dog, sv.og, Q, Dv, s.di);
          {  // the log-sum-exps into lanes, 0 on lanes past the last head
            const T* rows[W];
            for (int lane = 0; lane < W; ++lane)
              rows[lane] = lane < g.lanes ? a.lse + (g.n0 + lane) * Q : nullptr;
            Lanes::rows_to_lanes(rows, Q, T(1), s.lse, W);
          }
          // The forward's dropout multipliers.
          if (a.drop.on) s.dkeep = sv.keep;
          small_limits(a, g, s);
          for (i64 q = 0; q < Q; ++q) {
            // P = exp(S - lse), S as the forward kept it; dP = dO v^T
            const T* sq = sv.sg + q * K * W;
            const R lse = V::load(s.lse + q * W);
            // P (kept for dS), and the weights after dropout for dV: with
            // dropout P goes to s.p and the weights to wq, else P is both.
            T* wq = s.wq + q * K * W;
            T* pp = a.drop.on ? s.p : wq;
            exp_shifted<V>(sq, K, W, lse, pp);
            dot_rows(s.dog + q * Dv * W, s.vg, K, Dv, s.dp);
            if (a.drop.on) small_dropout(s.dkeep + q * K * W, K, pp, wq, s.dp);
            // dS = P o (dP - D_i), 0 on rows of length 0; dQ = scale dS k
            T* ds = s.dsq + q * K * W;
            const R di = V::load(s.di + q * W), keep = V::load(s.keep + q * W);
            for (i64 c = 0; c < K; ++c) {
              const R v =
                  V::mul(V::mul(V::load(pp + c * W), V::sub(V::load(s.dp + c * W), di)), keep);
              V::store(ds + c * W, v);
            }
            weigh_rows(ds, W, s.kg, K, D, s.dqg + q * D * W);
          }
          // dV = W^T dO and dK = dS^T (scale q), key by key over every query.
          for (i64 c = 0; c < K; ++c) {
            weigh_rows(s.wq + c * W, K * W, s.dog, Q, Dv, s.dvg + c * Dv * W);
            weigh_rows(s.dsq + c * W, K * W, s.qg, Q, D, s.dkg + c * D * W);
          }
          scatter(s.dqg, g, Q, D, scale, a.dq);
          scatter(s.dkg, g, K, D, T(1), a.dk);
          scatter(s.dvg, g, K, Dv, T(1), a.dv);
        });
  }
};

}  // namespace
}  // namespace attn::detail
