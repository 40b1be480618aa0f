// src/kernels/vec/vec_math.h — internal: math functions that vectorize inside
// `#pragma omp simd` loops.
//
// glibc's expf only has SIMD variants (libmvec) under -ffast-math, so a plain
// `o[i] = std::exp(x[i])` loop runs one scalar call per element. exp_simd<float>
// is Cephes' expf (ref: S. Moshier, Cephes Math Library, expf.c): range
// reduction x = n ln2 + r with |r| <= ln2 / 2, a degree-7 polynomial for e^r,
// then 2^n built in the exponent bits. Relative error about 2 ulp on the
// normal range; results below about 2^-125 (x < -86.9) flush to 0, x > 88.72 gives
// inf, NaN stays NaN. exp_simd<double> is std::exp (f64 is for checks).
//
// The special cases are selected by bits (select_bits), every comparison made
// for every element: a conditional expression whose comparison is reached
// only on one branch (x < lo ? lo : (x > hi ? hi : x)) is control flow to
// GCC, which may not speculate a comparison that can raise a floating-point
// exception (-ftrapping-math, the default). With AVX-512's masks it
// vectorized such a loop anyway; with AVX2 (a Zen 3, say) the loop stayed
// scalar: softmax cross-entropy ran one element at a time.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace attn::detail {

// c ? a : b with no control flow: bitwise over the floats' bits.
inline float select_bits(bool c, float a, float b) {
  const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(a) & m) |
                              (std::bit_cast<std::uint32_t>(b) & ~m));
}
inline double select_bits(bool c, double a, double b) {
  const std::uint64_t m = 0u - static_cast<std::uint64_t>(c);
  return std::bit_cast<double>((std::bit_cast<std::uint64_t>(a) & m) |
                               (std::bit_cast<std::uint64_t>(b) & ~m));
}

template <class T>
inline T exp_simd(T x) {
  return std::exp(x);
}

template <>
inline float exp_simd<float>(float x) {
  constexpr float kLo = -86.9f;  // keeps n >= -125, so 2^(n-1) is a normal float
  constexpr float kHi = 88.7228394f;  // log(FLT_MAX)
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kC1 = 0.693359375f;  // ln2 split in two for an exact n * C1
  constexpr float kC2 = -2.12194440e-4f;
  const bool lo = (x < kLo);
  const bool hi = (x > kHi);
  const bool nan = (x != x);
  // Below kLo the result is 0 whatever y is, so such an x goes through as 0:
  // at kLo itself p 2^(n-1) is below FLT_MIN, and a product with a subnormal
  // result takes a microcode assist (the AVX2 attention kernels' exp, which
  // does the same, lost about 8% of d2l's attention forward to it on a Zen 1:
  // its masked scores are -inf). Its bits never reach the result.
  const float xc = select_bits(lo, 0.0f, select_bits(hi, kHi, x));
  // n = round(x / ln2) by the 1.5 * 2^23 shifter trick (floorf does not
  // vectorize without -fno-trapping-math).
  constexpr float kShifter = 12582912.0f;
  float n = (xc * kLog2e + kShifter) - kShifter;
  float r = xc - n * kC1 - n * kC2;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n as 2^(n-1) * 2 so that n = 128 (x near log(FLT_MAX)) stays representable.
  std::int32_t e = static_cast<std::int32_t>(n) + 126;
  float scale = std::bit_cast<float>(e << 23);
  float y = p * scale * 2.0f;
  y = select_bits(lo, 0.0f, y);
  y = select_bits(hi, std::numeric_limits<float>::infinity(), y);
  return select_bits(nan, x, y);
}

// tanh and the logistic sigmoid from exp_simd, vectorizable like it (libm's
// tanhf is a scalar call: it took a quarter of d2l 10.4's training time).
// f32: for |x| < 0.25 the odd Taylor polynomial of tanh to x^9 (truncation
// below 1e-8 relative), else sign(x) (1 - e) / (1 + e) with e = exp(-2|x|),
// in [0, 1): about 2 ulp, +-1 beyond |x| = 9, NaN stays NaN. The sigmoid is
// 1 / (1 + e) for x >= 0 and e / (1 + e) below, e = exp(-|x|), so that a
// very negative x keeps its small result's relative precision. f64 (checks)
// takes std::tanh and the same sigmoid with std::exp. Both compute either
// side and select by bits, as exp_simd does.
template <class T>
inline T tanh_simd(T x) {
  return std::tanh(x);
}

template <>
inline float tanh_simd<float>(float x) {
  const float a = std::fabs(x), x2 = x * x;
  const float p =
      x * (1.0f + x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 + x2 * (62.0f / 2835)))));
  const float e = exp_simd(-2.0f * a);
  const float t = std::copysign((1.0f - e) / (1.0f + e), x);
  return select_bits(a < 0.25f, p, t);
}

template <class T>
inline T sigmoid_simd(T x) {
  const T e = exp_simd(-std::fabs(x));
  const T s = T(1) / (T(1) + e);
  return select_bits(x >= 0, s, e * s);
}

}  // namespace attn::detail
