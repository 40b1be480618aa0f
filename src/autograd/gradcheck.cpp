#include "attn/autograd/gradcheck.h"

#include <fmt/format.h>

#include <cmath>

#include "attn/autograd/node.h"
#include "attn/core/rng.h"

namespace attn::autograd {
namespace {

double project(const Tensor& out, const std::vector<double>& r) {
  std::vector<double> v = to_vector<double>(out);
  double s = 0;
  for (std::size_t i = 0; i < v.size(); ++i) s += v[i] * r[i];
  return s;
}

}  // namespace

GradcheckResult gradcheck(const Function& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  GradcheckResult result;
  for (const auto& x : inputs) {
    if (!x.defined() || !x.requires_grad()) continue;
    ATTN_CHECK(x.dtype() == DType::f64, DTypeError, "gradcheck: inputs must be f64, got {}",
               dtype_name(x.dtype()));
    ATTN_CHECK(x.is_leaf() && x.is_contiguous(), ValueError,
               "gradcheck: inputs must be contiguous leaves");
    x.zero_grad();
  }

  Tensor out = fn(inputs);
  ATTN_CHECK(out.dtype() == DType::f64, DTypeError, "gradcheck: output must be f64, got {}",
             dtype_name(out.dtype()));
  Generator gen(options.seed);
  Tensor r = uniform(-1.0, 1.0, out.shape(), gen, DType::f64);
  std::vector<double> rv = to_vector<double>(r);
  if (!out.requires_grad()) {
    result.ok = false;
    result.message = "gradcheck: the output does not depend on any input that requires grad";
    return result;
  }
  out.backward(r);

  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    Tensor analytic = x.grad();
    std::vector<double> a =
        analytic.defined() ? to_vector<double>(analytic) : std::vector<double>(x.numel(), 0.0);
    double* p = x.data<double>();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      double saved = p[i];
      double lp, lm;
      {
        NoGradGuard guard;
        p[i] = saved + options.eps;
        lp = project(fn(inputs), rv);
        p[i] = saved - options.eps;
        lm = project(fn(inputs), rv);
        p[i] = saved;
      }
      double numeric = (lp - lm) / (2 * options.eps);
      double diff = std::fabs(numeric - a[i]);
      if (!(diff <= options.atol + options.rtol * std::fabs(numeric))) {
        result.ok = false;
        result.message = fmt::format(
            "gradcheck: input {} element {}: analytic {:.10g} vs numeric {:.10g} (diff {:.3g})", k,
            i, a[i], numeric, diff);
        return result;
      }
    }
  }
  return result;
}

}  // namespace attn::autograd
