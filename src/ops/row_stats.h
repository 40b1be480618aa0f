// src/ops/row_stats.h — internal: the largest value of a row of logits and
// log(sum_v exp(x_v)), for decoding's log-softmax of each row
// (seq2seq/decode.cpp), which ranks candidates by log-probability without
// writing the probabilities.
//
// row_stats_reference: the exponentials in f32 (exp_simd, Cephes' expf, about
// 2 ulp) summed in f64, plain loops the compiler vectorizes. row_stats: the
// same on AVX-512 where the CPU has it (checked once; row_stats.cpp), 1.8x
// faster on a row of 8,000 logits: the maximum in four independent
// registers, the exponentials by the attention kernels' AVX-512 exp
// (VecAvx512::exp: the same degree-7 polynomial, 2^n applied by vscalefps
// rather than built in the exponent bits; an input below -86.9 gives 0, as
// exp_simd's) and their f64 sums in four independent registers. An exponential may
// differ from exp_simd's in its last bit (the polynomial's last step fused
// differently) and the sums run in another order: log_sum_exp agrees with
// the reference to about 1e-9 relative, far inside the f32 rounding of the
// logits themselves (tests/ops/row_stats_test.cpp). NaN logits: ignored by
// the maximum unless the first is NaN (then the maximum is NaN, as in the
// reference); any NaN makes log_sum_exp NaN.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/vec_math.h"

namespace attn::detail {

struct RowStats {
  float max;
  double log_sum_exp;
};

inline RowStats row_stats_reference(const float* x, std::int64_t V) {
  float m = x[0];
#pragma omp simd reduction(max : m)
  for (std::int64_t v = 1; v < V; ++v) m = x[v] > m ? x[v] : m;
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t v = 0; v < V; ++v) s += static_cast<double>(exp_simd<float>(x[v] - m));
  return {m, static_cast<double>(m) + std::log(s)};
}

// The statistics of x (V >= 1 values).
RowStats row_stats(const float* x, std::int64_t V);

}  // namespace attn::detail
