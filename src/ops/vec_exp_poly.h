// src/ops/vec_exp_poly.h — internal: the polynomial steps of the attention
// kernels' exps, written once over a vector type V (set1, fma, mul, add),
// for N registers in lock step: step k of every register, then step k + 1
// (attention_vec_avx2.h, attention_vec_avx512.h: each exp is one long chain
// of dependent operations, and N chains side by side keep the ports busy).
// Included by those headers; the instruction set is the includer's.
#pragma once

namespace attn::detail {
namespace {

// Cephes expf's e^r for r in [-ln(2)/2, ln(2)/2]: 1 + r + r^2 q(r), q of
// degree 5. p[i] = e^r[i].
template <class V, int N>
inline void cephes_exp_poly(const typename V::R* r, typename V::R* p) {
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i)
    p[i] = V::fma(V::set1(1.9875691500e-4f), r[i], V::set1(1.3981999507e-3f));
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) p[i] = V::fma(p[i], r[i], V::set1(8.3334519073e-3f));
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) p[i] = V::fma(p[i], r[i], V::set1(4.1665795894e-2f));
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) p[i] = V::fma(p[i], r[i], V::set1(1.6666665459e-1f));
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) p[i] = V::fma(p[i], r[i], V::set1(5.0000001201e-1f));
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) p[i] = V::fma(V::mul(p[i], r[i]), r[i], V::add(r[i], V::set1(1.0f)));
}

// 2^f for f in [-1/2, 1/2]: a degree-5 polynomial (Chebyshev interpolation,
// 2.4e-7 relative evaluated in f32 by Horner's rule). p[i] = 2^f[i].
template <class V, int N>
inline void exp2_fraction_poly(const typename V::R* f, typename V::R* p) {
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i)
    p[i] = V::fma(V::set1(1.3390863314e-3f), f[i], V::set1(9.6760317683e-3f));
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) p[i] = V::fma(p[i], f[i], V::set1(5.5503569543e-2f));
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) p[i] = V::fma(p[i], f[i], V::set1(2.4022106826e-1f));
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) p[i] = V::fma(p[i], f[i], V::set1(6.9314718246e-1f));
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) p[i] = V::fma(p[i], f[i], V::set1(1.0000001192e+0f));
}

}  // namespace
}  // namespace attn::detail
