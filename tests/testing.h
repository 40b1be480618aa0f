// tests/testing.h — helpers shared by the tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>

#include "attn/attn.h"

namespace attn::testing {

// A random f64 leaf that requires grad (for gradcheck).
inline Tensor leaf64(const Shape& shape, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator gen(seed);
  Tensor t = uniform(lo, hi, shape, gen, DType::f64);
  t.requires_grad_();
  return t;
}

inline Tensor rand32(const Shape& shape, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator gen(seed);
  return uniform(lo, hi, shape, gen, DType::f32);
}

// Max |a - b| over all elements (shapes must match).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  auto va = to_vector<double>(a), vb = to_vector<double>(b);
  double m = 0;
  for (std::size_t i = 0; i < va.size(); ++i) m = std::max(m, std::fabs(va[i] - vb[i]));
  return m;
}

inline void expect_gradcheck(const autograd::Function& fn, const std::vector<Tensor>& inputs,
                             const autograd::GradcheckOptions& options = {}) {
  auto r = autograd::gradcheck(fn, inputs, options);
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace attn::testing

// EXPECT_GRADCHECK(fn, {inputs...}): the f64 gradient check passes.
#define EXPECT_GRADCHECK(...)                                \
  do {                                                       \
    SCOPED_TRACE("gradcheck");                               \
    ::attn::testing::expect_gradcheck(__VA_ARGS__);          \
  } while (false)
