// src/ops/quantize_internal.h — internal: the int8 Linear hook for matmul.cpp,
// and the parts of the int8 product that tests compare (ops/quantize.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "attn/core/tensor.h"
#include "kernels/gemm/int8_gemm.h"

namespace attn::detail {

// u8 x s8 sums of K terms stay within int32 up to K = (2^31 - 1) / (255 * 127)
// = 66311; the largest K int8 takes, a round number below it.
constexpr std::int64_t kMaxK = 65536;

// One weight, quantized (ops/quantize.cpp's formulas).
struct QuantizedWeight {
  std::int64_t N = 0, K = 0;
  std::vector<std::int8_t> q;  // Wq, N x K row-major
  std::vector<float> scale;  // sw, N
  std::vector<std::int32_t> comp;  // 128 * sum_k Wq[n,k], N (the VNNI kernel's)
  std::vector<std::int32_t> comp7;  // 64 * sum_k Wq[n,k], N (the AVX2 kernel's)
  // Wq in int8_gemm's layout, once used; `mu` guards it, as the threads
  // that joined the scope share the weight.
  std::vector<std::int8_t> gemm;
  std::mutex mu;

  const std::int8_t* gemm_layout() {
    std::lock_guard<std::mutex> lock(mu);
    if (gemm.empty()) gemm = pack_int8_gemm(q.data(), N, K);
    return gemm.data();
  }
};

// Wq, sw and the compensation of weight (N, K), any strides. A weight
// holding an infinity or a NaN is refused (ValueError naming `op` and the
// row): its scale would make every output NaN.
std::unique_ptr<QuantizedWeight> quantize_weight(const Tensor& weight, const char* op);

// y (..., N) = the int8 product of x (..., K, f32, K <= kMaxK) and w, plus
// bias (N, or undefined): attn's VNNI kernel (kernels/gemm/int8_gemm.h) where the
// CPU has it, its AVX2 kernel (7 bits) where it has AVX2, else integer
// loops; the reference's bits at int8_levels().
Tensor run_int8(const Tensor& x, QuantizedWeight& w, const Tensor& bias);

// The levels each side of zero of this CPU's int8 operands: 127, or 63
// where the AVX2 kernel runs (7 bits: kernels/gemm/int8_gemm.h). The weights,
// the activations and the references all follow it.
int int8_levels();

// Row x (K) quantized as run_int8 quantizes its rows on this CPU: the
// signed values xq (in [-127, 127], or [-63, 63] where the AVX2 kernel
// runs: 7 bits) into q, the scale returned (NaN for a row holding an
// infinity or a NaN).
float quantize_row_as_run(const float* x, std::int64_t K, std::int8_t* q);

// Whether a QuantizeScope is open on this thread.
bool quantize_scope_open();

// Inside a QuantizeScope: y = linear(x, weight, bias) as an int8 product when
// weight is one of the scope's frozen parameters and the product is one int8
// takes (f32, not recording gradients, K <= 65536); otherwise nothing, and
// linear() computes in f32. Shapes are checked by linear() first.
std::optional<Tensor> quantized_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// The int32 sums acc[m,n] = sum_k xq[m,k] Wq[n,k] (i32 (M, N)) for x (M, K)
// and weight (N, K): through the portable path's integer loops (the VNNI
// kernel's own test is ops/int8_gemm_test), and through plain loops.
Tensor int8_accumulators(const Tensor& x, const Tensor& weight);
Tensor int8_accumulators_reference(const Tensor& x, const Tensor& weight);

}  // namespace attn::detail
