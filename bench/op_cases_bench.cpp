// The op-case table's cases (tests/ops/op_cases.h) under Google Benchmark, at
// their perf shapes in f32: each case's forward, and its forward and backward
// together. The same cases, shapes and inputs as `ops_cases_test --perf`
// and the tests; --benchmark_filter=softmax picks some.
#include <benchmark/benchmark.h>

#include "attn/attn.h"
#include "op_cases.h"

namespace {

using attn::Tensor;
using attn::cases::OpCase;

void forward(benchmark::State& state, const OpCase* c) {
  const std::vector<Tensor> x = attn::cases::make_inputs(*c, attn::DType::f32, 3, true);
  attn::autograd::NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(c->fn(x));
}

void forward_backward(benchmark::State& state, const OpCase* c) {
  std::vector<Tensor> x = attn::cases::make_inputs(*c, attn::DType::f32, 3, true);
  for (std::size_t i = 0; i < x.size(); ++i)
    if (c->inputs[i].kind == attn::cases::Input::Kind::real) x[i].requires_grad_();
  for (auto _ : state) {
    Tensor y = c->fn(x);
    y.backward(attn::ones_like(y));
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (const OpCase& c : attn::cases::op_cases()) {
    const std::string name =
        attn::cases::case_name(c) + " [" + attn::cases::case_shapes(c, true) + "]";
    benchmark::RegisterBenchmark((name + " forward").c_str(), forward, &c)
        ->Unit(benchmark::kMicrosecond);
    if (c.differentiable)
      benchmark::RegisterBenchmark((name + " forward+backward").c_str(), forward_backward, &c)
          ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
