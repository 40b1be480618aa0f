// src/kernels/row_stats/row_stats_kernel.h — internal: the vector forms of
// row_stats and row_top_candidates (row_stats.h), written once over a
// vector type V (kernels/vec/vec_avx2.h, vec_avx512.h: W floats a
// register). Included after its target pragma by row_stats_avx2.cpp and
// row_stats_avx512.cpp, which instantiate it for their V
// (ATTN_ROW_STATS_KERNELS inside the region, ATTN_ROW_STATS_ENTRIES after
// it); internal linkage, as every kernel inside a target region
// (kernels/target.h). No
// standard-library templates in here: their instances, compiled for the
// region's instruction set, could be the ones the linker keeps for every
// caller.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/row_stats/row_stats.h"
#include "kernels/vec/vec_math.h"

namespace attn::detail {
namespace {

// x has V >= 4 W values, x[0] not NaN: the maximum in four registers (a NaN
// load leaves them), then exp(x - max) two registers a step, each widened
// into two registers of doubles, four sums in all.
template <class Vec>
RowStats stats(const float* x, std::int64_t V) {
  using R = typename Vec::R;
  using D = typename Vec::D;
  constexpr int W = Vec::W;
  R m0 = Vec::set1(x[0]), m1 = m0, m2 = m0, m3 = m0;
  std::int64_t v = 0;
  for (; v + 4 * W <= V; v += 4 * W) {
    m0 = Vec::max_keep(Vec::load(x + v), m0);
    m1 = Vec::max_keep(Vec::load(x + v + W), m1);
    m2 = Vec::max_keep(Vec::load(x + v + 2 * W), m2);
    m3 = Vec::max_keep(Vec::load(x + v + 3 * W), m3);
  }
  float lanes[W];
  Vec::store(lanes, Vec::max_keep(Vec::max_keep(m0, m1), Vec::max_keep(m2, m3)));
  float m = lanes[0];
  for (int i = 1; i < W; ++i) m = lanes[i] > m ? lanes[i] : m;
  for (; v < V; ++v) m = x[v] > m ? x[v] : m;
  const R mv = Vec::set1(m);
  D s0 = Vec::zero_d(), s1 = s0, s2 = s0, s3 = s0;
  v = 0;
  for (; v + 2 * W <= V; v += 2 * W) {
    const R e0 = Vec::stats_exp(Vec::sub(Vec::load(x + v), mv));
    const R e1 = Vec::stats_exp(Vec::sub(Vec::load(x + v + W), mv));
    s0 = Vec::add_d(s0, Vec::low_d(e0));
    s1 = Vec::add_d(s1, Vec::high_d(e0));
    s2 = Vec::add_d(s2, Vec::low_d(e1));
    s3 = Vec::add_d(s3, Vec::high_d(e1));
  }
  double sums[W / 2];
  Vec::store_d(sums, Vec::add_d(Vec::add_d(s0, s1), Vec::add_d(s2, s3)));
  double s = 0;
  for (double part : sums) s += part;
  for (; v < V; ++v) s += static_cast<double>(exp_simd<float>(x[v] - m));
  return {m, static_cast<double>(m) + std::log(s)};
}

// The 64 lane maxima in 64 / W registers, the threshold from them, then
// every position at or above it (row_top_candidates, row_stats.h).
template <class Vec>
std::int64_t top_candidates(const float* x, std::int64_t V, std::int64_t m, std::int64_t* out) {
  using R = typename Vec::R;
  constexpr int W = Vec::W, N = 64 / Vec::W;
  R r[N];
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) r[j] = Vec::load(x + W * j);
  const std::int64_t whole = V / 64 * 64;
  for (std::int64_t v = 64; v < whole; v += 64) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) r[j] = Vec::max(r[j], Vec::load(x + v + W * j));
  }
  float lanes[64];
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) Vec::store(lanes + W * j, r[j]);
  const float tf = lane_threshold(lanes, m);
  const R t = Vec::set1(tf);
  std::int64_t v = 0, n = 0;
  for (; v + W <= V; v += W) {
    unsigned mask = Vec::ge_mask(Vec::load(x + v), t);
    for (; mask != 0; mask &= mask - 1) out[n++] = v + __builtin_ctz(mask);
  }
  for (; v < V; ++v)
    if (x[v] >= tf) out[n++] = v;
  return n;
}

}  // namespace
}  // namespace attn::detail

// Inside the region: the kernels over Vec, as stats_<isa> and top_<isa>.
#define ATTN_ROW_STATS_KERNELS(isa, Vec)                                                      \
  namespace attn::detail {                                                                    \
  namespace {                                                                                 \
  RowStats stats_##isa(const float* x, std::int64_t V) { return stats<Vec>(x, V); }           \
  std::int64_t top_##isa(const float* x, std::int64_t V, std::int64_t m, std::int64_t* out) { \
    return top_candidates<Vec>(x, V, m, out);                                                 \
  }                                                                                           \
  }                                                                                           \
  }

// After it, for the baseline: row_stats_<isa> and row_top_candidates_<isa>
// (row_stats.h).
#define ATTN_ROW_STATS_ENTRIES(isa)                                                      \
  namespace attn::detail {                                                               \
  RowStats row_stats_##isa(const float* x, std::int64_t V) { return stats_##isa(x, V); } \
  std::int64_t row_top_candidates_##isa(const float* x, std::int64_t V, std::int64_t m,  \
                                        std::int64_t* out) {                             \
    return top_##isa(x, V, m, out);                                                      \
  }                                                                                      \
  }
