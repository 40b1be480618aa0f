// The attention kernels (attention_table.h) for portable vectors: GCC
// vector extensions of 16 bytes (SSE2 on x86-64, NEON elsewhere), the f32
// fallback where the CPU has neither AVX-512 nor AVX2, and every f64 problem
// (f64 serves gradient checks and references). Compiled for the build's
// target; no target pragma.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "kernels/attention/attention_kernel.h"
#include "kernels/attention/attention_table.h"
#include "kernels/philox/philox_inline.h"
#include "kernels/vec/vec_math.h"

namespace attn::detail {
namespace {

template <class T_, int W_>
struct VecPortable {
  using T = T_;
  using R [[gnu::vector_size(sizeof(T_) * W_)]] = T_;
  static constexpr int W = W_;
  static constexpr int kMR = 4, kNV = 2;
  static R zero() { return R{}; }
  static R set1(T x) { return R{} + x; }
  static R load(const T* p) {
    R r;
    std::memcpy(&r, p, sizeof r);
    return r;
  }
  static void store(T* p, R x) { std::memcpy(p, &x, sizeof x); }
  static R fma(R a, R b, R c) { return a * b + c; }
  static R add(R a, R b) { return a + b; }
  static R sub(R a, R b) { return a - b; }
  static R mul(R a, R b) { return a * b; }
  static R div(R a, R b) { return a / b; }
  static R max(R a, R b) { return a > b ? a : b; }
  static T hsum(R x) {
    T s = 0;
    for (int i = 0; i < W; ++i) s += x[i];
    return s;
  }
  static R exp(R x) {
    R y;
    for (int i = 0; i < W; ++i) y[i] = exp_simd<T>(x[i]);
    return y;
  }
};

}  // namespace

const AttnKernelTable<float>* attention_kernels_portable_f32() {
  static const AttnKernelTable<float> table =
      make_attention_kernels<VecPortable<float, 4>>("portable", AttnTiles{32, 64});
  return &table;
}

const AttnKernelTable<double>* attention_kernels_portable_f64() {
  static const AttnKernelTable<double> table =
      make_attention_kernels<VecPortable<double, 2>>("portable", AttnTiles{16, 32});
  return &table;
}

}  // namespace attn::detail
