// src/kernels/attention/attention_flash.h — internal: the tiled attention kernels,
// FlashAttention-2 forward and backward (ref: Dao, arXiv 2307.08691): query
// tiles by key tiles, online softmax, the score matrix never stored, the
// dropout mask regenerated per tile. How these headers are compiled:
// attention_common.h.
//
// Notation: one head n = b * H + h; its queries q (Q x D), keys k (K x D),
// values v (K x Dv); S = scale * q k^T; P = softmax rows of S; W = P o Z with
// Z the dropout multipliers (0 or 1 / (1 - p)); out = W v.
//
// Layout. The tile products are TileGemm's (attention_gemm.h). The forward
// keeps the score tile transposed, S^T (keys x queries):
//   S^T = k_j (q_i^T scaled)        A = key rows, B = the query tile transposed
//   O^T += v_j^T P^T                A = value rows read transposed, B = P^T
// so the online-softmax statistics (row max m, row sum l) are vectors along
// the queries and the masks are per-lane limits. The query tile is transposed
// once and reused over all key tiles; a head's keys and values are copied
// once per thread into contiguous rows (in the (B, T, H, D) layout their rows
// lie H * D apart, 2 KiB for 8 heads of 64, so the rows a micro-kernel reads
// at once would share a few L1 sets: measured 40% slower in place). The
// backward (FA2, key tiles outer, dK and dV accumulated per key tile, dQ per
// head) uses the same orientation:
//   S^T  = k_j q_i^T       P^T = exp(S^T - lse)      dP^T = v_j dO_i^T
//   dV_j += W^T dO_i       dS^T = P^T o (dP^T o Z^T - D_i) scale,  D_i = rowsum(dO o O)
//   dK_j += dS^T q_i       dQ_i += dS k_j
// The FA2 identity D_i = rowsum(dO o O) holds with dropout too:
// rowsum(dP o Z o P) = rowsum(dW o W) = dO . (W v) = dO . O.
#pragma once

#include "kernels/attention/attention_common.h"
#include "kernels/attention/attention_gemm.h"
#include "kernels/attention/attention_transpose.h"

namespace attn::detail {
namespace {

template <class V>
struct FlashAttention {
  ATTN_VEC_NAMES(V);
  using Gemm = TileGemm<V>;
  using FwdGemm = TileGemm<V, FwdBlock<V>::mr, FwdBlock<V>::nv>;
  using Lanes = LaneTranspose<V>;

  // ---- masks on a transposed score tile st (bc keys x brp queries) ----

  // Keys c0 + c >= lim[r] get -inf (weight 0); queries with zero[r] (a row of
  // length 0) get score 0 on every key (uniform weights).
  static void mask_tile(T* st, i64 bc, i64 brp, i64 c0, const i64* lim, const T* zero) {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    for (i64 c = 0; c < bc; ++c) {
      T* s = st + c * brp;
      const i64 key = c0 + c;
#pragma omp simd
      for (i64 r = 0; r < brp; ++r) {
        T x = key < lim[r] ? s[r] : kNegInf;
        s[r] = zero[r] != T(0) ? T(0) : x;
      }
    }
  }

  // ---- relative positions on a transposed tile (AttnArgs::bias) ----

  // Where query lane 0 of queries q0.. (batch row b) meets key c0 in a bias
  // row: key c0 + c, lane r at p0 - c + r.
  static i64 bias_origin(const AttnArgs<T>& a, i64 b, i64 q0, i64 c0) {
    return a.query_pos0(b) + q0 + a.K - 1 - c0;
  }

  // Adds head h's bias to the tile st (bc keys from c0 x query lanes r < br
  // from q0; the padded lanes keep their scores).
  static void bias_tile(const AttnArgs<T>& a, i64 b, i64 h, i64 q0, i64 br, i64 brp, i64 c0, i64 bc,
                        T* st) {
    const T* row = a.bias + h * a.bias_row() + bias_origin(a, b, q0, c0);
    for (i64 c = 0; c < bc; ++c) {
      const T* src = row - c;
      T* s = st + c * brp;
#pragma omp simd
      for (i64 r = 0; r < br; ++r) s[r] += src[r];
    }
  }

  // The bias's gradient from a dS^T tile (times the scale, as ds_tile
  // leaves it): each score's into the offset it was biased by, in acc (2K - 1).
  static void bias_grad_tile(const AttnArgs<T>& a, i64 b, i64 q0, i64 br, i64 brp, i64 c0, i64 bc,
                             const T* dst, T* acc) {
    T* row = acc + bias_origin(a, b, q0, c0);
    for (i64 c = 0; c < bc; ++c) {
      T* d = row - c;
      const T* s = dst + c * brp;
#pragma omp simd
      for (i64 r = 0; r < br; ++r) d[r] += s[r];
    }
  }

  // Multiplies column r (query row0 + r of the (N * Q) rows) of the tile by the
  // dropout multipliers of its keys c0 .. c0 + bc - 1; with `copy_to`, writes the product there and
  // multiplies `also` (the dP tile) in place.
  static void dropout_tile(const AttnDropout& dp, std::uint64_t row0, i64 K, i64 c0, i64 br,
                           i64 brp, i64 bc, T* tile, T* copy_to, T* also, std::uint32_t* words) {
    const T keep = static_cast<T>(dp.scale);
    for (i64 r = 0; r < br; ++r) {
      const std::uint64_t i0 =
          (row0 + static_cast<std::uint64_t>(r)) * static_cast<std::uint64_t>(K) +
          static_cast<std::uint64_t>(c0);
      const std::uint32_t* w = dropout_words(dp, i0, bc, words);
      for (i64 c = 0; c < bc; ++c) {
        const T z = (w[c] >> 8) >= dp.threshold ? keep : T(0);
        if (copy_to) {
          copy_to[c * brp + r] = tile[c * brp + r] * z;
          also[c * brp + r] *= z;
        } else {
          tile[c * brp + r] *= z;
        }
      }
    }
  }

  // ---- forward ----

  // The f32 buffers of a thread's forward slice, whatever the products'
  // operands: the score tile S^T (Bc x Br), O^T (Dv x Br), the running max,
  // sum and rescaling per query lane, the tile's largest score per lane, the
  // limits, the dropout words.
  struct FwdTiles {
    T *st, *ot, *m, *l, *alpha, *smax, *zero;
    T* turned;  // W query rows turned (rotary), or null
    i64* lim;
    std::uint32_t* words;
  };
  static FwdTiles carve_fwd_tiles(Carver& cv, const AttnArgs<T>& a, i64 Br, i64 Bc) {
    FwdTiles t{};
    t.st = cv.take<T>(Bc * Br);
    t.ot = cv.take<T>(std::max<i64>(a.Dv, 1) * Br);
    cv.take_each<T>(Br, t.m, t.l, t.alpha, t.smax, t.zero);
    t.lim = cv.take<i64>(Br);
    t.words = cv.take<std::uint32_t>(Bc + 8);
    t.turned = a.rotary_q ? cv.take<T>(W * a.D) : nullptr;
    return t;
  }

  struct FwdSlice : FwdTiles {
    T *kp, *vp;  // the keys and values of one head, packed (K x ldk), (K x ldv)
    T* qt;
  };

  struct FwdGeom {
    i64 Br, Bc, ldk, ldv;
  };

  static FwdSlice carve_fwd(Carver& cv, const AttnArgs<T>& a, const FwdGeom& g) {
    FwdSlice s{};
    s.kp = cv.take<T>(a.K * g.ldk);
    s.vp = cv.take<T>(a.K * g.ldv);
    s.qt = cv.take<T>(a.D * g.Br);
    static_cast<FwdTiles&>(s) = carve_fwd_tiles(cv, a, g.Br, g.Bc);
    return s;
  }

  // The key limits of query lanes q0 .. q0 + brp - 1 of head n (padded lanes,
  // r >= br, see every key with score 0): lim, zero (1 for a row of length
  // 0), and over the lanes the largest and smallest limit and whether a row
  // has length 0.
  struct TileLimits {
    i64 lmax = 0, lmin = 0;
    bool any_zero = false;
  };
  static TileLimits tile_limits(const AttnArgs<T>& a, i64 b, i64 q0, i64 br, i64 brp, i64* lim,
                                T* zero) {
    TileLimits t{0, a.K, false};
    for (i64 r = 0; r < brp; ++r) {
      i64 L = r < br ? a.mask.len(b, q0 + r) : a.K;
      zero[r] = L == 0 ? T(1) : T(0);
      t.any_zero = t.any_zero || L == 0;
      if (L == 0) L = a.K;
      lim[r] = L;
      t.lmax = std::max(t.lmax, L);
      t.lmin = std::min(t.lmin, L);
    }
    return t;
  }

  // The running max m = -inf and sum l = 0 of brp lanes; O^T (Dv x brp) = 0.
  static void start_tile(i64 Dv, i64 brp, T* m, T* l, T* ot) {
    for (i64 r = 0; r < brp; r += W) {
      V::store(m + r, V::set1(-std::numeric_limits<T>::infinity()));
      V::store(l + r, V::zero());
    }
    std::fill(ot, ot + Dv * brp, T(0));
  }

  // One key tile of the online softmax on S^T (bc x brp), vectors along the
  // queries: st becomes exp(S^T - m_new), l and m are updated, alpha =
  // exp(m_old - m_new) is what O^T must be multiplied by. smax, when given,
  // is the tile's largest score per lane (TileEpilogue::colmax of the product
  // that wrote st). Two chains per reduction hide the latency of max and add.
  static void softmax_tile(T* st, i64 bc, i64 brp, T* m, T* l, T* alpha, const T* smax = nullptr) {
    for (i64 j = 0; j < brp; j += W) {
      const R mo = V::load(m + j);
      R m0 = mo, m1 = mo;
      i64 c = 0;
      if (smax) {
        m0 = V::max(mo, V::load(smax + j));
      } else {
        for (; c + 2 <= bc; c += 2) {
          m0 = V::max(m0, V::load(st + c * brp + j));
          m1 = V::max(m1, V::load(st + (c + 1) * brp + j));
        }
        if (c < bc) m0 = V::max(m0, V::load(st + c * brp + j));
      }
      const R mx = V::max(m0, m1);
      const R al = V::exp(V::sub(mo, mx));
      const R sum = exp_shifted<V, 2, true>(st + j, bc, brp, mx, st + j);
      V::store(l + j, V::fma(V::load(l + j), al, sum));
      V::store(m + j, mx);
      V::store(alpha + j, al);
    }
  }

  // Rows q0 .. q0 + br - 1 of x (head b, h; d wide) times scale as lanes:
  // dst[c * ld + r] = scale * x(q0 + r, c), zero for br <= r < brp. With
  // `turned` (W rows of d), the queries' rotary turn on the way (a.rotary_q).
  static void query_lanes(const AttnArgs<T>& a, const HeadView<const T>& x, i64 b, i64 h, i64 q0,
                          i64 br, i64 brp, i64 d, T scale, T* dst, i64 ld, T* turned = nullptr) {
    const T* rows[W];
    for (i64 r0 = 0; r0 < brp; r0 += W) {
      for (i64 r = r0 + W; r < std::min(br, r0 + 2 * W); ++r) prefetch_span(x.row(b, h, q0 + r), d);
      for (int j = 0; j < W; ++j) {
        rows[j] = r0 + j < br ? x.row(b, h, q0 + r0 + j) : nullptr;
        if (turned && rows[j]) {
          turn_row(a, rows[j], turned + j * d, a.query_pos0(b) + q0 + r0 + j, T(1));
          rows[j] = turned + j * d;
        }
      }
      Lanes::rows_to_lanes(rows, d, scale, dst + r0, ld);
    }
  }

  // Rows [0, n) of a packed copy (n x d, row stride ld), row r at position
  // t0 + r, turned by rotary (sign 1) or back (-1).
  static void turn_rows(const AttnArgs<T>& a, T* rows, i64 n, i64 ld, i64 t0, T sign) {
    for (i64 r = 0; r < n; ++r) turn_row(a, rows + r * ld, rows + r * ld, t0 + r, sign);
  }

  // Writes out = O^T / l of queries q0 .. q0 + br - 1 of head n, and their
  // log-sum-exp m + log l when a.lse is set.
  static void finish_tile(const AttnArgs<T>& a, i64 n, i64 q0, i64 br, i64 brp, const T* ot,
                          const T* m, const T* l) {
    const i64 b = n / a.H, h = n % a.H;
    for (i64 r0 = 0; r0 < br; r0 += W) {
      const int lanes = static_cast<int>(std::min<i64>(W, br - r0));
      T inv[W];
      T* rows[W];
      for (int j = 0; j < W; ++j) inv[j] = j < lanes ? T(1) / l[r0 + j] : T(0);
      for (int j = 0; j < lanes; ++j) rows[j] = a.o.row(b, h, q0 + r0 + j);
      Lanes::lanes_to_rows(ot + r0, brp, a.Dv, inv, rows, lanes);
    }
    if (a.lse)
      for (i64 r = 0; r < br; ++r) a.lse[n * a.Q + q0 + r] = m[r] + std::log(l[r]);
  }

  // Unnormalized attention of queries q0 .. q0 + br - 1 of head n over its
  // packed keys kp and values vp: leaves O^T (Dv x brp), the running max m and
  // the sum l in s.
  static void attend_tile(const AttnArgs<T>& a, const FwdGeom& g, i64 n, i64 q0, i64 br,
                          const FwdSlice& s) {
    const i64 b = n / a.H, h = n % a.H;
    const i64 brp = round_up(br, W), Bc = g.Bc;
    const i64 D = a.D, Dv = a.Dv;
    const T scale = static_cast<T>(a.scale);
    const TileLimits t = tile_limits(a, b, q0, br, brp, s.lim, s.zero);
    // q^T scaled, zero in the padded lanes.
    query_lanes(a, a.q, b, h, q0, br, brp, D, scale, s.qt, brp, s.turned);
    start_tile(Dv, brp, s.m, s.l, s.ot);
    const std::uint64_t row0 = static_cast<std::uint64_t>(n * a.Q + q0);
    const i64 nkt = ceil_div(t.lmax, Bc);
    for (i64 c0 = 0; c0 < t.lmax; c0 += Bc) {
      const i64 bc = std::min(Bc, t.lmax - c0);
      // The output rows finish_tile writes, asked for a share per key tile
      // (all at once, their fetches would wait on each other).
      const i64 kt = c0 / Bc;
      for (i64 r = kt * br / nkt; r < (kt + 1) * br / nkt; ++r)
        prefetch_span_for_write(a.o.row(b, h, q0 + r), Dv);
      // S^T (bc x brp) = k_j (bc x D) q^T (D x brp); a tile without masks
      // has its largest score per lane taken on the way.
      T* smax = t.any_zero || c0 + bc > t.lmin || a.bias ? nullptr : s.smax;
      if (smax) std::fill(smax, smax + brp, -std::numeric_limits<T>::infinity());
      FwdGemm::gemm(bc, brp, D, s.kp + c0 * g.ldk, g.ldk, 1, s.qt, brp, s.st, brp, false,
                    {nullptr, smax});
      if (a.bias) bias_tile(a, b, h, q0, br, brp, c0, bc, s.st);
      if (!smax) mask_tile(s.st, bc, brp, c0, s.lim, s.zero);
      softmax_tile(s.st, bc, brp, s.m, s.l, s.alpha, smax);
      if (a.drop.on)
        dropout_tile(a.drop, row0, a.K, c0, br, brp, bc, s.st, nullptr, nullptr, s.words);
      // O^T (Dv x brp) = alpha O^T + v_j^T (Dv x bc) P^T (bc x brp), v_j^T(d, c) =
      // vp[(c0 + c) * ldv + d]: the rescaling rides on the product's load of O^T.
      FwdGemm::gemm(Dv, brp, bc, s.vp + c0 * g.ldv, 1, g.ldv, s.st, brp, s.ot, brp, true,
                    {c0 != 0 ? s.alpha : nullptr, nullptr});
    }
  }

  static void forward_tile(const AttnArgs<T>& a, const FwdGeom& g, i64 n, i64 q0, i64 br,
                           const FwdSlice& s) {
    attend_tile(a, g, n, q0, br, s);
    finish_tile(a, n, q0, br, round_up(br, W), s.ot, s.m, s.l);
  }

  // The forward's units and threads, for this kernel and the bf16 one: a
  // unit is one query tile of Br of head n, in a head the last query tiles
  // first (under a causal mask they are the longest). A thread packs the
  // head it works on (`pack(n, slice)`) before its first unit there. Heads
  // go to threads in turn from staggered starts: thread t begins at head
  // t N / threads and takes that head's units one at a time (a counter per
  // head), then the next head's, wrapping around. So most heads are packed
  // by one thread (about N + threads packings, where one shared sequence
  // of units had every thread pack every head; at n 1024, 8 heads, 2
  // threads on a Zen 1: 1% faster, 3% with a causal mask), while the units
  // of the heads that threads meet on are still shared one at a time.
  // `carve(cv)` takes a thread's slice; `tile(n, q0, br, slice)` runs a unit.
  template <class Carve, class Pack, class Tile>
  static void forward_units(const AttnArgs<T>& a, i64 Br, Carve carve, Pack pack, Tile tile) {
    const i64 N = a.B * a.H;
    const i64 nqt = ceil_div(a.Q, Br);
    const i64 units = N * nqt;
    Carver count(nullptr);
    carve(count);
    const std::size_t slice = count.used();
    i64 work = N * a.Q * a.K * (a.D + a.Dv);
    if (a.mask.causal) work /= 2;
    const int threads = static_cast<int>(std::min<i64>(team_threads(work), units));
    std::byte* ws = tls_workspace.get(slice * static_cast<std::size_t>(threads));
    const std::unique_ptr<std::atomic<i64>[]> taken(new std::atomic<i64>[N]);
    for (i64 n = 0; n < N; ++n) taken[n].store(0, std::memory_order_relaxed);
    run_team(threads, [&] {
      const DenormalsAreZero flush(a.bias != nullptr);
      const int t = omp_get_thread_num();
      Carver cv(ws + slice * static_cast<std::size_t>(t));
      const auto s = carve(cv);
      i64 packed = -1;  // the head the slice holds
      const i64 first = static_cast<i64>(t) * N / threads;
      for (i64 j = 0; j < N; ++j) {
        const i64 n = (first + j) % N;
        for (i64 k; (k = taken[n].fetch_add(1, std::memory_order_relaxed)) < nqt;) {
          if (n != packed) {
            pack(n, s);
            packed = n;
          }
          const i64 i = nqt - 1 - k;
          tile(n, i * Br, std::min(Br, a.Q - i * Br), s);
        }
      }
    });
    tls_workspace.trim();
  }

  // Requires K >= 1 and Q >= 1.
  static void forward(const AttnArgs<T>& a, AttnTiles tiles) {
    const AttnTiles t = tiles.forward();
    FwdGeom g{};
    g.Br = round_up(std::max<i64>(t.br, W), W);
    g.Bc = std::max<i64>(t.bc, 1);
    g.ldk = Gemm::packed_ld(a.D);
    g.ldv = Gemm::packed_ld(a.Dv);
    forward_units(
        a, g.Br, [&](Carver& cv) { return carve_fwd(cv, a, g); },
        [&](i64 n, const FwdSlice& s) {
          const i64 b = n / a.H, h = n % a.H;
          Gemm::pack_rows(a.k.row(b, h, 0), a.k.st, a.K, a.D, g.ldk, s.kp);
          if (a.rotary_k) turn_rows(a, s.kp, a.K, g.ldk, 0, T(1));
          Gemm::pack_rows(a.v.row(b, h, 0), a.v.st, a.K, a.Dv, g.ldv, s.vp);
        },
        [&](i64 n, i64 q0, i64 br, const FwdSlice& s) { forward_tile(a, g, n, q0, br, s); });
  }

  // ---- backward pieces (attention_avx512_bf16.cpp's backward uses them too) ----

  // The f32 buffers of a thread's backward slice, whatever the products'
  // operands: dQ's rows (Q x Dp), the per-query statistics (Qp lanes), the
  // per-query-tile limits (nqt), the P, dP / dS and W tiles (Bc x Br), dK's
  // and dV's rows of a key tile, the dropout words.
  struct BwdTiles {
    T *dqacc, *di, *lse, *zero, *pt, *dpt, *wt, *dkacc, *dvacc;
    T* dbias;  // a unit's part of the bias's gradient (2K - 1), where it has one
    T* turned;  // W query rows turned (rotary), or null
    i64 *lim, *tmax, *tmin;
    unsigned char* tzero;
    std::uint32_t* words;
  };
  static BwdTiles carve_tiles(Carver& cv, const AttnArgs<T>& a, i64 Qp, i64 nqt, i64 Br, i64 Bc,
                              i64 Dp, i64 Dvp) {
    BwdTiles t{};
    t.dqacc = cv.take<T>(a.Q * Dp);
    cv.take_each<T>(Qp, t.di, t.lse, t.zero);
    t.lim = cv.take<i64>(Qp);
    cv.take_each<i64>(nqt, t.tmax, t.tmin);
    t.tzero = cv.take<unsigned char>(nqt);
    cv.take_each<T>(Bc * Br, t.pt, t.dpt);
    t.wt = a.drop.on ? cv.take<T>(Bc * Br) : nullptr;
    t.dkacc = cv.take<T>(Bc * Dp);
    t.dvacc = cv.take<T>(Bc * std::max<i64>(Dvp, W));
    t.words = cv.take<std::uint32_t>(Bc + 8);
    t.dbias = a.dbias ? cv.take<T>(a.bias_ld()) : nullptr;
    t.turned = a.rotary_q ? cv.take<T>(W * a.D) : nullptr;
    return t;
  }

  // Per head n: D_i = rowsum(dO o O), the forward's lse and the key limits
  // per query (Qp lanes; the padded ones 0, 0 and K), and per query tile of
  // Br the largest and smallest limit and whether a row has length 0.
  static void head_stats(const AttnArgs<T>& a, i64 n, i64 Br, i64 nqt, i64 Qp, const BwdTiles& s) {
    const i64 b = n / a.H, h = n % a.H, Q = a.Q, K = a.K;
    for (i64 r = 0; r < Qp; ++r) {
      if (r < Q) {
        const T* gr = a.dout.row(b, h, r);
        const T* orow = a.o.row(b, h, r);
        s.di[r] = lane_dot<V>(gr, orow, a.Dv);
        s.lse[r] = a.lse[n * Q + r];
        i64 L = a.mask.len(b, r);
        s.zero[r] = L == 0 ? T(1) : T(0);
        s.lim[r] = L == 0 ? K : L;
      } else {
        s.di[r] = 0;
        s.lse[r] = 0;
        s.zero[r] = 0;
        s.lim[r] = K;
      }
    }
    for (i64 i = 0; i < nqt; ++i) {
      i64 lmax = 0, lmin = K;
      bool z = false;
      for (i64 r = i * Br; r < std::min(Q, (i + 1) * Br); ++r) {
        lmax = std::max(lmax, s.lim[r]);
        lmin = std::min(lmin, s.lim[r]);
        z = z || s.zero[r] != T(0);
      }
      s.tmax[i] = lmax;
      s.tmin[i] = lmin;
      s.tzero[i] = z;
    }
  }

  // P^T = exp(S^T - lse) in place (bce x brp), lse per query lane.
  static void exp_tile(T* pt, i64 bce, i64 brp, const T* lse) {
    for (i64 j = 0; j < brp; j += W) exp_shifted<V>(pt + j, bce, brp, V::load(lse + j), pt + j);
  }

  // dS^T = P^T o (dP^T - D_i) * scale into dpt (bce x brp); 0 in the query
  // lanes r < br with zero[r] set (rows of length 0) when zero is given.
  static void ds_tile(const T* pt, T* dpt, i64 bce, i64 br, i64 brp, const T* di, const T* zero,
                      T scale) {
    const R sc = V::set1(scale);
    for (i64 c = 0; c < bce; ++c)
      for (i64 j = 0; j < brp; j += W) {
        T* dp = dpt + c * brp + j;
        V::store(dp, V::mul(V::mul(V::load(pt + c * brp + j), V::sub(V::load(dp), V::load(di + j))),
                            sc));
      }
    if (zero)
      for (i64 c = 0; c < bce; ++c)
        for (i64 r = 0; r < br; ++r)
          if (zero[r] != T(0)) dpt[c * brp + r] = T(0);
  }

  // ---- backward ----

  struct BwdSlice : BwdTiles {
    T *qt, *dot, *qrows, *dorows, *krows, *vrows;
  };

  struct BwdGeom {
    i64 Br, Bc, Qp, Dp, Dvp, nqt, nkt, nkc, ldq, ldo, ldk, ldv;
  };

  // The keys of one unit: key tiles [kc * nkt / nkc, (kc + 1) * nkt / nkc).
  static i64 unit_keys(const BwdGeom& g, i64 K) {
    return std::min(K, ceil_div(g.nkt, g.nkc) * g.Bc);
  }

  static BwdSlice carve_bwd(Carver& cv, const AttnArgs<T>& a, const BwdGeom& g) {
    BwdSlice s{};
    const i64 kr = unit_keys(g, a.K);
    s.qt = cv.take<T>(a.D * g.nqt * g.Br);
    s.dot = cv.take<T>(std::max<i64>(a.Dv, 1) * g.nqt * g.Br);
    s.qrows = cv.take<T>(a.Q * g.ldq);
    s.dorows = cv.take<T>(a.Q * g.ldo);
    s.krows = cv.take<T>(kr * g.ldk);
    s.vrows = cv.take<T>(kr * g.ldv);
    static_cast<BwdTiles&>(s) = carve_tiles(cv, a, g.Qp, g.nqt, g.Br, g.Bc, g.Dp, g.Dvp);
    return s;
  }

  // Head n, key tiles [kt_begin, kt_end): accumulates dK, dV of those keys
  // (written to a.dk, a.dv) and this range's part of dQ, left in s.dqacc (Q x Dp).
  static void backward_unit(const AttnArgs<T>& a, const BwdGeom& g, i64 n, i64 kt_begin, i64 kt_end,
                            const BwdSlice& s) {
    const i64 b = n / a.H, h = n % a.H;
    const i64 Q = a.Q, K = a.K, D = a.D, Dv = a.Dv, Qp = g.Qp, Dp = g.Dp, Dvp = g.Dvp;
    const i64 Br = g.Br, Bc = g.Bc;
    const T scale = static_cast<T>(a.scale);
    // Per head: q^T scaled and dO^T (vectors along queries), q, dO and this
    // unit's keys and values packed as rows, D_i, lse, and the limits per
    // query and per query tile.
    // q^T and dO^T are stored per query tile, (D x Br) and (Dv x Br) blocks,
    // so that a product reads rows Br apart, not Q apart.
    for (i64 i = 0; i < g.nqt; ++i) {
      const i64 q0 = i * Br, br = std::min(Br, Q - q0), brp = round_up(br, W);
      query_lanes(a, a.q, b, h, q0, br, brp, D, scale, s.qt + i * D * Br, Br, s.turned);
      query_lanes(a, a.dout, b, h, q0, br, brp, Dv, T(1), s.dot + i * Dv * Br, Br);
    }
    Gemm::pack_rows(a.q.row(b, h, 0), a.q.st, Q, D, g.ldq, s.qrows);
    if (a.rotary_q) turn_rows(a, s.qrows, Q, g.ldq, a.query_pos0(b), T(1));
    Gemm::pack_rows(a.dout.row(b, h, 0), a.dout.st, Q, Dv, g.ldo, s.dorows);
    const i64 k_first = kt_begin * Bc, k_last = std::min(K, kt_end * Bc);
    Gemm::pack_rows(a.k.row(b, h, k_first), a.k.st, k_last - k_first, D, g.ldk, s.krows);
    if (a.rotary_k) turn_rows(a, s.krows, k_last - k_first, g.ldk, k_first, T(1));
    Gemm::pack_rows(a.v.row(b, h, k_first), a.v.st, k_last - k_first, Dv, g.ldv, s.vrows);
    head_stats(a, n, Br, g.nqt, Qp, s);
    std::fill(s.dqacc, s.dqacc + Q * Dp, T(0));
    if (s.dbias) std::fill(s.dbias, s.dbias + a.bias_ld(), T(0));
    for (i64 kt = kt_begin; kt < kt_end; ++kt) {
      const i64 c0 = kt * Bc, bc = std::min(Bc, K - c0);
      const T* kj = s.krows + (c0 - k_first) * g.ldk;
      const T* vj = s.vrows + (c0 - k_first) * g.ldv;
      std::fill(s.dkacc, s.dkacc + bc * Dp, T(0));
      std::fill(s.dvacc, s.dvacc + bc * Dvp, T(0));
      for (i64 i = 0; i < g.nqt; ++i) {
        if (s.tmax[i] <= c0) continue;  // no query of this tile sees these keys
        const i64 q0 = i * Br, br = std::min(Br, Q - q0), brp = round_up(br, W);
        const i64 bce = std::min(bc, s.tmax[i] - c0);
        // P^T = exp(S^T - lse)
        Gemm::gemm(bce, brp, D, kj, g.ldk, 1, s.qt + i * D * Br, Br, s.pt, brp, false);
        if (a.bias) bias_tile(a, b, h, q0, br, brp, c0, bce, s.pt);
        if (s.tzero[i] || c0 + bce > s.tmin[i])
          mask_tile(s.pt, bce, brp, c0, s.lim + q0, s.zero + q0);
        exp_tile(s.pt, bce, brp, s.lse + q0);
        // dP^T = v_j dO_i^T
        Gemm::gemm(bce, brp, Dv, vj, g.ldv, 1, s.dot + i * Dv * Br, Br, s.dpt, brp, false);
        const T* wt = s.pt;
        if (a.drop.on) {
          dropout_tile(a.drop, static_cast<std::uint64_t>(n * Q + q0), K, c0, br, brp, bce, s.pt,
                       s.wt, s.dpt, s.words);
          wt = s.wt;
        }
        // dV_j += W^T dO_i
        Gemm::gemm(bce, Dvp, br, wt, brp, 1, s.dorows + q0 * g.ldo, g.ldo, s.dvacc, Dvp, true);
        ds_tile(s.pt, s.dpt, bce, br, brp, s.di + q0, s.tzero[i] ? s.zero + q0 : nullptr, scale);
        if (s.dbias) bias_grad_tile(a, b, q0, br, brp, c0, bce, s.dpt, s.dbias);
        // dK_j += dS^T q_i ; dQ_i += dS k_j
        Gemm::gemm(bce, Dp, br, s.dpt, brp, 1, s.qrows + q0 * g.ldq, g.ldq, s.dkacc, Dp, true);
        Gemm::gemm(br, Dp, bce, s.dpt, 1, brp, kj, g.ldk, s.dqacc + q0 * Dp, Dp, true);
      }
      // dK of the turned keys turned back: the unturned keys' (rotary_k).
      if (a.rotary_k) turn_rows(a, s.dkacc, bc, Dp, c0, T(-1));
      for (i64 c = 0; c < bc; ++c) {
        Gemm::copy_row(s.dkacc + c * Dp, D, a.dk.row(b, h, c0 + c));
        Gemm::copy_row(s.dvacc + c * Dvp, Dv, a.dv.row(b, h, c0 + c));
      }
    }
  }

  // The backward's units and threads, for this kernel and the bf16 one: a
  // unit is head n's key tiles [kt_begin, kt_end) of nkt. With fewer heads
  // than threads each head's keys are split into nkc chunks, each leaving a
  // partial dQ that a last pass sums. `carve(cv, nkc)` takes a thread's
  // slice, `unit(n, kt_begin, kt_end, slice)` runs a unit and returns its dQ
  // rows (Q rows Dp apart).
  template <class Carve, class Unit>
  static void backward_units(const AttnArgs<T>& a, i64 nkt, i64 Dp, Carve carve, Unit unit) {
    const i64 N = a.B * a.H;
    i64 work = N * a.Q * a.K * (a.D + a.Dv) * 5 / 2;
    if (a.mask.causal) work /= 2;
    const int max_threads = team_size(work);
    const i64 nkc = N >= max_threads ? 1 : std::min(nkt, ceil_div(4 * max_threads, N));
    const i64 units = N * nkc;
    const int threads =
        static_cast<int>(std::min<i64>(std::min(max_threads, team_threads(work)), units));
    Carver count(nullptr);
    carve(count, nkc);
    const std::size_t slice = count.used();
    const std::size_t partial_bytes =
        nkc > 1 ? static_cast<std::size_t>(units * a.Q * Dp) * sizeof(T) : 0;
    // The units' parts of the bias's gradient, summed in a fixed order at the end.
    const i64 ld = a.bias_ld();
    const bool dbias = a.bias && a.dbias;
    const std::size_t bias_bytes = dbias ? static_cast<std::size_t>(units * ld) * sizeof(T) : 0;
    std::byte* ws = tls_workspace.get(slice * static_cast<std::size_t>(threads) + partial_bytes +
                                      bias_bytes + 128);
    T* partial = reinterpret_cast<T*>(ws + slice * static_cast<std::size_t>(threads));
    T* bias_parts = reinterpret_cast<T*>(ws + slice * static_cast<std::size_t>(threads) +
                                         round_up(static_cast<i64>(partial_bytes), 64));
    run_team(threads, [&] {
      const DenormalsAreZero flush(a.bias != nullptr);
      Carver cv(ws + slice * static_cast<std::size_t>(omp_get_thread_num()));
      const auto s = carve(cv, nkc);
#pragma omp for schedule(dynamic, 1)
      for (i64 u = 0; u < units; ++u) {
        const i64 n = u / nkc, kc = u % nkc;
        const T* dq = unit(n, kc * nkt / nkc, (kc + 1) * nkt / nkc, s);
        if (dbias) std::copy(s.dbias, s.dbias + ld, bias_parts + u * ld);
        const i64 b = n / a.H, h = n % a.H;
        if (nkc == 1) {
          for (i64 r = 0; r < a.Q; ++r) Gemm::copy_row(dq + r * Dp, a.D, a.dq.row(b, h, r));
        } else {
          std::copy(dq, dq + a.Q * Dp, partial + u * a.Q * Dp);
        }
      }
      if (nkc > 1) {
#pragma omp for schedule(static)
        for (i64 nr = 0; nr < N * a.Q; ++nr) {
          const i64 n = nr / a.Q, r = nr % a.Q;
          T* dst = a.dq.row(n / a.H, n % a.H, r);
          for (i64 d = 0; d < a.D; ++d) {
            T acc = 0;
            for (i64 kc = 0; kc < nkc; ++kc) acc += partial[((n * nkc + kc) * a.Q + r) * Dp + d];
            dst[d] = acc;
          }
        }
      }
      if (dbias) {
        // Head h: the units of batch rows 0, 1, ... in turn, each of its key chunks in turn;
        // ds_tile's scale divided out.
        const T inv = T(1) / static_cast<T>(a.scale);
#pragma omp for schedule(static)
        for (i64 hi = 0; hi < a.H * ld; ++hi) {
          const i64 h = hi / ld, i = hi % ld;
          T acc = 0;
          for (i64 b = 0; b < a.B; ++b)
            for (i64 kc = 0; kc < nkc; ++kc) acc += bias_parts[((b * a.H + h) * nkc + kc) * ld + i];
          a.dbias[hi] = acc * inv;
        }
      }
    });
    tls_workspace.trim();
  }

  // Requires K >= 1 and Q >= 1.
  static void backward(const AttnArgs<T>& a, AttnTiles t) {
    BwdGeom g{};
    g.Br = round_up(std::max<i64>(t.br, W), W);
    g.Bc = std::max<i64>(t.bc, 1);
    g.Qp = round_up(a.Q, W);
    g.Dp = round_up(a.D, W);
    g.Dvp = round_up(a.Dv, W);
    g.nqt = ceil_div(a.Q, g.Br);
    g.nkt = ceil_div(a.K, g.Bc);
    g.ldq = Gemm::packed_ld(a.D);
    g.ldk = Gemm::packed_ld(a.D);
    g.ldo = Gemm::packed_ld(a.Dv);
    g.ldv = Gemm::packed_ld(a.Dv);
    backward_units(
        a, g.nkt, g.Dp,
        [&](Carver& cv, i64 nkc) {
          BwdGeom gc = g;
          gc.nkc = nkc;
          return carve_bwd(cv, a, gc);
        },
        [&](i64 n, i64 kt_begin, i64 kt_end, const BwdSlice& s) {
          backward_unit(a, g, n, kt_begin, kt_end, s);
          // dQ of the turned queries turned back (a sum over key chunks, so
          // each chunk's part may turn alone).
          if (a.rotary_q) turn_rows(a, s.dqacc, a.Q, g.Dp, a.query_pos0(n / a.H), T(-1));
          return static_cast<const T*>(s.dqacc);
        });
  }
};

}  // namespace
}  // namespace attn::detail
