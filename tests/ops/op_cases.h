// tests/ops/op_cases.h — the op-case table: every recorded op with its shapes
// and dtypes, written once. The tests run each case two ways
// (tests/ops/cases_test.cpp): the f32 path (the fast kernels this CPU picks)
// against a plain reference, within the case's stated tolerance, and the f64
// gradient check. `ops_cases_test --perf` and bench/op_cases_bench time the
// same cases at their larger perf shapes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::cases {

// One input of a case: real numbers drawn uniformly from [lo, hi] (the f64
// gradient check differentiates them), or integers in [0, hi] (lengths,
// ids, labels; constants).
struct Input {
  Shape shape, perf_shape;  // perf_shape empty: the same as shape
  enum class Kind { real, integer } kind = Kind::real;
  double lo = -1.0, hi = 1.0;
};

inline Input real(Shape s, Shape perf = {}, double lo = -1.0, double hi = 1.0) {
  return {std::move(s), std::move(perf), Input::Kind::real, lo, hi};
}
inline Input integer(Shape s, std::int64_t hi, Shape perf = {}) {
  return {std::move(s), std::move(perf), Input::Kind::integer, 0.0, static_cast<double>(hi)};
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct OpCase {
  std::string op;  // e.g. "softmax"
  std::string variant;  // what sets this case apart ("causal", "4-D"), or ""
  std::vector<Input> inputs;
  Fn fn{};  // the op as the library runs it
  // The plain reference (the op's *_reference, or the op written with other
  // ops); null: the op itself on the f64 inputs (plain loops in f64).
  Fn reference{};
  // |f32 - reference| <= tol * (1 + |reference|), elementwise.
  double tol = 1e-5;
  bool differentiable = true;
  // The gradient check's tolerances where the op needs looser ones.
  double grad_atol = 1e-5, grad_rtol = 1e-4;
};

// Every case, in a fixed order.
const std::vector<OpCase>& op_cases();

// The case's name: op, then "/variant" where there is one.
std::string case_name(const OpCase& c);
// Its shapes as text ("5x7, 7"): at the test shapes, or the perf ones.
std::string case_shapes(const OpCase& c, bool perf);

// The inputs of a case in `dtype` (f32 or f64; integers stay i64), from
// `seed`, at the test shapes or the perf ones. The same seed gives the same
// values in f32 and f64 (drawn in f64, then rounded).
std::vector<Tensor> make_inputs(const OpCase& c, DType dtype, std::uint64_t seed, bool perf);

// The f32 path against the reference: "" when within the tolerance, else
// what differs (the largest error, where, and the bound).
std::string check_against_reference(const OpCase& c, std::uint64_t seed = 1);
// The f64 gradient check: "" when it passes (or the op is not
// differentiable), else the first mismatch.
std::string check_gradients(const OpCase& c, std::uint64_t seed = 2);

// Median seconds of the forward and of the backward (0 when not
// differentiable) at the perf shapes in f32, over `reps` runs after one warm-up.
struct Timing {
  double forward_s = 0, backward_s = 0;
};
Timing time_case(const OpCase& c, int reps);

// `ops_cases_test --perf [FILTER]`: every case whose name contains FILTER,
// timed, as a Markdown table on stdout.
int run_perf(const std::string& filter, int reps);

}  // namespace attn::cases
