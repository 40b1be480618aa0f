// attn/autograd/gradcheck.h — gradients checked against central differences.
//
// gradcheck(fn, inputs) compares the analytic gradient of
//   L = sum(fn(inputs) * R), R a fixed random tensor,
// with (L(x + eps) - L(x - eps)) / (2 eps) for every element of every input
// that requires a gradient. Inputs must be f64 leaves.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-4;
  std::uint64_t seed = 1234;  // for the projection R
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatch, or empty
  explicit operator bool() const { return ok; }
};

using Function = std::function<Tensor(const std::vector<Tensor>&)>;

GradcheckResult gradcheck(const Function& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace attn::autograd
