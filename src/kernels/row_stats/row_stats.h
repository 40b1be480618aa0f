// src/kernels/row_stats/row_stats.h — internal: the largest value of a row of logits and
// log(sum_v exp(x_v)), for decoding's log-softmax of each row
// (seq2seq/decode.cpp), which ranks candidates by log-probability without
// writing the probabilities; and the few candidates for a row's m largest
// values.
//
// row_stats_reference: the exponentials in f32 (exp_simd, Cephes' expf, about
// 2 ulp) summed in f64, plain loops the compiler vectorizes. row_stats: the
// same in AVX-512 or AVX2 + FMA where the CPU has it (checked once, capped
// by ATTN_ISA: vec_form.h; row_stats.cpp): the maximum in four independent
// registers, the exponentials (written once over the vector types,
// row_stats_kernel.h; AVX-512: VecAvx512::exp, the same degree-7
// polynomial, 2^n applied by vscalefps rather than built in the exponent
// bits; AVX2: VecAvx2::stats_exp, exp_simd's own steps, 8 at a time; an
// input below -86.9 gives 0, as exp_simd's) and their f64 sums in four
// independent registers.
// On a row of 8,000 logits the AVX-512 form is 1.8x faster than the
// reference, the AVX2 form 1.43x on an AMD EPYC Zen 1 (17 against 24 us;
// GCC vectorizes the reference in 128-bit registers there). AVX-512's
// exponentials may differ from exp_simd's in their last bit (the
// polynomial's last step fused differently), AVX2's follow exp_simd's steps
// (VecAvx2::stats_exp; the same exponentials where the reference is built
// with FMA), and the sums run in another order: log_sum_exp agrees with the
// reference to a few 1e-9 relative, far inside the f32 rounding of the
// logits themselves (tests/kernels/row_stats_test.cpp).
// NaN logits: ignored by the maximum unless the first is NaN (then the
// maximum is NaN, as in the reference); any NaN makes log_sum_exp NaN.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/vec/vec_form.h"
#include "kernels/vec/vec_math.h"

namespace attn::detail {

struct RowStats {
  float max;
  double log_sum_exp;
};

// row_stats(x, V).max alone (the same NaN rule), for an argmax: one
// compiler-vectorized pass, no exponentials. A NaN first value is returned
// as it is: the vectorized reduction starts its lanes elsewhere and, at
// some optimization levels, dropped it.
inline float row_max(const float* x, std::int64_t V) {
  if (std::isnan(x[0])) return x[0];
  float m = x[0];
#pragma omp simd reduction(max : m)
  for (std::int64_t v = 1; v < V; ++v) m = x[v] > m ? x[v] : m;
  return m;
}

// The first position holding `value` in x (V), or 0 where none does (a NaN).
inline std::int64_t first_equal(const float* x, std::int64_t V, float value) {
  std::int64_t i = 0;
  while (i < V && !(x[i] == value)) ++i;
  return i == V ? 0 : i;
}

// argmax as decoding takes it: the first position of row_max(x, V), so 0
// for a NaN first value.
inline std::int64_t row_argmax(const float* x, std::int64_t V) {
  return first_equal(x, V, row_max(x, V));
}

// out[r] = row_argmax of each of `rows` rows of V (x row-major), the rows
// in parallel where there are enough of them.
void rows_argmax(const float* x, std::int64_t rows, std::int64_t V, std::int64_t* out);

inline RowStats row_stats_reference(const float* x, std::int64_t V) {
  const float m = row_max(x, V);
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t v = 0; v < V; ++v) s += static_cast<double>(exp_simd<float>(x[v] - m));
  return {m, static_cast<double>(m) + std::log(s)};
}

// The statistics of x (V >= 1 values).
RowStats row_stats(const float* x, std::int64_t V);

// The forms of row_stats and row_top_candidates (kernels/vec/vec_form.h): the plain
// loops, and the AVX2 + FMA and AVX-512 F + DQ kernels. row_stats and
// row_top_candidates run row_stats_form(): the best this CPU has, capped by
// ATTN_ISA; the *_on functions run the one named, which this CPU must have
// (row_stats_cpu_has).
bool row_stats_cpu_has(VecForm form);
VecForm row_stats_form();
RowStats row_stats_on(VecForm form, const float* x, std::int64_t V);

// Candidates for the m largest values of a row (beam search's best
// continuations of one beam), without ranking all V. The row's first
// floor(V / 64) * 64 values are cut into 64 lanes (lane l: x[l], x[l + 64],
// ...); each lane's largest value is a value of x, at a position of its own,
// so the m-th largest of the 64 lane maxima, t, is at most the m-th largest
// value of x, and every one of the m largest values of x is at least t.
// Writes to `out` (room for V) the ascending positions of every value at
// least t and returns how many: the m largest among them, usually just those
// (their lanes differ) or a few more. For V >= 64, 1 <= m <= 64 and x free
// of NaN (the caller checks: row_stats' log_sum_exp is NaN then).
//
// row_top_candidates_reference: plain loops. row_top_candidates: the lane
// maxima in four AVX-512 registers and a compare of 16 values at a time, or
// in eight AVX2 registers and a compare of 8, where the CPU has it (the
// same positions), else the reference. The AVX2 form is 10x faster than the
// reference on the Zen 1 (1.6 against 16 us for 8 of 8,000 logits).
std::int64_t row_top_candidates_reference(const float* x, std::int64_t V, std::int64_t m,
                                          std::int64_t* out);
std::int64_t row_top_candidates(const float* x, std::int64_t V, std::int64_t m, std::int64_t* out);
std::int64_t row_top_candidates_on(VecForm form, const float* x, std::int64_t V, std::int64_t m,
                                   std::int64_t* out);

// The kernels of each instruction set, in their own translation units
// (row_stats_avx512.cpp: V >= 64; row_stats_avx2.cpp: V >= 32; x[0] not
// NaN), called by the *_on functions; and the threshold t of
// row_top_candidates, the m-th largest of the 64 lane maxima (reorders
// them), which they share.
RowStats row_stats_avx512(const float* x, std::int64_t V);
std::int64_t row_top_candidates_avx512(const float* x, std::int64_t V, std::int64_t m,
                                       std::int64_t* out);
RowStats row_stats_avx2(const float* x, std::int64_t V);
std::int64_t row_top_candidates_avx2(const float* x, std::int64_t V, std::int64_t m,
                                     std::int64_t* out);
float lane_threshold(float* lanes, std::int64_t m);

}  // namespace attn::detail
