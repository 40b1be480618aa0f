// tests/ops/attention_testing.h — helpers shared by the attention tests:
// a relative difference, and guards over the kernel setting.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

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

// Changes the attention kernel setting by `change` for its lifetime.
struct KernelGuard {
  template <class F>
  explicit KernelGuard(F change) : saved(attention_kernel_config()) {
    AttentionKernelConfig c = saved;
    change(c);
    set_attention_kernel_config(c);
  }
  ~KernelGuard() { set_attention_kernel_config(saved); }
  AttentionKernelConfig saved;
};

// Runs `body` with the f32 kernels of every instruction set this CPU has.
template <class F>
void for_each_isa(F body) {
  for (const std::string& isa : attention_isas()) {
    KernelGuard guard([&](AttentionKernelConfig& c) { c.isa = isa; });
    SCOPED_TRACE(isa);
    body();
  }
}

}  // namespace attn::testing
