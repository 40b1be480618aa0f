// src/ops/attention_impl.h — internal: the fused attention kernels, written
// once over a SIMD type V and compiled once per instruction set.
//
// Included by attention.cpp (portable vectors, f32 and f64),
// attention_avx2.cpp and attention_avx512.cpp, each time after its own
// `#pragma GCC target`; everything defined here has internal linkage, so the
// copies never meet at link time. The including file includes the headers
// below (the standard library and ops/philox_inline.h, whose inline function
// has external linkage) before its pragma, so that they stay compiled for the
// baseline: an out-of-line copy built for AVX-512 could otherwise be the one
// the linker keeps for every caller.
//
// V provides: T (element), R (register), W (lanes), kMR x kNV (the register
// block of the micro-kernel: kMR rows by kNV registers), zero, set1, load,
// store, fma(a, b, c) = a * b + c, add, sub, mul, div, max, exp, hsum, and
// gather(p, idx) / scatter(p, idx, x): lane l reads / writes p[idx[l]].
//
// Notation: one head n = b * H + h; its queries q (Q x D), keys k (K x D),
// values v (K x Dv); S = scale * q k^T; P = softmax rows of S; W = P o Z with
// Z the dropout multipliers (0 or 1 / (1 - p)); out = W v.
//
// Layout. Every tile product is C (M x N) (+)= A (M x K) B (K x N) by one
// register-blocked micro-kernel (kMR x kNV registers of C held while K runs):
// A read by scalar broadcasts at any strides, B and C by vectors along N. The
// forward keeps the score tile transposed, S^T (keys x queries):
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
// Small problems (a few queries and keys per head) take another path, W heads
// at a time across the vector lanes (see "small problems" below).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "ops/attention_kernel.h"
#include "ops/philox_inline.h"

namespace attn::detail {
namespace {

using i64 = std::int64_t;

inline i64 round_up(i64 x, i64 m) { return (x + m - 1) / m * m; }
inline i64 ceil_div(i64 x, i64 m) { return (x + m - 1) / m; }

// Below this many multiply-adds a call runs on one thread: forking costs more.
constexpr i64 kParallelWork = 1 << 17;

// ---- workspace ----

// One buffer per calling thread, sliced per OpenMP thread, kept between calls
// (small calls allocate nothing) unless it grew past kKeepBytes. Allocated on
// the calling thread, so running out of memory throws std::bad_alloc there.
class Workspace {
 public:
  static constexpr std::size_t kKeepBytes = std::size_t{16} << 20;
  std::byte* get(std::size_t bytes) {
    if (bytes + 64 > cap_) {
      buf_.reset();
      buf_.reset(new std::byte[bytes + 64]);
      cap_ = bytes + 64;
    }
    auto p = reinterpret_cast<std::uintptr_t>(buf_.get());
    return buf_.get() + ((64 - p % 64) % 64);
  }
  void trim() {
    if (cap_ > kKeepBytes) {
      buf_.reset();
      cap_ = 0;
    }
  }

 private:
  std::unique_ptr<std::byte[]> buf_;
  std::size_t cap_ = 0;
};
thread_local Workspace tls_workspace;

// Hands out 64-byte aligned pieces of a slice; with base == nullptr it only
// counts, so the same code sizes the slice and carves it.
class Carver {
 public:
  explicit Carver(std::byte* base) : p_(base) {}
  template <class U>
  U* take(i64 n) {
    U* r = reinterpret_cast<U*>(p_);
    used_ += static_cast<std::size_t>(round_up(n * static_cast<i64>(sizeof(U)), 64));
    if (p_) p_ += round_up(n * static_cast<i64>(sizeof(U)), 64);
    return r;
  }
  std::size_t used() const { return used_; }

 private:
  std::byte* p_;
  std::size_t used_ = 0;
};

inline int team_size(i64 work) { return work >= kParallelWork ? omp_get_max_threads() : 1; }

// ---- dropout mask (Philox: ops/philox_inline.h) ----

// The random words of elements i0 .. i0 + len - 1 of the dropout stream;
// `buf` holds len + 8 words. Returns a pointer p with p[c] = word of i0 + c.
inline const std::uint32_t* dropout_words(const AttnDropout& dp, std::uint64_t i0, i64 len,
                                          std::uint32_t* buf) {
  const std::uint64_t first = i0 / 4;
  const i64 shift = static_cast<i64>(i0 % 4);
  const i64 nctr = (shift + len + 3) / 4;
  const std::uint64_t base = dp.offset + first;
#pragma omp simd
  for (i64 j = 0; j < nctr; ++j)
    philox_inline(base + static_cast<std::uint64_t>(j), dp.seed, buf + 4 * j);
  return buf + shift;
}

template <class V>
struct AttnKernels {
  using T = typename V::T;
  using R = typename V::R;
  static constexpr int W = V::W;
  static constexpr int MR = V::kMR;
  static constexpr int NV = V::kNV;

  // ---- tile products ----

  // C (MRk x NVk*W) (+)= A (MRk x K) B (K x NVk*W), A(m, k) = A[m * ars + k * acs],
  // B(k, :) = B + k * ldb, C(m, :) = C + m * ldc. The block stays in registers.
  template <int MRk, int NVk>
  static inline void micro(i64 K, const T* A, i64 ars, i64 acs, const T* B, i64 ldb, T* C, i64 ldc,
                           bool accumulate) {
    R c[MRk][NVk];
    if (accumulate) {
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
      const T* b = B + k * ldb;
      const T* a = A + k * acs;
      R bv[NVk];
#pragma GCC unroll 8
      for (int j = 0; j < NVk; ++j) bv[j] = V::load(b + j * W);
#pragma GCC unroll 32
      for (int m = 0; m < MRk; ++m) {
        R av = V::set1(a[m * ars]);
#pragma GCC unroll 8
        for (int j = 0; j < NVk; ++j) c[m][j] = V::fma(av, bv[j], c[m][j]);
      }
    }
#pragma GCC unroll 32
    for (int m = 0; m < MRk; ++m)
#pragma GCC unroll 8
      for (int j = 0; j < NVk; ++j) V::store(C + m * ldc + j * W, c[m][j]);
  }

  // One column panel (NVk registers wide), all M rows: full MR blocks, then
  // the remaining rows with the micro-kernel of that height.
  template <int NVk>
  static void panel(i64 M, i64 K, const T* A, i64 ars, i64 acs, const T* B, i64 ldb, T* C, i64 ldc,
                    bool accumulate) {
    i64 i = 0;
    for (; i + MR <= M; i += MR)
      micro<MR, NVk>(K, A + i * ars, ars, acs, B, ldb, C + i * ldc, ldc, accumulate);
    const int rest = static_cast<int>(M - i);
    if (rest == 0) return;
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (void)((rest == I + 1 ? (micro<I + 1, NVk>(K, A + i * ars, ars, acs, B, ldb, C + i * ldc, ldc,
                                                 accumulate),
                               true)
                            : false) ||
             ...);
    }
    (std::make_integer_sequence<int, MR - 1>{});
  }

  // C (M x N) (+)= A (M x K) B (K x N), N a multiple of W.
  static void gemm(i64 M, i64 N, i64 K, const T* A, i64 ars, i64 acs, const T* B, i64 ldb, T* C,
                   i64 ldc, bool accumulate) {
    if (M <= 0 || N <= 0) return;
    const i64 nvec = N / W;
    i64 j = 0;
    for (; j + NV <= nvec; j += NV)
      panel<NV>(M, K, A, ars, acs, B + j * W, ldb, C + j * W, ldc, accumulate);
    const int rest = static_cast<int>(nvec - j);
    if (rest == 0) return;
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (void)((rest == I + 1
                  ? (panel<I + 1>(M, K, A, ars, acs, B + j * W, ldb, C + j * W, ldc, accumulate),
                     true)
                  : false) ||
             ...);
    }
    (std::make_integer_sequence<int, NV - 1>{});
  }

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
    for (i64 r = 0; r < rows; ++r) {
      T* o = dst + r * ldp;
      copy_row(src + r * ld, d, o);
      for (i64 j = d; j < ldp; ++j) o[j] = T(0);
    }
  }

  // ---- forward ----

  struct FwdSlice {
    T *kp, *vp;  // the keys and values of one head, packed (K x ldk), (K x ldv)
    T *qt, *st, *ot, *m, *l, *alpha, *zero;
    i64* lim;
    std::uint32_t* words;
  };

  struct FwdGeom {
    i64 Br, Bc, ldk, ldv;
  };

  static FwdSlice carve_fwd(Carver& cv, const AttnArgs<T>& a, const FwdGeom& g) {
    FwdSlice s{};
    s.kp = cv.take<T>(a.K * g.ldk);
    s.vp = cv.take<T>(a.K * g.ldv);
    s.qt = cv.take<T>(a.D * g.Br);
    s.st = cv.take<T>(g.Bc * g.Br);
    s.ot = cv.take<T>(std::max<i64>(a.Dv, 1) * g.Br);
    s.m = cv.take<T>(g.Br);
    s.l = cv.take<T>(g.Br);
    s.alpha = cv.take<T>(g.Br);
    s.zero = cv.take<T>(g.Br);
    s.lim = cv.take<i64>(g.Br);
    s.words = cv.take<std::uint32_t>(g.Bc + 8);
    return s;
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
    // Limits per query lane; padded lanes see every key with score 0.
    i64 lmax = 0, lmin = a.K;
    bool any_zero = false;
    for (i64 r = 0; r < brp; ++r) {
      i64 L = r < br ? a.mask.len(b, q0 + r) : a.K;
      s.zero[r] = L == 0 ? T(1) : T(0);
      any_zero = any_zero || L == 0;
      if (L == 0) L = a.K;
      s.lim[r] = L;
      lmax = std::max(lmax, L);
      lmin = std::min(lmin, L);
    }
    // q^T scaled, zero in the padded lanes.
    for (i64 r = 0; r < brp; ++r) {
      const T* qr = r < br ? a.q.row(b, h, q0 + r) : nullptr;
      for (i64 d = 0; d < D; ++d) s.qt[d * brp + r] = qr ? qr[d] * scale : T(0);
    }
    for (i64 r = 0; r < brp; r += W) {
      V::store(s.m + r, V::set1(-std::numeric_limits<T>::infinity()));
      V::store(s.l + r, V::zero());
    }
    std::fill(s.ot, s.ot + Dv * brp, T(0));
    const std::uint64_t row0 = static_cast<std::uint64_t>(n * a.Q + q0);
    for (i64 c0 = 0; c0 < lmax; c0 += Bc) {
      const i64 bc = std::min(Bc, lmax - c0);
      // S^T (bc x brp) = k_j (bc x D) q^T (D x brp)
      gemm(bc, brp, D, s.kp + c0 * g.ldk, g.ldk, 1, s.qt, brp, s.st, brp, false);
      if (any_zero || c0 + bc > lmin) mask_tile(s.st, bc, brp, c0, s.lim, s.zero);
      // Online softmax, vectors along the queries; two chains per reduction
      // to hide the latency of max and add.
      for (i64 j = 0; j < brp; j += W) {
        const R mo = V::load(s.m + j);
        R m0 = mo, m1 = mo;
        i64 c = 0;
        for (; c + 2 <= bc; c += 2) {
          m0 = V::max(m0, V::load(s.st + c * brp + j));
          m1 = V::max(m1, V::load(s.st + (c + 1) * brp + j));
        }
        if (c < bc) m0 = V::max(m0, V::load(s.st + c * brp + j));
        const R mx = V::max(m0, m1);
        const R al = V::exp(V::sub(mo, mx));
        R s0 = V::zero(), s1 = V::zero();
        for (c = 0; c + 2 <= bc; c += 2) {
          const R p0 = V::exp(V::sub(V::load(s.st + c * brp + j), mx));
          const R p1 = V::exp(V::sub(V::load(s.st + (c + 1) * brp + j), mx));
          V::store(s.st + c * brp + j, p0);
          V::store(s.st + (c + 1) * brp + j, p1);
          s0 = V::add(s0, p0);
          s1 = V::add(s1, p1);
        }
        if (c < bc) {
          const R p0 = V::exp(V::sub(V::load(s.st + c * brp + j), mx));
          V::store(s.st + c * brp + j, p0);
          s0 = V::add(s0, p0);
        }
        V::store(s.l + j, V::fma(V::load(s.l + j), al, V::add(s0, s1)));
        V::store(s.m + j, mx);
        V::store(s.alpha + j, al);
      }
      if (a.drop.on)
        dropout_tile(a.drop, row0, a.K, c0, br, brp, bc, s.st, nullptr, nullptr, s.words);
      if (c0 != 0) {
        for (i64 d = 0; d < Dv; ++d)
          for (i64 j = 0; j < brp; j += W)
            V::store(s.ot + d * brp + j, V::mul(V::load(s.ot + d * brp + j), V::load(s.alpha + j)));
      }
      // O^T (Dv x brp) += v_j^T (Dv x bc) P^T (bc x brp); v_j^T(d, c) = vp[(c0 + c) * ldv + d].
      gemm(Dv, brp, bc, s.vp + c0 * g.ldv, 1, g.ldv, s.st, brp, s.ot, brp, true);
    }
  }

  static void forward_tile(const AttnArgs<T>& a, const FwdGeom& g, i64 n, i64 q0, i64 br,
                           const FwdSlice& s) {
    attend_tile(a, g, n, q0, br, s);
    const i64 b = n / a.H, h = n % a.H;
    const i64 brp = round_up(br, W);
    for (i64 r = 0; r < br; ++r) {
      const T inv = T(1) / s.l[r];
      T* orow = a.o.row(b, h, q0 + r);
      for (i64 d = 0; d < a.Dv; ++d) orow[d] = s.ot[d * brp + r] * inv;
      if (a.lse) a.lse[n * a.Q + q0 + r] = s.m[r] + std::log(s.l[r]);
    }
  }

  // Requires K >= 1 and Q >= 1.
  static void forward(const AttnArgs<T>& a, AttnTiles t) {
    if (small_problem(a, t)) return forward_small(a);
    const i64 N = a.B * a.H;
    FwdGeom g{};
    g.Br = round_up(std::max<i64>(t.br, W), W);
    g.Bc = std::max<i64>(t.bc, 1);
    g.ldk = packed_ld(a.D);
    g.ldv = packed_ld(a.Dv);
    const i64 nqt = ceil_div(a.Q, g.Br);
    const i64 units = N * nqt;
    Carver count(nullptr);
    carve_fwd(count, a, g);
    const std::size_t slice = count.used();
    i64 work = N * a.Q * a.K * (a.D + a.Dv);
    if (a.mask.causal) work /= 2;
    const int threads = static_cast<int>(std::min<i64>(team_size(work), units));
    std::byte* ws = tls_workspace.get(slice * static_cast<std::size_t>(threads));
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      Carver cv(ws + slice * static_cast<std::size_t>(omp_get_thread_num()));
      const FwdSlice s = carve_fwd(cv, a, g);
      i64 packed = -1;  // the head whose keys and values s.kp, s.vp hold
      // Heads one after the other (each thread packs a head once), in a head
      // the last query tiles first: under a causal mask they are the longest.
#pragma omp for schedule(dynamic, 1)
      for (i64 u = 0; u < units; ++u) {
        const i64 n = u / nqt, i = nqt - 1 - u % nqt;
        if (n != packed) {
          const i64 b = n / a.H, h = n % a.H;
          pack_rows(a.k.row(b, h, 0), a.k.st, a.K, a.D, g.ldk, s.kp);
          pack_rows(a.v.row(b, h, 0), a.v.st, a.K, a.Dv, g.ldv, s.vp);
          packed = n;
        }
        forward_tile(a, g, n, i * g.Br, std::min(g.Br, a.Q - i * g.Br), s);
      }
    }
    tls_workspace.trim();
  }

  // ---- backward ----

  struct BwdSlice {
    T *qt, *dot, *qrows, *dorows, *krows, *vrows, *dqacc, *di, *lse, *zero;
    T *pt, *dpt, *wt, *dkacc, *dvacc;
    i64 *lim, *tmax, *tmin;
    unsigned char* tzero;
    std::uint32_t* words;
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
    s.dqacc = cv.take<T>(a.Q * g.Dp);
    s.di = cv.take<T>(g.Qp);
    s.lse = cv.take<T>(g.Qp);
    s.zero = cv.take<T>(g.Qp);
    s.lim = cv.take<i64>(g.Qp);
    s.tmax = cv.take<i64>(g.nqt);
    s.tmin = cv.take<i64>(g.nqt);
    s.tzero = cv.take<unsigned char>(g.nqt);
    s.pt = cv.take<T>(g.Bc * g.Br);
    s.dpt = cv.take<T>(g.Bc * g.Br);
    s.wt = a.drop.on ? cv.take<T>(g.Bc * g.Br) : nullptr;
    s.dkacc = cv.take<T>(g.Bc * g.Dp);
    s.dvacc = cv.take<T>(g.Bc * std::max<i64>(g.Dvp, W));
    s.words = cv.take<std::uint32_t>(g.Bc + 8);
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
    for (i64 i = 0; i < g.nqt; ++i)
      for (i64 rl = 0; rl < std::min(Br, round_up(Q - i * Br, W)); ++rl) {
        const i64 r = i * Br + rl;
        T* qt = s.qt + i * D * Br + rl;
        T* dot = s.dot + i * Dv * Br + rl;
        if (r < Q) {
          const T* qr = a.q.row(b, h, r);
          const T* gr = a.dout.row(b, h, r);
          for (i64 d = 0; d < D; ++d) qt[d * Br] = qr[d] * scale;
          for (i64 d = 0; d < Dv; ++d) dot[d * Br] = gr[d];
        } else {
          for (i64 d = 0; d < D; ++d) qt[d * Br] = T(0);
          for (i64 d = 0; d < Dv; ++d) dot[d * Br] = T(0);
        }
      }
    pack_rows(a.q.row(b, h, 0), a.q.st, Q, D, g.ldq, s.qrows);
    pack_rows(a.dout.row(b, h, 0), a.dout.st, Q, Dv, g.ldo, s.dorows);
    const i64 k_first = kt_begin * Bc, k_last = std::min(K, kt_end * Bc);
    pack_rows(a.k.row(b, h, k_first), a.k.st, k_last - k_first, D, g.ldk, s.krows);
    pack_rows(a.v.row(b, h, k_first), a.v.st, k_last - k_first, Dv, g.ldv, s.vrows);
    for (i64 r = 0; r < Qp; ++r) {
      if (r < Q) {
        const T* gr = a.dout.row(b, h, r);
        const T* orow = a.o.row(b, h, r);
        T acc = 0;
        for (i64 d = 0; d < Dv; ++d) acc += gr[d] * orow[d];
        s.di[r] = acc;
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
    for (i64 i = 0; i < g.nqt; ++i) {
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
    std::fill(s.dqacc, s.dqacc + Q * Dp, T(0));
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
        gemm(bce, brp, D, kj, g.ldk, 1, s.qt + i * D * Br, Br, s.pt, brp, false);
        if (s.tzero[i] || c0 + bce > s.tmin[i])
          mask_tile(s.pt, bce, brp, c0, s.lim + q0, s.zero + q0);
        for (i64 c = 0; c < bce; ++c)
          for (i64 j = 0; j < brp; j += W) {
            T* p = s.pt + c * brp + j;
            V::store(p, V::exp(V::sub(V::load(p), V::load(s.lse + q0 + j))));
          }
        // dP^T = v_j dO_i^T
        gemm(bce, brp, Dv, vj, g.ldv, 1, s.dot + i * Dv * Br, Br, s.dpt, brp, false);
        const T* wt = s.pt;
        if (a.drop.on) {
          dropout_tile(a.drop, static_cast<std::uint64_t>(n * Q + q0), K, c0, br, brp, bce, s.pt,
                       s.wt, s.dpt, s.words);
          wt = s.wt;
        }
        // dV_j += W^T dO_i
        gemm(bce, Dvp, br, wt, brp, 1, s.dorows + q0 * g.ldo, g.ldo, s.dvacc, Dvp, true);
        // dS^T = P^T o (dP^T - D_i) * scale, 0 on rows of length 0
        const R sc = V::set1(scale);
        for (i64 c = 0; c < bce; ++c)
          for (i64 j = 0; j < brp; j += W) {
            T* dp = s.dpt + c * brp + j;
            const R ds = V::mul(
                V::mul(V::load(s.pt + c * brp + j), V::sub(V::load(dp), V::load(s.di + q0 + j))),
                sc);
            V::store(dp, ds);
          }
        if (s.tzero[i])
          for (i64 c = 0; c < bce; ++c)
            for (i64 r = 0; r < br; ++r)
              if (s.zero[q0 + r] != T(0)) s.dpt[c * brp + r] = T(0);
        // dK_j += dS^T q_i ; dQ_i += dS k_j
        gemm(bce, Dp, br, s.dpt, brp, 1, s.qrows + q0 * g.ldq, g.ldq, s.dkacc, Dp, true);
        gemm(br, Dp, bce, s.dpt, 1, brp, kj, g.ldk, s.dqacc + q0 * Dp, Dp, true);
      }
      for (i64 c = 0; c < bc; ++c) {
        copy_row(s.dkacc + c * Dp, D, a.dk.row(b, h, c0 + c));
        copy_row(s.dvacc + c * Dvp, Dv, a.dv.row(b, h, c0 + c));
      }
    }
  }

  // Requires K >= 1 and Q >= 1.
  static void backward(const AttnArgs<T>& a, AttnTiles t) {
    // The small path needs the forward's saved buffers; without them, tiles.
    if (small_problem(a, t) && a.saved) return backward_small(a);
    const i64 N = a.B * a.H;
    BwdGeom g{};
    g.Br = round_up(std::max<i64>(t.br, W), W);
    g.Bc = std::max<i64>(t.bc, 1);
    g.Qp = round_up(a.Q, W);
    g.Dp = round_up(a.D, W);
    g.Dvp = round_up(a.Dv, W);
    g.nqt = ceil_div(a.Q, g.Br);
    g.nkt = ceil_div(a.K, g.Bc);
    g.ldq = packed_ld(a.D);
    g.ldk = packed_ld(a.D);
    g.ldo = packed_ld(a.Dv);
    g.ldv = packed_ld(a.Dv);
    i64 work = N * a.Q * a.K * (a.D + a.Dv) * 5 / 2;
    if (a.mask.causal) work /= 2;
    const int max_threads = team_size(work);
    // Few heads: split each head's keys into chunks, each with a partial dQ.
    g.nkc = N >= max_threads ? 1 : std::min(g.nkt, ceil_div(4 * max_threads, N));
    const i64 units = N * g.nkc, nkc = g.nkc;
    const int threads = static_cast<int>(std::min<i64>(max_threads, units));
    Carver count(nullptr);
    carve_bwd(count, a, g);
    const std::size_t slice = count.used();
    const std::size_t partial_bytes =
        nkc > 1 ? static_cast<std::size_t>(units * a.Q * g.Dp) * sizeof(T) : 0;
    std::byte* ws =
        tls_workspace.get(slice * static_cast<std::size_t>(threads) + partial_bytes + 64);
    T* partial = reinterpret_cast<T*>(ws + slice * static_cast<std::size_t>(threads));
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      Carver cv(ws + slice * static_cast<std::size_t>(omp_get_thread_num()));
      const BwdSlice s = carve_bwd(cv, a, g);
#pragma omp for schedule(dynamic, 1)
      for (i64 u = 0; u < units; ++u) {
        const i64 n = u / nkc, kc = u % nkc;
        backward_unit(a, g, n, kc * g.nkt / nkc, (kc + 1) * g.nkt / nkc, s);
        const i64 b = n / a.H, h = n % a.H;
        if (nkc == 1) {
          for (i64 r = 0; r < a.Q; ++r) copy_row(s.dqacc + r * g.Dp, a.D, a.dq.row(b, h, r));
        } else {
          std::copy(s.dqacc, s.dqacc + a.Q * g.Dp, partial + u * a.Q * g.Dp);
        }
      }
      if (nkc > 1) {
#pragma omp for schedule(static)
        for (i64 nr = 0; nr < N * a.Q; ++nr) {
          const i64 n = nr / a.Q, r = nr % a.Q;
          T* dst = a.dq.row(n / a.H, n % a.H, r);
          for (i64 d = 0; d < a.D; ++d) {
            T acc = 0;
            for (i64 kc = 0; kc < nkc; ++kc) acc += partial[((n * nkc + kc) * a.Q + r) * g.Dp + d];
            dst[d] = acc;
          }
        }
      }
    }
    tls_workspace.trim();
  }

  // ---- small problems: W heads at once, one per lane ----
  //
  // With a handful of queries and keys per head (d2l's Transformer: 10 steps,
  // head dim 8) tiles would be mostly padding and per-tile overhead. Here a
  // group of W heads is gathered into lane-interleaved buffers, x[(t * d + i)
  // * W + lane], and every product is elementwise across the lanes: no
  // padding of queries or head dims, no broadcasts, the same arithmetic per
  // head as the tiled kernels. Groups run in parallel.

  static bool small_problem(const AttnArgs<T>& a, AttnTiles t) {
    return attention_small_problem(a.Q, a.K, a.D, a.Dv, t.small);
  }

  // Group gi's part of a.saved: q (scaled), k, v, out, each lane-interleaved.
  struct Saved {
    T *qg, *kg, *vg, *og;
  };
  static Saved saved_group(const AttnArgs<T>& a, i64 gi) {
    const i64 Dv = a.Dv;
    T* base = a.saved + gi * W * (a.Q * a.D + a.K * a.D + a.K * Dv + a.Q * Dv);
    Saved sv;
    sv.qg = base;
    sv.kg = sv.qg + a.Q * a.D * W;
    sv.vg = sv.kg + a.K * a.D * W;
    sv.og = sv.vg + a.K * Dv * W;
    return sv;
  }

  // buf[(t * d + i) * W + lane] = scale * x(head n0 + lane, t, i); lanes past
  // the last head are 0.
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
  // lane 0 (their results are never written back). 32-bit offsets (one
  // gather or scatter instruction per vector on AVX-512) when every offset
  // fits, as it does for any tensor under 2^31 elements.
  template <class U>
  static bool lane_offsets(const HeadView<U>& x, const Group& g, i64* off, std::int32_t* off32) {
    bool fits = true;
    for (int lane = 0; lane < W; ++lane) {
      const int l = lane < g.lanes ? lane : 0;
      off[lane] = g.b[l] * x.sb + g.h[l] * x.sh;
      fits = fits && off[lane] <= std::numeric_limits<std::int32_t>::max();
      off32[lane] = static_cast<std::int32_t>(off[lane]);
    }
    return fits;
  }

  // buf[(t * d + i) * W + lane] = scale * x(head n0 + lane, t, i).
  template <class I>
  static void gather_rows(const HeadView<const T>& x, const I* off, i64 rows, i64 d, T scale,
                          T* buf) {
    const R sc = V::set1(scale);
    for (i64 t = 0; t < rows; ++t)
      for (i64 i = 0; i < d; ++i)
        V::store(buf + (t * d + i) * W, V::mul(V::gather(x.ptr + t * x.st + i, off), sc));
  }
  static void gather(const HeadView<const T>& x, const Group& g, i64 rows, i64 d, T scale, T* buf) {
    alignas(64) i64 off[W];
    alignas(64) std::int32_t off32[W];
    if (lane_offsets(x, g, off, off32))
      gather_rows(x, off32, rows, d, scale, buf);
    else
      gather_rows(x, off, rows, d, scale, buf);
  }

  // x(head n0 + lane, t, i) = scale * buf[(t * d + i) * W + lane] for the real lanes.
  template <class I>
  static void scatter_rows(const T* buf, const Group& g, const I* off, i64 rows, i64 d, T scale,
                           const HeadView<T>& x) {
    const R sc = V::set1(scale);
    for (i64 t = 0; t < rows; ++t)
      for (i64 i = 0; i < d; ++i) {
        const R v = V::mul(V::load(buf + (t * d + i) * W), sc);
        T* base = x.ptr + t * x.st + i;
        if (g.lanes == W) {
          V::scatter(base, off, v);
        } else {
          alignas(64) T tmp[W];
          V::store(tmp, v);
          for (int lane = 0; lane < g.lanes; ++lane) base[off[lane]] = tmp[lane];
        }
      }
  }
  static void scatter(const T* buf, const Group& g, i64 rows, i64 d, T scale,
                      const HeadView<T>& x) {
    alignas(64) i64 off[W];
    alignas(64) std::int32_t off32[W];
    if (lane_offsets(x, g, off, off32))
      scatter_rows(buf, g, off32, rows, d, scale, x);
    else
      scatter_rows(buf, g, off, rows, d, scale, x);
  }

  // out[c] = sum_i x[i] y[c][i] over d, for c < rows, per lane; x and y
  // lane-interleaved with row length d. Four rows at a time, so that four
  // independent chains hide the FMA latency.
  static void dot_rows(const T* x, const T* y, i64 rows, i64 d, T* out) {
    i64 c = 0;
    for (; c + 4 <= rows; c += 4) {
      R s0 = V::zero(), s1 = V::zero(), s2 = V::zero(), s3 = V::zero();
      const T* y0 = y + c * d * W;
      for (i64 i = 0; i < d; ++i) {
        const R xv = V::load(x + i * W);
        s0 = V::fma(xv, V::load(y0 + i * W), s0);
        s1 = V::fma(xv, V::load(y0 + (d + i) * W), s1);
        s2 = V::fma(xv, V::load(y0 + (2 * d + i) * W), s2);
        s3 = V::fma(xv, V::load(y0 + (3 * d + i) * W), s3);
      }
      V::store(out + c * W, s0);
      V::store(out + (c + 1) * W, s1);
      V::store(out + (c + 2) * W, s2);
      V::store(out + (c + 3) * W, s3);
    }
    for (; c < rows; ++c) {
      R s0 = V::zero();
      for (i64 i = 0; i < d; ++i) s0 = V::fma(V::load(x + i * W), V::load(y + (c * d + i) * W), s0);
      V::store(out + c * W, s0);
    }
  }

  // out[i] = sum_c p[c * ps] y[c][i] for i < d, per lane (ps: the stride of
  // p in elements, W for a vector of rows).
  static void weigh_rows(const T* p, i64 ps, const T* y, i64 rows, i64 d, T* out) {
    i64 i = 0;
    for (; i + 4 <= d; i += 4) {
      R s0 = V::zero(), s1 = V::zero(), s2 = V::zero(), s3 = V::zero();
      for (i64 c = 0; c < rows; ++c) {
        const R pc = V::load(p + c * ps);
        const T* yc = y + (c * d + i) * W;
        s0 = V::fma(pc, V::load(yc), s0);
        s1 = V::fma(pc, V::load(yc + W), s1);
        s2 = V::fma(pc, V::load(yc + 2 * W), s2);
        s3 = V::fma(pc, V::load(yc + 3 * W), s3);
      }
      V::store(out + i * W, s0);
      V::store(out + (i + 1) * W, s1);
      V::store(out + (i + 2) * W, s2);
      V::store(out + (i + 3) * W, s3);
    }
    for (; i < d; ++i) {
      R s0 = V::zero();
      for (i64 c = 0; c < rows; ++c)
        s0 = V::fma(V::load(p + c * ps), V::load(y + (c * d + i) * W), s0);
      V::store(out + i * W, s0);
    }
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
    T *qg, *kg, *vg, *dog, *dqg, *dkg, *dvg, *s, *p, *dp, *o, *di, *lse, *zero, *keep;
    T* dkeep;  // the group's dropout multipliers (small_dropout_masks)
    T *wq, *dsq;  // backward: every query's weights (after dropout) and dS, (Q, K) x W
    i64* lim;
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
    s.s = cv.take<T>(K * W);
    s.o = cv.take<T>(Dv * W);
    s.zero = cv.take<T>(W);
    s.keep = cv.take<T>(W);
    s.lim = cv.take<i64>(W);
    if (a.drop.on) {
      s.words = cv.take<std::uint32_t>(W * Q * K + 8);
      s.dkeep = cv.take<T>(Q * K * W);
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

  // The scores of query q for every lane: s[c] = q . k_c, masked: keys past a
  // lane's limit -inf, every key 0 on a lane whose row has length 0.
  static void small_scores(const AttnArgs<T>& a, const Group& g, i64 q, const SmallSlice& s) {
    const i64 K = a.K;
    dot_rows(s.qg + q * a.D * W, s.kg, K, a.D, s.s);
    bool mask = false;
    for (int lane = 0; lane < W; ++lane) {
      i64 L = lane < g.lanes ? a.mask.len(g.b[lane], q) : K;
      s.zero[lane] = L == 0 ? T(1) : T(0);
      s.keep[lane] = L == 0 ? T(0) : T(1);
      mask = mask || L < K;
      s.lim[lane] = L == 0 ? K : L;
    }
    if (!mask) return;
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    for (i64 c = 0; c < K; ++c) {
      T* sc = s.s + c * W;
#pragma omp simd
      for (int lane = 0; lane < W; ++lane) {
        T x = c < s.lim[lane] ? sc[lane] : kNegInf;
        sc[lane] = s.zero[lane] != T(0) ? T(0) : x;
      }
    }
  }

  // The dropout multipliers of the whole group, keep[(q * K + c) * W + lane]
  // = the multiplier of (head n0 + lane, q, c) (0 on lanes past the last
  // head). The group's elements are one contiguous stretch of the dropout
  // stream, so its words come from one vectorized pass over the counters.
  static void small_dropout_masks(const AttnArgs<T>& a, const Group& g, std::uint32_t* words,
                                  T* keep) {
    const i64 QK = a.Q * a.K;
    const std::uint32_t* wd =
        dropout_words(a.drop, static_cast<std::uint64_t>(g.n0 * QK), g.lanes * QK, words);
    const T scale = static_cast<T>(a.drop.scale);
    const std::uint32_t threshold = a.drop.threshold;
    for (int lane = 0; lane < W; ++lane) {
      const std::uint32_t* wl = wd + lane * QK;
      if (lane < g.lanes) {
        for (i64 j = 0; j < QK; ++j) keep[j * W + lane] = (wl[j] >> 8) >= threshold ? scale : T(0);
      } else {
        for (i64 j = 0; j < QK; ++j) keep[j * W + lane] = T(0);
      }
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
    const int threads = static_cast<int>(std::min<i64>(team_size(work), groups));
    std::byte* ws = tls_workspace.get(slice * static_cast<std::size_t>(threads));
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      Carver cv(ws + slice * static_cast<std::size_t>(omp_get_thread_num()));
      const SmallSlice s0 = carve_small(cv, a, backward);
#pragma omp for schedule(static)
      for (i64 gi = 0; gi < groups; ++gi) {
        SmallSlice s = s0;
        body(make_group(a, gi * W), gi, s);
      }
    }
    tls_workspace.trim();
  }

  static void forward_small(const AttnArgs<T>& a) {
    const i64 N = a.B * a.H, Q = a.Q, K = a.K, D = a.D, Dv = a.Dv;
    for_each_group(a, false, N * Q * K * (D + Dv), [&](const Group& g, i64 gi, SmallSlice& s) {
      T* og = nullptr;  // the normalized output, kept for the backward
      if (a.saved) {
        const Saved sv = saved_group(a, gi);
        s.qg = sv.qg;
        s.kg = sv.kg;
        s.vg = sv.vg;
        og = sv.og;
      }
      gather(a.q, g, Q, D, static_cast<T>(a.scale), s.qg);
      gather(a.k, g, K, D, T(1), s.kg);
      gather(a.v, g, K, Dv, T(1), s.vg);
      if (a.drop.on) small_dropout_masks(a, g, s.words, s.dkeep);
      for (i64 q = 0; q < Q; ++q) {
        small_scores(a, g, q, s);
        R mx = V::set1(-std::numeric_limits<T>::infinity());
        for (i64 c = 0; c < K; ++c) mx = V::max(mx, V::load(s.s + c * W));
        R l = V::zero();
        for (i64 c = 0; c < K; ++c) {
          const R p = V::exp(V::sub(V::load(s.s + c * W), mx));
          V::store(s.s + c * W, p);
          l = V::add(l, p);
        }
        if (a.drop.on) small_dropout(s.dkeep + q * K * W, K, s.s, nullptr, nullptr);
        T* o = og ? og + q * Dv * W : s.o;
        weigh_rows(s.s, W, s.vg, K, Dv, o);
        const R inv = V::div(V::set1(T(1)), l);
        for (i64 d = 0; d < Dv; ++d) V::store(o + d * W, V::mul(V::load(o + d * W), inv));
        scatter(o, g, 1, Dv, T(1), HeadView<T>{a.o.ptr + q * a.o.st, a.o.sb, a.o.sh, a.o.st});
        if (a.lse) {
          alignas(64) T lv[W], mv[W];
          V::store(lv, l);
          V::store(mv, mx);
          for (int lane = 0; lane < g.lanes; ++lane)
            a.lse[(g.n0 + lane) * Q + q] = mv[lane] + std::log(lv[lane]);
        }
      }
    });
  }

  static void backward_small(const AttnArgs<T>& a) {
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
          for (int lane = 0; lane < W; ++lane)
            for (i64 q = 0; q < Q; ++q)
              s.lse[q * W + lane] = lane < g.lanes ? a.lse[(g.n0 + lane) * Q + q] : T(0);
          if (a.drop.on) small_dropout_masks(a, g, s.words, s.dkeep);
          for (i64 q = 0; q < Q; ++q) {
            // P = exp(S - lse); dP = dO v^T
            small_scores(a, g, q, s);
            const R lse = V::load(s.lse + q * W);
            T* p = s.wq + q * K * W;  // P, then the weights after dropout
            for (i64 c = 0; c < K; ++c)
              V::store(p + c * W, V::exp(V::sub(V::load(s.s + c * W), lse)));
            dot_rows(s.dog + q * Dv * W, s.vg, K, Dv, s.dp);
            const T* pp = p;  // P before dropout
            if (a.drop.on) {
              std::copy(p, p + K * W, s.p);
              small_dropout(s.dkeep + q * K * W, K, s.p, p, s.dp);
              pp = s.p;
            }
            // dS = P o (dP - D_i), 0 on rows of length 0; dQ = scale dS k
            T* ds = s.dsq + q * K * W;
            const R di = V::load(s.di + q * W), keep = V::load(s.keep);
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

  // ---- decode ----

  // s . k over d, vectors plus a scalar tail.
  static T dot(const T* x, const T* y, i64 d) {
    R acc = V::zero();
    i64 i = 0;
    for (; i + W <= d; i += W) acc = V::fma(V::load(x + i), V::load(y + i), acc);
    T sum = V::hsum(acc);
    for (; i < d; ++i) sum += x[i] * y[i];
    return sum;
  }

  // sc[c] = x . k_c for c < n, k_c = k + c * ks; four keys at a time (four
  // independent FMA chains), a scalar tail over the head dim.
  static void scores(const T* x, const T* k, i64 ks, i64 n, i64 d, T* sc) {
    const i64 dv = d / W * W;
    i64 c = 0;
    for (; c + 4 <= n; c += 4) {
      const T* k0 = k + c * ks;
      R s0 = V::zero(), s1 = V::zero(), s2 = V::zero(), s3 = V::zero();
      for (i64 i = 0; i < dv; i += W) {
        const R xv = V::load(x + i);
        s0 = V::fma(xv, V::load(k0 + i), s0);
        s1 = V::fma(xv, V::load(k0 + ks + i), s1);
        s2 = V::fma(xv, V::load(k0 + 2 * ks + i), s2);
        s3 = V::fma(xv, V::load(k0 + 3 * ks + i), s3);
      }
      T t0 = V::hsum(s0), t1 = V::hsum(s1), t2 = V::hsum(s2), t3 = V::hsum(s3);
      for (i64 i = dv; i < d; ++i) {
        t0 += x[i] * k0[i];
        t1 += x[i] * k0[ks + i];
        t2 += x[i] * k0[2 * ks + i];
        t3 += x[i] * k0[3 * ks + i];
      }
      sc[c] = t0;
      sc[c + 1] = t1;
      sc[c + 2] = t2;
      sc[c + 3] = t3;
    }
    for (; c < n; ++c) sc[c] = dot(x, k + c * ks, d);
  }

  // o (Dv) = sum_c p[c] v_c over keys [ka, kb).
  static void weighted_sum(const T* p, const T* vb, i64 vst, i64 ka, i64 kb, i64 Dv, T* o) {
    i64 d = 0;
    for (; d + 4 * W <= Dv; d += 4 * W) {
      R acc0 = V::zero(), acc1 = V::zero(), acc2 = V::zero(), acc3 = V::zero();
      for (i64 c = ka; c < kb; ++c) {
        const R pc = V::set1(p[c - ka]);
        const T* vr = vb + c * vst + d;
        acc0 = V::fma(pc, V::load(vr), acc0);
        acc1 = V::fma(pc, V::load(vr + W), acc1);
        acc2 = V::fma(pc, V::load(vr + 2 * W), acc2);
        acc3 = V::fma(pc, V::load(vr + 3 * W), acc3);
      }
      V::store(o + d, acc0);
      V::store(o + d + W, acc1);
      V::store(o + d + 2 * W, acc2);
      V::store(o + d + 3 * W, acc3);
    }
    for (; d + W <= Dv; d += W) {
      R acc = V::zero();
      for (i64 c = ka; c < kb; ++c)
        acc = V::fma(V::set1(p[c - ka]), V::load(vb + c * vst + d), acc);
      V::store(o + d, acc);
    }
    for (; d < Dv; ++d) {
      T acc = 0;
      for (i64 c = ka; c < kb; ++c) acc += p[c - ka] * vb[c * vst + d];
      o[d] = acc;
    }
  }

  // Query r of head n over keys [ka, kb): m, l and the unnormalized o (Dv).
  static void decode_part(const AttnArgs<T>& a, i64 n, i64 r, i64 ka, i64 kb, T* qs, T* sc, T& m,
                          T& l, T* o) {
    const i64 b = n / a.H, h = n % a.H;
    const i64 L = a.mask.len(b, r);
    const i64 e = std::min(kb, L == 0 ? a.K : L);
    if (ka >= e) {
      m = -std::numeric_limits<T>::infinity();
      l = 0;
      std::fill(o, o + a.Dv, T(0));
      return;
    }
    const T scale = static_cast<T>(a.scale);
    const T* qr = a.q.row(b, h, r);
    for (i64 d = 0; d < a.D; ++d) qs[d] = qr[d] * scale;
    const T* kb0 = a.k.row(b, h, 0);
    const i64 len = e - ka;
    if (L == 0) {
      std::fill(sc, sc + len, T(0));
    } else {
      scores(qs, kb0 + ka * a.k.st, a.k.st, len, a.D, sc);
    }
    T mx = -std::numeric_limits<T>::infinity();
    for (i64 c = 0; c < len; ++c) mx = std::max(mx, sc[c]);
    R sum = V::zero();
    i64 c = 0;
    const R mxv = V::set1(mx);
    for (; c + W <= len; c += W) {
      const R p = V::exp(V::sub(V::load(sc + c), mxv));
      V::store(sc + c, p);
      sum = V::add(sum, p);
    }
    T tail = 0;
    if (c < len) {
      alignas(64) T buf[W];
      std::fill(buf, buf + W, -std::numeric_limits<T>::infinity());
      std::copy(sc + c, sc + len, buf);
      V::store(buf, V::exp(V::sub(V::load(buf), mxv)));
      for (i64 i = 0; i < len - c; ++i) {
        sc[c + i] = buf[i];
        tail += buf[i];
      }
    }
    m = mx;
    l = V::hsum(sum) + tail;
    weighted_sum(sc, a.v.row(b, h, 0), a.v.st, ka, e, a.Dv, o);
  }

  static void decode(const AttnArgs<T>& a) {
    const i64 N = a.B * a.H, Q = a.Q, K = a.K, Dv = a.Dv;
    const i64 work = N * Q * K * (a.D + Dv);
    const int max_threads = team_size(work);
    // Few heads and a long cache: split the keys (flash-decoding).
    constexpr i64 kMinChunk = 256;
    const i64 nch = N >= max_threads
                        ? 1
                        : std::max<i64>(1, std::min(ceil_div(2 * max_threads, N), K / kMinChunk));
    const i64 chunk = ceil_div(K, nch);
    const i64 units = N * nch;
    const int threads = static_cast<int>(std::min<i64>(max_threads, units));
    Carver count(nullptr);
    count.take<T>(a.D);
    count.take<T>(chunk + W);
    count.take<T>(std::max<i64>(Dv, 1));
    const std::size_t slice = count.used();
    const std::size_t parts = nch > 1 ? static_cast<std::size_t>(units * Q * (Dv + 2)) : 0;
    std::byte* ws =
        tls_workspace.get(slice * static_cast<std::size_t>(threads) + parts * sizeof(T) + 64);
    T* part = reinterpret_cast<T*>(ws + slice * static_cast<std::size_t>(threads));
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      Carver cv(ws + slice * static_cast<std::size_t>(omp_get_thread_num()));
      T* qs = cv.take<T>(a.D);
      T* sc = cv.take<T>(chunk + W);
      T* o = cv.take<T>(std::max<i64>(Dv, 1));
#pragma omp for schedule(dynamic, 1)
      for (i64 u = 0; u < units; ++u) {
        const i64 n = u / nch, ch = u % nch;
        const i64 ka = ch * chunk, kb = std::min(K, ka + chunk);
        for (i64 r = 0; r < Q; ++r) {
          T m, l;
          if (nch == 1) {
            decode_part(a, n, r, ka, kb, qs, sc, m, l, o);
            T* out = a.o.row(n / a.H, n % a.H, r);
            const T inv = T(1) / l;
            for (i64 d = 0; d < Dv; ++d) out[d] = o[d] * inv;
          } else {
            T* pr = part + ((n * Q + r) * nch + ch) * (Dv + 2);
            decode_part(a, n, r, ka, kb, qs, sc, pr[0], pr[1], pr + 2);
          }
        }
      }
      if (nch > 1) {
#pragma omp for schedule(static)
        for (i64 nr = 0; nr < N * Q; ++nr) {
          const T* pr = part + nr * nch * (Dv + 2);
          T mx = -std::numeric_limits<T>::infinity();
          for (i64 ch = 0; ch < nch; ++ch) mx = std::max(mx, pr[ch * (Dv + 2)]);
          T l = 0;
          for (i64 ch = 0; ch < nch; ++ch)
            l += pr[ch * (Dv + 2) + 1] * std::exp(pr[ch * (Dv + 2)] - mx);
          const i64 n = nr / Q, r = nr % Q;
          T* out = a.o.row(n / a.H, n % a.H, r);
          for (i64 d = 0; d < Dv; ++d) {
            T acc = 0;
            for (i64 ch = 0; ch < nch; ++ch)
              acc += pr[ch * (Dv + 2) + 2 + d] * std::exp(pr[ch * (Dv + 2)] - mx);
            out[d] = acc / l;
          }
        }
      }
    }
    tls_workspace.trim();
  }

  static AttnKernelTable<T> table(const char* name, AttnTiles tiles) {
    return AttnKernelTable<T>{name, W, tiles, &forward, &backward, &decode};
  }
};

}  // namespace
}  // namespace attn::detail
