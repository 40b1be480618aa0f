// Layer normalization over the last dim: forward kernel and backward rule.
//
//   mean = sum_j x_j / D,  var = sum_j (x_j - mean)^2 / D,  rstd = (var + eps)^-1/2
//   xhat = (x - mean) rstd,  y = xhat w + b
//
//   with gw = g w (g where there is no weight):
//   dx_j = rstd (gw_j - mean_k gw_k - xhat_j mean_k(gw_k xhat_k))
//   dw = sum_rows g xhat,  db = sum_rows g
//
// The forward saves the contiguous input and per-row mean and rstd (2 numbers
// per row), and the backward recomputes xhat from them. Variance is two-pass
// (sum of squared deviations), so a large common offset does not cancel.
// Rows run in parallel; dw and db are summed over rows in column blocks, so
// every thread owns its slice of the result (no atomics, no partial buffers).
#include "attn/ops/norm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/core/threads.h"
#include "attn/ops/dropout.h"
#include "core/parallel.h"
#include "kernels/philox/philox.h"
#include "kernels/vec/vec_math.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

namespace {

constexpr std::int64_t kColBlock = 64;

// y = (x - mu) rs w + b for one row (w, b may be null).
template <class T>
inline void ln_apply(const T* xr, const T* w, const T* b, T* yr, T mu, T rs, std::int64_t d) {
  if (w && b) {
#pragma omp simd
    for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
  } else if (w) {
#pragma omp simd
    for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mu) * rs * w[j];
  } else if (b) {
#pragma omp simd
    for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mu) * rs + b[j];
  } else {
#pragma omp simd
    for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mu) * rs;
  }
}

// The order of a row's sums, written out rather than left to the
// vectorizer (it is the order GCC 12 chose for AVX-512 f32, and the one the
// 16-row statistics below repeat): 16 partial sums, p[l] adding the terms
// of elements l, l + 16, ... below the last multiple of 16 in turn, the
// remaining elements' added to p[0] in turn, then 0 + p[0] + p[1] + ... +
// p[15]. add(p, l, j) adds element j's term(s) to the partial sums p[n][l]
// (one array per sum: ln_row_backward keeps two).
constexpr int kPartials = 16;

// Rows go in blocks of kStatRows (a task each, and on AVX-512 one set of
// statistics for them all: ln_stats16).
constexpr std::int64_t kStatRows = 16;

// f(r0, r1) for each block of `per_block` rows of `rows` (the last may be
// short), the blocks over the threads where the rows of d numbers are at
// least `grain` numbers in all.
template <class F>
void for_row_blocks(std::int64_t rows, std::int64_t d, F&& f, std::int64_t per_block = kStatRows,
                    std::int64_t grain = parallel_grain()) {
  const std::int64_t blocks = (rows + per_block - 1) / per_block;
  detail::parallel_for(blocks, detail::loop_threads(blocks > 1 && rows * d >= grain),
                       [&](std::int64_t blk) {
                         const std::int64_t r0 = blk * per_block;
                         f(r0, std::min(rows, r0 + per_block));
                       });
}

// a b + c: one fused multiply-add where the build has them (as GCC's
// contraction gave at -O2, and as the 16-row statistics compute it, whatever
// the optimization level), else a product and a sum.
template <class T>
inline T mul_add(T a, T b, T c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

template <class T, int N, class Add>
inline void ordered_sums(std::int64_t d, T (&total)[N], Add add) {
  T p[N][kPartials] = {};
  std::int64_t j = 0;
  for (; j + kPartials <= d; j += kPartials)
#pragma omp simd
    for (int l = 0; l < kPartials; ++l) add(p, l, j + l);
  for (; j < d; ++j) add(p, 0, j);
  for (int n = 0; n < N; ++n) {
    T s = 0;
    for (int l = 0; l < kPartials; ++l) s += p[n][l];
    total[n] = s;
  }
}

// One row: mean, rstd, and y = (x - mean) rstd w + b (w, b may be null).
template <class T>
inline void ln_row(const T* xr, const T* w, const T* b, T* yr, T& mean, T& rstd, std::int64_t d,
                   T eps) {
  T s[1], ss[1];
  ordered_sums(d, s, [&](T(&p)[1][kPartials], int l, std::int64_t j) { p[0][l] += xr[j]; });
  const T mu = s[0] / static_cast<T>(d);
  ordered_sums(d, ss, [&](T(&p)[1][kPartials], int l, std::int64_t j) {
    const T v = xr[j] - mu;
    p[0][l] = mul_add(v, v, p[0][l]);
  });
  T rs = T(1) / std::sqrt(ss[0] / static_cast<T>(d) + eps);
  mean = mu;
  rstd = rs;
  ln_apply(xr, w, b, yr, mu, rs, d);
}

#if defined(__AVX512F__)
// GCC 12 warns inside its own AVX-512 intrinsics (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// ---- the statistics of 16 rows at once (f32, d a multiple of 16) ----
//
// ln_row's two sums (ordered_sums) keep 16 partial sums, one vector here,
// and then add them one after another: 16 dependent scalar additions per
// sum, most of a row's time at d2l's 32 columns. Here the 16 rows' partial
// sums are transposed in registers (lane r of vector l: row r's partial l),
// so that the 16 additions run once for 16 rows, in the same order: the
// same bits (test LayerNorm.RowBlocksSameBitsAsOneRow).

// r[a] lane c -> r[c] lane a.
inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + m], 128-bit block k: column 4k + m of rows 4i .. 4i + 3.
  __m512 u[16];
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]),
                  c = _mm512_castps_pd(t[4 * i + 2]), e = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, e));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, e));
  }
  for (int m = 0; m < 4; ++m) {
    const __m512 plo = _mm512_shuffle_f32x4(u[m], u[4 + m], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 phi = _mm512_shuffle_f32x4(u[m], u[4 + m], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 qlo = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 qhi = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], _MM_SHUFFLE(3, 2, 3, 2));
    r[m] = _mm512_shuffle_f32x4(plo, qlo, _MM_SHUFFLE(2, 0, 2, 0));
    r[4 + m] = _mm512_shuffle_f32x4(plo, qlo, _MM_SHUFFLE(3, 1, 3, 1));
    r[8 + m] = _mm512_shuffle_f32x4(phi, qhi, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + m] = _mm512_shuffle_f32x4(phi, qhi, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// 0 + lane 0 + lane 1 + ... + lane 15 of each row's partial sums, 16 rows
// at once.
inline __m512 lane_sums16(__m512 (&acc)[16]) {
  transpose16(acc);
  __m512 s = _mm512_setzero_ps();
  for (int l = 0; l < 16; ++l) s = _mm512_add_ps(s, acc[l]);
  return s;
}

// mean and rstd of the 16 rows at x (row stride d), as ln_row computes them.
inline void ln_stats16(const float* x, std::int64_t d, float eps, float* mean, float* rstd) {
  __m512 acc[16];
  for (int r = 0; r < 16; ++r) {
    __m512 a = _mm512_setzero_ps();
    for (std::int64_t j = 0; j < d; j += 16) a = _mm512_add_ps(a, _mm512_loadu_ps(x + r * d + j));
    acc[r] = a;
  }
  const __m512 fd = _mm512_set1_ps(static_cast<float>(d));
  _mm512_storeu_ps(mean, _mm512_div_ps(lane_sums16(acc), fd));
  for (int r = 0; r < 16; ++r) {
    const __m512 mu = _mm512_set1_ps(mean[r]);
    __m512 a = _mm512_setzero_ps();
    for (std::int64_t j = 0; j < d; j += 16) {
      const __m512 v = _mm512_sub_ps(_mm512_loadu_ps(x + r * d + j), mu);
      a = _mm512_fmadd_ps(v, v, a);
    }
    acc[r] = a;
  }
  const __m512 var = _mm512_add_ps(_mm512_div_ps(lane_sums16(acc), fd), _mm512_set1_ps(eps));
  _mm512_storeu_ps(rstd, _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(var)));
}
#pragma GCC diagnostic pop
#endif

// Rows [r0, r1): ln_row each, the statistics of full blocks of kStatRows
// rows at once where the build has AVX-512 (f32, d a multiple of 16).
template <class T>
inline void ln_rows(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, std::int64_t r0,
                    std::int64_t r1, std::int64_t d, T eps) {
  std::int64_t r = r0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    if (d % 16 == 0)
      for (; r + kStatRows <= r1; r += kStatRows) {
        ln_stats16(x + r * d, d, eps, mean + r, rstd + r);
        for (std::int64_t i = r; i < r + kStatRows; ++i)
          ln_apply(x + i * d, w, b, y + i * d, mean[i], rstd[i], d);
      }
  }
#endif
  for (; r < r1; ++r) ln_row(x + r * d, w, b, y + r * d, mean[r], rstd[r], d, eps);
}

template <class T>
void forward_rows(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, std::int64_t rows,
                  std::int64_t d, T eps) {
  for_row_blocks(rows, d, [&](std::int64_t r0, std::int64_t r1) {
    ln_rows(x, w, b, y, mean, rstd, r0, r1, d, eps);
  });
}

// dx of one row from its sums a = mean(gw), c = mean(gw xhat) (w may be null).
template <class T>
inline void ln_row_backward_apply(const T* gr, const T* xr, const T* w, T mu, T rs, T a, T c, T* o,
                                  std::int64_t d) {
#pragma omp simd
  for (std::int64_t j = 0; j < d; ++j) {
    T gw = w ? gr[j] * w[j] : gr[j];
    o[j] = rs * (gw - a - (xr[j] - mu) * rs * c);
  }
}

// One row of dx from g (w may be null).
template <class T>
inline void ln_row_backward(const T* gr, const T* xr, const T* w, T mu, T rs, T* o,
                            std::int64_t d) {
  T sums[2];  // of gw and of gw xhat
  ordered_sums(d, sums, [&](T(&p)[2][kPartials], int l, std::int64_t j) {
    T gw = w ? gr[j] * w[j] : gr[j];
    p[0][l] += gw;
    p[1][l] = mul_add(gw * (xr[j] - mu), rs, p[1][l]);
  });
  const T a = sums[0] / static_cast<T>(d), c = sums[1] / static_cast<T>(d);
  ln_row_backward_apply(gr, xr, w, mu, rs, a, c, o, d);
}

#if defined(__AVX512F__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// ln_row_backward's sums a and c of the 16 rows at g and x (f32, a weight,
// d a multiple of 16), as it computes them (see ln_stats16).
inline void ln_backward_sums16(const float* g, const float* x, const float* w, const float* mean,
                               const float* rstd, std::int64_t d, float* a, float* c) {
  __m512 acc_gw[16], acc_gwx[16];
  for (int r = 0; r < 16; ++r) {
    const __m512 mu = _mm512_set1_ps(mean[r]), rs = _mm512_set1_ps(rstd[r]);
    __m512 s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps();
    for (std::int64_t j = 0; j < d; j += 16) {
      const __m512 gw = _mm512_mul_ps(_mm512_loadu_ps(g + r * d + j), _mm512_loadu_ps(w + j));
      const __m512 t = _mm512_mul_ps(gw, _mm512_sub_ps(_mm512_loadu_ps(x + r * d + j), mu));
      s1 = _mm512_add_ps(s1, gw);
      s2 = _mm512_fmadd_ps(t, rs, s2);
    }
    acc_gw[r] = s1;
    acc_gwx[r] = s2;
  }
  const __m512 fd = _mm512_set1_ps(static_cast<float>(d));
  _mm512_storeu_ps(a, _mm512_div_ps(lane_sums16(acc_gw), fd));
  _mm512_storeu_ps(c, _mm512_div_ps(lane_sums16(acc_gwx), fd));
}
#pragma GCC diagnostic pop
#endif

// dx of rows [r0, r1): ln_row_backward each, the sums of full blocks of
// kStatRows rows at once where the build has AVX-512 (f32, a weight, d a
// multiple of 16).
template <class T>
inline void ln_rows_backward(const T* g, const T* x, const T* w, const T* mean, const T* rstd,
                             T* dx, std::int64_t r0, std::int64_t r1, std::int64_t d) {
  std::int64_t r = r0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    if (w && d % 16 == 0)
      for (; r + kStatRows <= r1; r += kStatRows) {
        alignas(64) float a[kStatRows], c[kStatRows];
        ln_backward_sums16(g + r * d, x + r * d, w, mean + r, rstd + r, d, a, c);
        for (std::int64_t i = 0; i < kStatRows; ++i)
          ln_row_backward_apply(g + (r + i) * d, x + (r + i) * d, w, mean[r + i], rstd[r + i], a[i],
                                c[i], dx + (r + i) * d, d);
      }
  }
#endif
  for (; r < r1; ++r) ln_row_backward(g + r * d, x + r * d, w, mean[r], rstd[r], dx + r * d, d);
}

template <class T>
void backward_input(const T* g, const T* x, const T* w, const T* mean, const T* rstd, T* dx,
                    std::int64_t rows, std::int64_t d) {
  for_row_blocks(rows, d, [&](std::int64_t r0, std::int64_t r1) {
    ln_rows_backward(g, x, w, mean, rstd, dx, r0, r1, d);
  });
}

// dw = sum_rows g xhat, db = sum_rows g (either pointer may be null).
template <class T>
void backward_params(const T* g, const T* x, const T* mean, const T* rstd, T* dw, T* db,
                     std::int64_t rows, std::int64_t d) {
  detail::parallel_for((d + kColBlock - 1) / kColBlock,
                       detail::loop_threads(d > kColBlock && rows * d >= parallel_grain()),
                       [&](std::int64_t blk) {
                         const std::int64_t c0 = blk * kColBlock, c1 = std::min(d, c0 + kColBlock);
                         if (dw) std::fill(dw + c0, dw + c1, T(0));
                         if (db) std::fill(db + c0, db + c1, T(0));
                         for (std::int64_t r = 0; r < rows; ++r) {
                           const T* gr = g + r * d;
                           const T* xr = x + r * d;
                           const T mu = mean[r], rs = rstd[r];
                           if (dw) {
#pragma omp simd
                             for (std::int64_t j = c0; j < c1; ++j)
                               dw[j] += gr[j] * (xr[j] - mu) * rs;
                           }
                           if (db) {
#pragma omp simd
                             for (std::int64_t j = c0; j < c1; ++j) db[j] += gr[j];
                           }
                         }
                       });
}

// ---- dropout, residual and layer norm in one op ----
//
// Rows go in blocks of about kBlockElems elements. For each block the Philox
// words of its elements are made (element i reads word i % 4 of counter
// offset + i / 4, as ops dropout does: the same mask), the block's sums
// s = base + keep * x / (1 - p) are written, and its rows are normalized while
// they are in cache. The forward also keeps each element's keep decision, a
// byte (a quarter of s's size), for the backward: drawing the words again
// took about 3% of d2l's training step.
constexpr std::int64_t kBlockElems = 1024;
// Philox costs about 20 vector instructions per 4 elements, so threads pay
// off on fewer elements than for one arithmetic op (ops dropout's grain).
constexpr std::int64_t kAddNormGrain = 8192;

struct DropoutMask {
  std::uint64_t seed, offset;
  std::uint32_t threshold;  // keep when (bits >> 8) >= threshold
  double scale;  // 1 / (1 - p)
};

// The Philox words of elements [e0, e1): the returned pointer's [i - e0] is
// element i's word.
inline const std::uint32_t* mask_words(const DropoutMask& m, std::int64_t e0, std::int64_t e1) {
  thread_local std::vector<std::uint32_t> words;
  const std::int64_t c0 = e0 / 4, c1 = (e1 + 3) / 4;
  if (words.size() < static_cast<std::size_t>(4 * (c1 - c0)))
    words.resize(static_cast<std::size_t>(4 * (c1 - c0)));
  std::uint32_t* w = words.data();
  detail::philox_words(m.offset + static_cast<std::uint64_t>(c0), m.seed, c1 - c0, w);
  return w + (e0 - 4 * c0);
}

// Rows [r0, r1) of add_norm_forward. The residual sum is a pass of its own
// over the masked x, as in dropout_add (dropout.cpp): in one expression GCC
// may contract base + x * scale into one fused multiply-add, which rounds
// differently from dropout then add.
template <class T>
[[gnu::noinline]] void add_norm_rows(const T* base, const T* x, const T* w, const T* b, T* s, T* y,
                                     T* mean, T* rstd, std::uint8_t* keep, std::int64_t r0,
                                     std::int64_t r1, std::int64_t d, T eps, const DropoutMask& m) {
  const T scale = static_cast<T>(m.scale);
  const std::int64_t e0 = r0 * d, len = (r1 - r0) * d;
  const std::uint32_t* bits = mask_words(m, e0, e0 + len);
  const T *bs = base + e0, *xs = x + e0;
  T* ss = s + e0;
  std::uint8_t* ks = keep + e0;
  const std::uint32_t threshold = m.threshold;
#pragma omp simd
  for (std::int64_t i = 0; i < len; ++i) ks[i] = (bits[i] >> 8) >= threshold ? 1 : 0;
#pragma omp simd
  for (std::int64_t i = 0; i < len; ++i)
    ss[i] = detail::select_bits(ks[i] != 0, xs[i] * scale, T(0));
#pragma omp simd
  for (std::int64_t i = 0; i < len; ++i) ss[i] = bs[i] + ss[i];
  ln_rows(s, w, b, y, mean, rstd, r0, r1, d, eps);
}

// f(r0, r1) for the blocks of rows of about kBlockElems elements.
template <class F>
void for_mask_blocks(std::int64_t rows, std::int64_t d, F&& f) {
  for_row_blocks(rows, d, f, std::max<std::int64_t>(1, kBlockElems / d),
                 kAddNormGrain * grain_scale());
}

template <class T>
void add_norm_forward(const T* base, const T* x, const T* w, const T* b, T* s, T* y, T* mean,
                      T* rstd, std::uint8_t* keep, std::int64_t rows, std::int64_t d, T eps,
                      const DropoutMask& m) {
  for_mask_blocks(rows, d, [&](std::int64_t r0, std::int64_t r1) {
    add_norm_rows(base, x, w, b, s, y, mean, rstd, keep, r0, r1, d, eps, m);
  });
}

// Rows [r0, r1) of add_norm_backward, out of line as add_norm_rows (its
// mask loop stays vectorized).
template <class T>
[[gnu::noinline]] void add_norm_backward_rows(const T* g, const T* s, const T* w, const T* mean,
                                              const T* rstd, const std::uint8_t* keep, T* dbase,
                                              T* dx, std::int64_t r0, std::int64_t r1,
                                              std::int64_t d, const DropoutMask& m) {
  ln_rows_backward(g, s, w, mean, rstd, dbase, r0, r1, d);
  if (!dx) return;
  const T scale = static_cast<T>(m.scale);
  const std::int64_t e0 = r0 * d, len = (r1 - r0) * d;
  const std::uint8_t* ks = keep + e0;
  const T* db = dbase + e0;
  T* o = dx + e0;
#pragma omp simd
  for (std::int64_t i = 0; i < len; ++i)
    o[i] = detail::select_bits(ks[i] != 0, db[i] * scale, T(0));
}

// dbase = the layer norm's input gradient; dx (may be null) = dbase through
// the dropout mask.
template <class T>
void add_norm_backward(const T* g, const T* s, const T* w, const T* mean, const T* rstd,
                       const std::uint8_t* keep, T* dbase, T* dx, std::int64_t rows, std::int64_t d,
                       const DropoutMask& m) {
  for_mask_blocks(rows, d, [&](std::int64_t r0, std::int64_t r1) {
    add_norm_backward_rows(g, s, w, mean, rstd, keep, dbase, dx, r0, r1, d, m);
  });
}

void check_param(const Tensor& p, const Tensor& x, std::int64_t d, const char* name,
                 const char* op = "layer_norm") {
  if (!p.defined()) return;
  ATTN_CHECK(p.shape() == Shape{d}, ShapeError, "{}: {} must have shape [{}] for input {}, got {}",
             op, name, d, shape_str(x.shape()), shape_str(p.shape()));
  ATTN_CHECK(p.dtype() == x.dtype(), DTypeError, "{}: {} is {} but the input is {}", op, name,
             dtype_name(p.dtype()), dtype_name(x.dtype()));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  ATTN_CHECK(x.dim() >= 1, ShapeError,
             "layer_norm: expected an input (..., D), got a 0-dim tensor");
  ATTN_CHECK(eps >= 0, ValueError, "layer_norm: eps must be >= 0, got {}", eps);
  const std::int64_t d = x.size(-1);
  check_param(weight, x, d, "weight");
  check_param(bias, x, d, "bias");
  const std::int64_t rows = d == 0 ? 0 : x.numel() / d;

  Tensor xc = x.detach().contiguous();
  Tensor wc = weight.defined() ? weight.detach().contiguous() : Tensor();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty({rows}, x.dtype());
  Tensor rstd = Tensor::empty({rows}, x.dtype());
  dispatch_float(x.dtype(), "layer_norm", [&]<class T>() {
    forward_rows<T>(xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                    bc.defined() ? bc.data<T>() : nullptr, y.data<T>(), mean.data<T>(),
                    rstd.data<T>(), rows, d, static_cast<T>(eps));
  });

  return record(y, "layer_norm", {x, weight, bias},
                [xc, wc, mean, rstd, rows, d](const Tensor& g, const Needs& n) {
                  Tensor gc = g.contiguous();
                  Tensor dx, dw, db;
                  dispatch_float(xc.dtype(), "layer_norm", [&]<class T>() {
                    const T* pw = wc.defined() ? wc.data<T>() : nullptr;
                    if (n[0]) {
                      dx = Tensor::empty(xc.shape(), xc.dtype());
                      backward_input<T>(gc.data<T>(), xc.data<T>(), pw, mean.data<T>(),
                                        rstd.data<T>(), dx.data<T>(), rows, d);
                    }
                    if (n[1]) dw = Tensor::empty({d}, xc.dtype());
                    if (n[2]) db = Tensor::empty({d}, xc.dtype());
                    if (n[1] || n[2])
                      backward_params<T>(gc.data<T>(), xc.data<T>(), mean.data<T>(), rstd.data<T>(),
                                         n[1] ? dw.data<T>() : nullptr,
                                         n[2] ? db.data<T>() : nullptr, rows, d);
                  });
                  return Grads{dx, dw, db};
                });
}

Tensor dropout_add_layer_norm(const Tensor& base, const Tensor& x, double p, bool training,
                              Generator& gen, const Tensor& weight, const Tensor& bias,
                              double eps) {
  ATTN_CHECK(p >= 0.0 && p <= 1.0, ValueError,
             "dropout_add_layer_norm: p must be in [0, 1], got {}", p);
  ATTN_CHECK(
      base.defined() && x.defined() && base.shape() == x.shape() && base.dtype() == x.dtype(),
      ShapeError,
      "dropout_add_layer_norm: base {} {} and x {} {} must have the same shape and dtype",
      dtype_name(base.dtype()), shape_str(base.shape()), dtype_name(x.dtype()),
      shape_str(x.shape()));
  ATTN_CHECK(is_floating(x.dtype()), DTypeError,
             "dropout_add_layer_norm: expected a floating dtype (f32 or f64), got {}",
             dtype_name(x.dtype()));
  // No mask to draw: the two ops (the same numbers, nothing to fuse).
  if (!training || p == 0.0 || p == 1.0)
    return layer_norm(dropout_add(base, x, p, training, gen), weight, bias, eps);
  ATTN_CHECK(x.dim() >= 1, ShapeError,
             "dropout_add_layer_norm: expected inputs (..., D), got 0-dim tensors");
  ATTN_CHECK(eps >= 0, ValueError, "dropout_add_layer_norm: eps must be >= 0, got {}", eps);
  const std::int64_t d = x.size(-1);
  check_param(weight, x, d, "weight", "dropout_add_layer_norm");
  check_param(bias, x, d, "bias", "dropout_add_layer_norm");
  const std::int64_t rows = d == 0 ? 0 : x.numel() / d;

  DropoutMask m;
  m.seed = gen.seed();
  m.offset = gen.reserve(static_cast<std::uint64_t>(x.numel()));
  m.threshold = static_cast<std::uint32_t>(std::ceil(p * 16777216.0));
  m.scale = 1.0 / (1.0 - p);
  Tensor bc = base.detach().contiguous(), xc = x.detach().contiguous();
  Tensor wc = weight.defined() ? weight.detach().contiguous() : Tensor();
  Tensor bsc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor s = Tensor::empty(x.shape(), x.dtype());
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty({rows}, x.dtype());
  Tensor rstd = Tensor::empty({rows}, x.dtype());
  // Each element's keep decision, a byte (attn has no byte dtype: i32 words).
  Tensor keep = Tensor::empty({(x.numel() + 3) / 4}, DType::i32);
  auto* keep_bytes = reinterpret_cast<std::uint8_t*>(keep.data<std::int32_t>());
  dispatch_float(x.dtype(), "dropout_add_layer_norm", [&]<class T>() {
    add_norm_forward<T>(bc.data<T>(), xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                        bsc.defined() ? bsc.data<T>() : nullptr, s.data<T>(), y.data<T>(),
                        mean.data<T>(), rstd.data<T>(), keep_bytes, rows, d, static_cast<T>(eps),
                        m);
  });

  return record(y, "dropout_add_layer_norm", {base, x, weight, bias},
                [s, wc, mean, rstd, keep, rows, d, m](const Tensor& g, const Needs& n) {
                  Tensor gc = g.contiguous();
                  Tensor dbase, dx, dw, db;
                  dispatch_float(s.dtype(), "dropout_add_layer_norm", [&]<class T>() {
                    const T* pw = wc.defined() ? wc.data<T>() : nullptr;
                    if (n[0] || n[1]) {
                      dbase = Tensor::empty(s.shape(), s.dtype());
                      if (n[1]) dx = Tensor::empty(s.shape(), s.dtype());
                      add_norm_backward<T>(
                          gc.data<T>(), s.data<T>(), pw, mean.data<T>(), rstd.data<T>(),
                          reinterpret_cast<const std::uint8_t*>(keep.data<std::int32_t>()),
                          dbase.data<T>(), n[1] ? dx.data<T>() : nullptr, rows, d, m);
                    }
                    if (n[2]) dw = Tensor::empty({d}, s.dtype());
                    if (n[3]) db = Tensor::empty({d}, s.dtype());
                    if (n[2] || n[3])
                      backward_params<T>(gc.data<T>(), s.data<T>(), mean.data<T>(), rstd.data<T>(),
                                         n[2] ? dw.data<T>() : nullptr,
                                         n[3] ? db.data<T>() : nullptr, rows, d);
                  });
                  return Grads{n[0] ? dbase : Tensor(), dx, dw, db};
                });
}

}  // namespace attn
