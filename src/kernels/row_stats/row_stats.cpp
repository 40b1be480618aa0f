// kernels/row_stats/row_stats.h: the choice of form, the references and the
// lane threshold; the kernels of each instruction set are in
// row_stats_avx512.cpp and row_stats_avx2.cpp.
#include "kernels/row_stats/row_stats.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "attn/core/threads.h"
#include "core/parallel.h"

namespace attn::detail {

bool row_stats_cpu_has(VecForm form) {
  switch (form) {
    case VecForm::reference: return true;
    case VecForm::avx2:
      return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
    case VecForm::avx512:
      return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512dq") != 0;
    default: return false;
  }
}

VecForm row_stats_form() {
  static const VecForm form = chosen_form(row_stats_cpu_has);
  return form;
}

float lane_threshold(float* lanes, std::int64_t m) {
  std::nth_element(lanes, lanes + (m - 1), lanes + 64, std::greater<float>());
  return lanes[m - 1];
}

// Compiled for the build's target: only the *_avx512 and *_avx2 kernels use
// their instruction sets. Short rows and a NaN first logit: the reference.
RowStats row_stats_on(VecForm form, const float* x, std::int64_t V) {
  switch (form) {
    case VecForm::avx512:
      if (V >= 64 && !std::isnan(x[0])) return row_stats_avx512(x, V);
      break;
    case VecForm::avx2:
      if (V >= 32 && !std::isnan(x[0])) return row_stats_avx2(x, V);
      break;
    default: break;
  }
  return row_stats_reference(x, V);
}

RowStats row_stats(const float* x, std::int64_t V) { return row_stats_on(row_stats_form(), x, V); }

std::int64_t row_top_candidates_reference(const float* x, std::int64_t V, std::int64_t m,
                                          std::int64_t* out) {
  std::int64_t n = 0;
  float lanes[64];
  for (int l = 0; l < 64; ++l) lanes[l] = x[l];
  for (std::int64_t v = 64; v < V / 64 * 64; ++v) lanes[v % 64] = std::max(lanes[v % 64], x[v]);
  const float t = lane_threshold(lanes, m);
  for (std::int64_t v = 0; v < V; ++v)
    if (x[v] >= t) out[n++] = v;
  return n;
}

std::int64_t row_top_candidates_on(VecForm form, const float* x, std::int64_t V, std::int64_t m,
                                   std::int64_t* out) {
  switch (form) {
    case VecForm::avx512: return row_top_candidates_avx512(x, V, m, out);
    case VecForm::avx2: return row_top_candidates_avx2(x, V, m, out);
    default: return row_top_candidates_reference(x, V, m, out);
  }
}

std::int64_t row_top_candidates(const float* x, std::int64_t V, std::int64_t m, std::int64_t* out) {
  return row_top_candidates_on(row_stats_form(), x, V, m, out);
}

void rows_argmax(const float* x, std::int64_t rows, std::int64_t V, std::int64_t* out) {
  parallel_for(rows, loop_threads(rows > 1 && rows * V >= parallel_grain()),
               [&](std::int64_t r) { out[r] = row_argmax(x + r * V, V); });
}

}  // namespace attn::detail
