// src/kernels/attention/attention_decode.h — internal: the decode kernel, inference for a
// few queries against a KV cache: one task per (head, query row) or, for few
// heads and a long cache, per (head, chunk of keys), the chunks' partial
// softmaxes combined afterwards (flash-decoding: ref: Dao et al., "Flash-
// Decoding for long-context inference", 2023). How these headers are
// compiled: attention_common.h.
#pragma once

#include "kernels/attention/attention_common.h"

namespace attn::detail {
namespace {

// Where key (or value) c of one (row, head) lies: in one row of the cache
// (key c at base + c * st) ...
template <class T>
struct KeysInRow {
  const T* base;
  i64 st;
  const T* at(i64 c) const { return base + c * st; }
};

// ... or, through a table, in row rows[c] (key c at base + rows[c] * sb +
// c * st, base the head's first key of row 0).
template <class T>
struct KeysByTable {
  const T* base;
  i64 sb, st;
  const std::int64_t* rows;
  const T* at(i64 c) const { return base + rows[c] * sb + c * st; }
};

template <class V>
struct DecodeAttention {
  ATTN_VEC_NAMES(V);

  // sc[c - ka] = x . k_c for c in [ka, ka + n); four keys at a time (four
  // independent FMA chains), a scalar tail over the head dim.
  template <class Keys>
  static void scores(const T* x, const Keys& keys, i64 ka, i64 n, i64 d, T* sc) {
    const i64 dv = d / W * W;
    i64 c = 0;
    for (; c + 4 <= n; c += 4) {
      const T* k0 = keys.at(ka + c);
      const T* k1 = keys.at(ka + c + 1);
      const T* k2 = keys.at(ka + c + 2);
      const T* k3 = keys.at(ka + c + 3);
      R s0 = V::zero(), s1 = V::zero(), s2 = V::zero(), s3 = V::zero();
      for (i64 i = 0; i < dv; i += W) {
        const R xv = V::load(x + i);
        s0 = V::fma(xv, V::load(k0 + i), s0);
        s1 = V::fma(xv, V::load(k1 + i), s1);
        s2 = V::fma(xv, V::load(k2 + i), s2);
        s3 = V::fma(xv, V::load(k3 + i), s3);
      }
      T t0 = V::hsum(s0), t1 = V::hsum(s1), t2 = V::hsum(s2), t3 = V::hsum(s3);
      for (i64 i = dv; i < d; ++i) {
        t0 += x[i] * k0[i];
        t1 += x[i] * k1[i];
        t2 += x[i] * k2[i];
        t3 += x[i] * k3[i];
      }
      sc[c] = t0;
      sc[c + 1] = t1;
      sc[c + 2] = t2;
      sc[c + 3] = t3;
    }
    for (; c < n; ++c) sc[c] = lane_dot<V>(x, keys.at(ka + c), d);
  }

  // scores() 16 keys at a time where V offers lane_sums and hmax (AVX-512) and the
  // head dim is whole vectors: 16 independent FMA chains, their reductions
  // done together (V::lane_sums), the 16 scores stored as one vector (sc has
  // room for W more). Keys past n repeat the last one (their scores are
  // written past n, never read).
  static constexpr bool kLaneSums = requires(const R* r, R x) {
    V::lane_sums(r);
    V::hmax(x);
  };
  template <class Keys>
  static void scores16(const T* x, const Keys& keys, i64 ka, i64 n, i64 d, T* sc) {
    for (i64 c = 0; c < n; c += 16) {
      const T* kp[16];
      for (int j = 0; j < 16; ++j) kp[j] = keys.at(ka + std::min<i64>(c + j, n - 1));
      R acc[16];
      for (int j = 0; j < 16; ++j) acc[j] = V::zero();
      for (i64 i = 0; i < d; i += W) {
        const R xv = V::load(x + i);
        for (int j = 0; j < 16; ++j) acc[j] = V::fma(xv, V::load(kp[j] + i), acc[j]);
      }
      if constexpr (kLaneSums) V::store(sc + c, V::lane_sums(acc));
    }
  }

  // o (Dv) = sum_c p[c - ka] v_c over values [ka, kb).
  template <class Values>
  static void weighted_sum(const T* p, const Values& vals, i64 ka, i64 kb, i64 Dv, T* o) {
    i64 d = 0;
    for (; d + 4 * W <= Dv; d += 4 * W) {
      R acc0 = V::zero(), acc1 = V::zero(), acc2 = V::zero(), acc3 = V::zero();
      for (i64 c = ka; c < kb; ++c) {
        const R pc = V::set1(p[c - ka]);
        const T* vr = vals.at(c) + d;
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
      for (i64 c = ka; c < kb; ++c) acc = V::fma(V::set1(p[c - ka]), V::load(vals.at(c) + d), acc);
      V::store(o + d, acc);
    }
    for (; d < Dv; ++d) {
      T acc = 0;
      for (i64 c = ka; c < kb; ++c) acc += p[c - ka] * vals.at(c)[d];
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
    if (a.rotary_q) turn_row(a, qs, qs, a.query_pos0(b) + r, T(1));
    const i64 hk = h / a.kv_group;  // the head of k and v
    // Key c's relative-position bias at bq[-c] (AttnArgs::bias).
    const T* bq = a.bias ? a.bias + h * a.bias_row() + a.query_pos0(b) + r + a.K - 1 : nullptr;
    if (a.kv_key_rows) {
      const std::int64_t* rows = a.kv_key_rows + b * a.K;
      finish_part(a, qs, KeysByTable<T>{a.k.row(0, hk, 0), a.k.sb, a.k.st, rows},
                  KeysByTable<T>{a.v.row(0, hk, 0), a.v.sb, a.v.st, rows}, L, ka, e, bq, sc, m, l,
                  o);
    } else {
      const i64 bk = a.kv_rows ? a.kv_rows[b] : b;  // the row of k and v
      finish_part(a, qs, KeysInRow<T>{a.k.row(bk, hk, 0), a.k.st},
                  KeysInRow<T>{a.v.row(bk, hk, 0), a.v.st}, L, ka, e, bq, sc, m, l, o);
    }
  }

  // decode_part's softmax and weighted sum, keys and values found by `keys`
  // and `vals`, key c's bias at bq[-c] where bq is set.
  template <class Keys>
  static void finish_part(const AttnArgs<T>& a, const T* qs, const Keys& keys, const Keys& vals,
                          i64 L, i64 ka, i64 e, const T* bq, T* sc, T& m, T& l, T* o) {
    const i64 len = e - ka;
    if (L == 0) {
      std::fill(sc, sc + len, T(0));
    } else if (kLaneSums && a.D % W == 0 && len > 4) {
      scores16(qs, keys, ka, len, a.D, sc);
    } else {
      scores(qs, keys, ka, len, a.D, sc);
    }
    if (bq && L != 0)
      for (i64 c = 0; c < len; ++c) sc[c] += bq[-(ka + c)];
    if constexpr (kLaneSums) {
      // Whole vectors: the scores padded with -inf (exp gives 0) to a
      // multiple of W (sc has room), the maximum and the sum reduced once.
      const i64 nv = ceil_div(len, i64{W}) * W;
      std::fill(sc + len, sc + nv, -std::numeric_limits<T>::infinity());
      R mv = V::load(sc);
      for (i64 c = W; c < nv; c += W) mv = V::max(mv, V::load(sc + c));
      const T mx = V::hmax(mv);
      const R mxv = V::set1(mx);
      const R sum = exp_shifted<V>(sc, nv / W, W, mxv, sc);
      m = mx;
      l = V::hsum(sum);
      weighted_sum(sc, vals, ka, e, a.Dv, o);
      return;
    }
    T mx = -std::numeric_limits<T>::infinity();
    for (i64 c = 0; c < len; ++c) mx = std::max(mx, sc[c]);
    const R mxv = V::set1(mx);
    const R sum = exp_shifted<V>(sc, len / W, W, mxv, sc);
    i64 c = len / W * W;
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
    weighted_sum(sc, vals, ka, e, a.Dv, o);
  }

  static void decode(const AttnArgs<T>& a) {
    const i64 N = a.B * a.H, Q = a.Q, K = a.K, Dv = a.Dv;
    const i64 work = N * Q * K * (a.D + Dv);
    const int max_threads = team_size(work);
    // Few heads and a long cache: split the keys (flash-decoding).
    constexpr i64 kMinChunk = 256;
    const i64 nch = N >= max_threads || !a.split_keys
                        ? 1
                        : std::max<i64>(1, std::min(ceil_div(2 * max_threads, N), K / kMinChunk));
    const i64 chunk = ceil_div(K, nch);
    const i64 units = N * nch;
    const int threads =
        static_cast<int>(std::min<i64>(std::min(max_threads, team_threads(work)), units));
    Carver count(nullptr);
    count.take<T>(a.D);
    count.take<T>(chunk + W);
    count.take<T>(std::max<i64>(Dv, 1));
    const std::size_t slice = count.used();
    const std::size_t parts = nch > 1 ? static_cast<std::size_t>(units * Q * (Dv + 2)) : 0;
    std::byte* ws =
        tls_workspace.get(slice * static_cast<std::size_t>(threads) + parts * sizeof(T) + 64);
    T* part = reinterpret_cast<T*>(ws + slice * static_cast<std::size_t>(threads));
    run_team(threads, [&] {
      const DenormalsAreZero flush(a.bias != nullptr);
      Carver cv(ws + slice * static_cast<std::size_t>(omp_get_thread_num()));
      T* qs = cv.take<T>(a.D);
      T* sc = cv.take<T>(chunk + W);
      T* o = cv.take<T>(std::max<i64>(Dv, 1));
      // Static: a unit is a few hundred multiply-adds, and handing them out
      // one at a time (dynamic, 1) cost a translation 6-8% in the shared
      // counter's traffic.
#pragma omp for schedule(static)
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
    });
    tls_workspace.trim();
  }
};

}  // namespace
}  // namespace attn::detail
