// src/kernels/vec/vec_exp_poly.h — internal: the polynomial steps of the attention
// kernels' exps, written once over a vector type V (set1, fma, mul, add),
// for N registers in lock step: step k of every register, then step k + 1
// (vec_avx2.h, vec_avx512.h: each exp is one long chain
// of dependent operations, and N chains side by side keep the ports busy).
// Included by those headers; the instruction set is the includer's.
#pragma once

namespace attn::detail {
namespace {

// p[i] = c[0] x^(K-1) + c[1] x^(K-2) + ... + c[K-1] at x[i], by Horner's
// rule: fma(c[0], x, c[1]), then fma(p, x, c[k]) for k = 2 .. K - 1.
template <class V, int N, int K>
inline void horner_n(const typename V::R* x, typename V::R* p, const float (&c)[K]) {
  static_assert(K >= 2);
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) p[i] = V::fma(V::set1(c[0]), x[i], V::set1(c[1]));
  for (int k = 2; k < K; ++k) {
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) p[i] = V::fma(p[i], x[i], V::set1(c[k]));
  }
}

// Cephes expf's e^r for r in [-ln(2)/2, ln(2)/2]: 1 + r + r^2 q(r), q of
// degree 5. p[i] = e^r[i].
template <class V, int N>
inline void cephes_exp_poly(const typename V::R* r, typename V::R* p) {
  static constexpr float kQ[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
  horner_n<V, N>(r, p, kQ);
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) p[i] = V::fma(V::mul(p[i], r[i]), r[i], V::add(r[i], V::set1(1.0f)));
}

// 2^f for f in [-1/2, 1/2]: a degree-5 polynomial (Chebyshev interpolation,
// 2.4e-7 relative evaluated in f32 by Horner's rule). p[i] = 2^f[i].
template <class V, int N>
inline void exp2_fraction_poly(const typename V::R* f, typename V::R* p) {
  static constexpr float kC[] = {1.3390863314e-3f, 9.6760317683e-3f, 5.5503569543e-2f,
                                 2.4022106826e-1f, 6.9314718246e-1f, 1.0000001192e+0f};
  horner_n<V, N>(f, p, kC);
}

}  // namespace
}  // namespace attn::detail
