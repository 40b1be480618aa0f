// src/ops/precision_internal.h — internal: the bf16 operands of a product.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::detail {

// 1 + the largest element offset of x from its first element (0 when empty;
// -1 for a negative stride): the floats a copy of x's layout covers.
std::int64_t storage_span(const Tensor& x);

// The bf16 bits of the `span` floats from x's first element on, in x's own
// layout: a frozen parameter's kept copy (PrecisionScope), else `scratch`
// (grown as needed) filled now.
const std::uint16_t* bf16_span(const Tensor& x, std::int64_t span,
                               std::vector<std::uint16_t>& scratch);

// While alive, bf16_span of any tensor over the same floats as x (the same
// storage, first element and span; a transposed or reshaped view of x too)
// returns `bits`, which the caller filled with x's bf16 rounding in x's
// layout, instead of converting again. Per thread; several may be open at
// once (a stack: they end in the reverse order), the innermost one matching
// counts. For operands that several products share: a Linear layer's output
// gradient (dx and dW) and, in training, its input and weight, rounded once
// in the forward and taken again by dW and dx (ops/linear.cpp).
class Bf16Reuse {
 public:
  Bf16Reuse(const Tensor& x, const std::uint16_t* bits);
  ~Bf16Reuse();
  Bf16Reuse(const Bf16Reuse&) = delete;
  Bf16Reuse& operator=(const Bf16Reuse&) = delete;

  // The bits of the innermost open reuse over (storage, first, span), or null.
  static const std::uint16_t* find(const void* storage, const float* first, std::int64_t span);

 private:
  const void* storage_;
  const float* first_;
  std::int64_t span_;
  const std::uint16_t* bits_;
  const Bf16Reuse* outer_;
};

// The M x N rows of x (contiguous) rounded to bf16 into out (M N elements),
// and, when colsum is not null, colsum[j] = the f32 sum over the rows of
// x[r][j]: rows in blocks of a fixed size, each block summed in row order,
// the blocks' sums added in block order, so that the bits do not depend on
// the number of threads. One pass over x for a Linear layer's output
// gradient in bf16: its operand of both products and its bias gradient.
// With `relu_out` (M x N, the ReLU's output y), x is first masked by
// [y > 0] (the gradient through the ReLU), written to `masked` (M x N), and
// the masked rows are what is rounded and summed: linear_relu's backward in
// the same pass.
void to_bf16_with_column_sums(const float* x, std::int64_t M, std::int64_t N, std::uint16_t* out,
                              float* colsum, const float* relu_out = nullptr,
                              float* masked = nullptr);

// Whether x's storage is one of the open PrecisionScope's frozen parameters.
bool frozen_parameter(const Tensor& x);

// The packed weights of the open scope's frozen parameters (ops/packed_linear.cpp
// fills it; shared by the threads that joined the scope); destroyed with the
// scope's kept copies. Null when no scope was given frozen parameters.
struct PackedStore;
std::shared_ptr<PackedStore> new_packed_store();
PackedStore* frozen_packed_store();

// y = x @ weight^T + bias (then max(y, 0) when `relu`) on the weight's packed
// copy, when weight is one of the open scope's frozen parameters, nothing
// records a gradient, the tensors are f32 and the product is not tiny
// (ops/packed_linear.cpp); otherwise nothing, and linear() computes it
// unpacked. Shapes are checked by linear() first.
std::optional<Tensor> packed_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    bool relu);
// How many packed copies the open scope holds, linear_argmax's int8 screens
// included (0 without a scope). For tests.
std::int64_t packed_copies();

// linear_argmax's int8 screen of one weight (ops/linear_argmax.cpp).
struct ArgmaxScreen;
// Where linear(x, weight, bias) would run attn's f32 kernel on the weight's
// packed copy (kernels/gemm/f32_gemm.h: inside a PrecisionScope in f32 given the
// weight, no QuantizeScope open, the conditions of packed_linear, a CPU with
// AVX-512), the screen kept with that copy, made by `make` on first use
// (under the store's lock; the weight then counts as packed, as after a
// product); otherwise null.
std::shared_ptr<ArgmaxScreen> packed_f32_screen(
    const Tensor& x, const Tensor& weight, const Tensor& bias,
    const std::function<std::shared_ptr<ArgmaxScreen>()>& make);

// What linear_argmax's screen did in this process: the rows it took, those
// it computed in full (a bound not finite), and the candidates it computed
// exactly. For tests and benchmarks.
struct ArgmaxScreenStats {
  std::int64_t rows = 0, full_rows = 0, candidates = 0;
};
ArgmaxScreenStats argmax_screen_stats();

}  // namespace attn::detail
