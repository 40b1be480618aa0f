// tests/ops/attention_testing.h — helpers shared by the attention tests:
// a relative difference.
#pragma once

#include <algorithm>
#include <cmath>

#include "attn/ops/attention.h"
#include "testing.h"

namespace attn::testing {

// Max |a - b| relative to max |b| (absolute when b is all zero).
inline double rel_diff(const Tensor& a, const Tensor& b) {
  auto vb = to_vector<double>(b);
  double m = 0;
  for (double x : vb) m = std::max(m, std::fabs(x));
  return max_abs_diff(a, b) / (m > 0 ? m : 1.0);
}

}  // namespace attn::testing
