// The affine map of a Linear layer, and the FFN's linear + ReLU, forward and
// backward side by side:
//
//   y = x @ W^T + b                 (linear)
//   y = max(x @ W^T + b, 0)         (linear_relu; g' = g [y > 0], else g' = g)
//   dx = g' @ W,  dW = g'_rows^T @ x_rows,  db = sum over rows of g'
//
// The product is matmul's (one GEMM over the rows of x); the bias and the
// activation are one pass over its rows. Inside a QuantizeScope, frozen
// weights run in int8 (ops/quantize.h), which adds the bias itself; inside a
// PrecisionScope given frozen weights, on their packed copies
// (ops/packed_linear.cpp), whose kernel adds the bias and applies the ReLU.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/core/storage.h"
#include "attn/core/threads.h"
#include "attn/ops/matmul.h"
#include "attn/ops/precision.h"
#include "attn/ops/reduce.h"
#include "core/parallel.h"
#include "kernels/gemm/f32_gemm.h"
#include "ops/loops.h"
#include "ops/matmul_internal.h"
#include "ops/precision_internal.h"
#include "ops/quantize_internal.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

void detail::check_linear_shapes(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 const char* op) {
  ATTN_CHECK(x.defined() && weight.defined(), ValueError, "{}: undefined operand", op);
  ATTN_CHECK(weight.dim() == 2, ShapeError, "{}: expected a weight (out, in), got {}", op,
             shape_str(weight.shape()));
  const std::int64_t N = weight.size(0), K = weight.size(1);
  ATTN_CHECK(x.dim() >= 1 && x.size(-1) == K, ShapeError,
             "{}: expected input (..., {}) for weight {}, got {}", op, K, shape_str(weight.shape()),
             shape_str(x.shape()));
  ATTN_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == N), ShapeError,
             "{}: expected a bias ({}) for weight {}, got {}", op, N, shape_str(weight.shape()),
             shape_str(bias.shape()));
}

namespace {

void check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* op) {
  detail::check_linear_shapes(x, weight, bias, op);
  ATTN_CHECK(!bias.defined() || bias.dtype() == weight.dtype(), DTypeError,
             "{}: bias is {}, weight is {}", op, dtype_name(bias.dtype()),
             dtype_name(weight.dtype()));
}

// attn's kernel for the forward product of a Linear layer whose weight is
// not frozen (training), where detail::linear_on_f32_kernel() says so: a CPU
// without AVX-512, where oneDNN's products below 2^22 multiply-adds run on
// one thread, as the bits of its rows depend on how they are cut. The
// kernel's rows do not (kernels/gemm/f32_gemm.h), so its products share the threads
// from kKernelParallelWork on, by column groups where there are enough of
// them, else by rows. Its right-hand operand is laid out for it at each call.
// Its ReLU keeps a NaN (max(0, NaN) is NaN, as in PyTorch), where the
// unpacked path's comparison gives 0. The backward's products stay on
// oneDNN (docs/design/gemm.md, "The f32 kernel on AVX2": on the kernel they were
// slower for d2l's toy model).
//
// Products of fewer rows, or fewer multiply-adds, stay on oneDNN: laying the
// right-hand operand out costs about as much as a product of a row or two.
constexpr std::int64_t kKernelMinRows = 16;
constexpr std::int64_t kKernelMinWork = std::int64_t(1) << 15;
// From this many multiply-adds on, a product on the kernel shares the team
// (a fork costs about 1-2 us, a product of 2^19 about 20 us on one thread of
// a Zen 1).
constexpr std::int64_t kKernelParallelWork = std::int64_t(1) << 19;

// Whether a product of M rows, K deep and N wide runs on the kernel.
bool on_kernel(std::int64_t M, std::int64_t N, std::int64_t K) {
  return detail::linear_on_f32_kernel() && matmul_precision() == Precision::f32 && N > 0 && K > 0 &&
         M >= kKernelMinRows && M * N * K >= kKernelMinWork;
}

// y (M x N, dense) = x (M rows of K floats, row m at x + m * ldx) @ B, where
// B(k, n) = b[n * ldn + k * ldk]; then the bias and the ReLU, as
// detail::f32_gemm adds them.
void kernel_product(const float* x, std::int64_t ldx, const float* b, std::int64_t ldn,
                    std::int64_t ldk, const float* bias, bool relu, std::int64_t M, std::int64_t N,
                    std::int64_t K, float* y) {
  thread_local std::vector<float> packed;
  const auto size = static_cast<std::size_t>(detail::f32_gemm_packed_size(N, K));
  if (packed.size() < size) packed.resize(size);
  detail::pack_f32_gemm(b, N, K, ldn, ldk, packed.data());
  const detail::F32GemmArgs a{.x = x,
                              .ldx = ldx,
                              .packed = packed.data(),
                              .bias = bias,
                              .relu = relu,
                              .M = M,
                              .K = K,
                              .N = N,
                              .y = y};
  const std::int64_t groups = (N + 31) / 32;
  const int threads = detail::loop_threads(M * N * K >= kKernelParallelWork * grain_scale());
  if (groups >= 2 * threads) {
    detail::parallel_ranges(groups, threads,
                            [&](std::int64_t g0, std::int64_t g1) { detail::f32_gemm(a, g0, g1); });
    return;
  }
  constexpr std::int64_t kRows = 12;  // the tiles' height
  detail::parallel_ranges((M + kRows - 1) / kRows, threads, [&](std::int64_t b0, std::int64_t b1) {
    detail::F32GemmArgs part = a;
    part.x = a.x + b0 * kRows * ldx;
    part.y = a.y + b0 * kRows * N;
    part.M = std::min(M, b1 * kRows) - b0 * kRows;
    detail::f32_gemm(part, 0, groups);
  });
}

// y = x @ weight^T (+ bias) (then the ReLU) on the kernel; empty where the
// product stays on oneDNN.
std::optional<Tensor> kernel_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                     bool relu) {
  if (x.dtype() != DType::f32 || weight.dtype() != DType::f32 ||
      (bias.defined() && bias.dtype() != DType::f32))
    return std::nullopt;
  const std::int64_t N = weight.size(0), K = weight.size(1);
  if (K == 0 || weight.stride(0) <= 0 || weight.stride(1) <= 0 || !on_kernel(x.numel() / K, N, K))
    return std::nullopt;
  const std::int64_t M = x.numel() / K;
  const Tensor xc = x.detach().contiguous();
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(N);
  Tensor y = Tensor::empty(out_shape, DType::f32);
  kernel_product(xc.data<float>(), K, weight.data<float>(), weight.stride(0), weight.stride(1),
                 bc.defined() ? bc.data<float>() : nullptr, relu, M, N, K, y.data<float>());
  return y;
}

// y = x @ weight^T (+ bias), then max(y, 0) when `relu`: the product, then
// one pass over its rows for the bias and the activation. No autograd.
// Inside a QuantizeScope, frozen weights run in int8 (ops/quantize.h), which
// adds the bias itself.
Tensor affine_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, bool relu,
                      const char* op) {
  const std::int64_t N = weight.size(0);
  if (auto q = detail::quantized_linear(x, weight, bias)) {
    if (!relu || q->numel() == 0) return *q;
    Tensor y = q->contiguous();
    dispatch_float(y.dtype(), op, [&]<class T>() {
      T* out = y.data<T>();
      const std::int64_t n = y.numel();
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) out[i] = out[i] > 0 ? out[i] : T(0);
    });
    return y;
  }
  if (auto p = detail::packed_linear(x, weight, bias, relu)) return *p;
  if (auto k = kernel_forward(x, weight, bias, relu)) return *k;
  const bool vector_in = x.dim() == 1;
  Tensor y = detail::product(vector_in ? x.unsqueeze(0) : x, weight.transpose(0, 1), op);
  if (vector_in) y = y.squeeze(0);
  if ((bias.defined() || relu) && y.numel() > 0) {
    Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
    dispatch_float(y.dtype(), op, [&]<class T>() {
      const T* b = bc.defined() ? bc.data<T>() : nullptr;
      T* out = y.data<T>();
      const std::int64_t rows = y.numel() / N;
      detail::parallel_for(rows, detail::loop_threads(rows > 1 && rows * N >= parallel_grain()),
                           [&](std::int64_t r) {
                             T* row = out + r * N;
                             if (b && relu) {
#pragma omp simd
                               for (std::int64_t j = 0; j < N; ++j) {
                                 const T v = row[j] + b[j];
                                 row[j] = v > 0 ? v : T(0);
                               }
                             } else if (b) {
#pragma omp simd
                               for (std::int64_t j = 0; j < N; ++j) row[j] += b[j];
                             } else {
#pragma omp simd
                               for (std::int64_t j = 0; j < N; ++j)
                                 row[j] = row[j] > 0 ? row[j] : T(0);
                             }
                           });
    });
  }
  return y;
}

// Below this many multiply-adds a product takes about as long as a fork.
constexpr std::int64_t kSideBySideMinWork = std::int64_t(1) << 16;

// bf16 training: a Linear layer's x and W rounded to bf16 once, in the
// forward, for its product, and kept for the backward's dW = g^T x and
// dx = g W, which take them again (detail::Bf16Reuse) in place of rounding
// x and W a second time (W only where the step's scope keeps no copy of it).
// The backward then uses x and W as the forward saw them. Null where not
// rounded here.
struct Rounded {
  std::shared_ptr<Storage> x, w;
};

// The bf16 bits of t (f32, contiguous) in a buffer of attn's allocator.
std::shared_ptr<Storage> rounded_copy(const Tensor& t) {
  auto bits = std::make_shared<Storage>(static_cast<std::size_t>(t.numel()) * 2);
  to_bf16(t.data<float>(), static_cast<std::uint16_t*>(bits->data()), t.numel());
  return bits;
}

bool keeps_rounded(const Tensor& x, const Tensor& w) {
  return matmul_precision() == Precision::bf16 && x.dtype() == DType::f32 &&
         w.dtype() == DType::f32 && x.numel() > 0 && w.numel() > 0 && x.is_contiguous() &&
         w.is_contiguous();
}

// Opens a reuse of t's kept bits, when there are any.
void reuse_kept(std::optional<detail::Bf16Reuse>& r, const Tensor& t,
                const std::shared_ptr<Storage>& bits) {
  if (bits) r.emplace(t, static_cast<const std::uint16_t*>(bits->data()));
}

// g [y > 0] (linear_relu's backward, f32) with its rows kLinePad floats
// further apart where N is a multiple of detail::kAliasedLd and the products
// are large: dW = g^T x then reads them without the cache conflict that
// matmul.cpp would otherwise copy g to avoid (matmul_internal.h), in the same
// pass that masks them. The same values; empty where not so, and where
// oneDNN's kernels would give dx = g W other bits for the other spacing
// (AVX-512: g stays dense there, and matmul's copy serves dW).
std::optional<Tensor> masked_unaliased(const Tensor& g, const Tensor& y, std::int64_t N,
                                       std::int64_t K, bool dw) {
  if (!dw || N % detail::kAliasedLd != 0 || detail::f32_product_bits_depend_on_ld() ||
      g.dtype() != DType::f32 || y.dtype() != DType::f32 || !g.is_contiguous() ||
      !y.is_contiguous() || g.shape() != y.shape() || matmul_precision() != Precision::f32)
    return std::nullopt;
  const std::int64_t M = g.numel() / N;
  if (M * N * K < detail::kSerialGemmWork) return std::nullopt;
  const std::int64_t ld = N + detail::kLinePad;
  Tensor buf = Tensor::empty({M, ld}, DType::f32);
  const float* gv = g.data<float>();
  const float* yv = y.data<float>();
  float* out = buf.data<float>();
  detail::parallel_for(M, detail::loop_threads(M * N >= parallel_grain()), [&](std::int64_t r) {
    const float* gr = gv + r * N;
    const float* yr = yv + r * N;
    float* o = out + r * ld;
#pragma omp simd
    for (std::int64_t j = 0; j < N; ++j) o[j] = yr[j] > 0 ? gr[j] : 0.0f;
  });
  return buf.narrow(1, 0, N).reshape(g.shape());
}

// The gradients of y = x @ w^T + b from g = dL/dy (n: which are needed).
// dx = g W and dW = g^T x do not depend on each other: where both are
// products that run on one thread anyway (below kSerialGemmWork), they run
// side by side, one on each thread of a team of two (d2l's toy model: its
// backward's products went from one thread to two). Only in f32 outside
// autograd (the engine's backward), so that the second thread needs none of
// the caller's thread-local state (a bf16 scope's copies of the weights).
// Each product is computed as on one thread, so the bits do not change.
// With `relu_out` (linear_relu's y), g is first masked by [y > 0]: relu' is
// [pre-activation > 0], and y > 0 exactly where it is.
Grads affine_backward(const Tensor& g_in, const Tensor& xd, const Tensor& wd,
                      const Tensor& relu_out, std::int64_t N, std::int64_t K, const Needs& n,
                      const Rounded& kept, const char* op) {
  std::optional<detail::Bf16Reuse> reuse_x, reuse_w;
  reuse_kept(reuse_x, xd, kept.x);
  reuse_kept(reuse_w, wd, kept.w);
  Grads grads(n.size());
  const bool dx = n[0], dw = n[1], db = n.size() > 2 && n[2];
  // bf16: both products take g in bf16. One pass rounds it once for both
  // (detail::Bf16Reuse), sums its columns for db and, after a ReLU, masks it
  // on the way, in place of two conversions, a separate sum and a separate
  // mask (size b's bf16 training: 1.06x without the mask).
  const bool one_pass =
      dx && dw && matmul_precision() == Precision::bf16 && g_in.dtype() == DType::f32 &&
      g_in.is_contiguous() &&
      (!relu_out.defined() || (relu_out.dtype() == DType::f32 && relu_out.is_contiguous() &&
                               relu_out.shape() == g_in.shape()));
  Tensor g = g_in;
  std::optional<Tensor> unaliased;
  if (relu_out.defined() && !one_pass) unaliased = masked_unaliased(g_in, relu_out, N, K, dw);
  if (unaliased) {
    g = *unaliased;
  } else if (relu_out.defined()) {
    g = one_pass ? Tensor::empty(g_in.shape(), DType::f32)  // the pass below fills it
                 : dispatch_float(relu_out.dtype(), op, [&]<class T>() {
                     return detail::binary_map<T>(g_in, relu_out, relu_out.shape(),
                                                  [](T gv, T yv) { return yv > 0 ? gv : T(0); });
                   });
  }
  const Tensor g2 = dw || db ? g.reshape({-1, N}) : Tensor();
  auto grad_x = [&] {
    grads[0] = matmul(g.dim() == 1 ? g.unsqueeze(0) : g, wd).reshape(xd.shape());
  };
  auto grad_w = [&] { grads[1] = matmul(g2.transpose(0, 1), xd.reshape({-1, K})); };
  if (one_pass) {
    const std::int64_t M = g2.size(0);
    thread_local std::vector<std::uint16_t> bits;
    if (bits.size() < static_cast<std::size_t>(M * N)) bits.resize(static_cast<std::size_t>(M * N));
    Tensor bias_grad = db ? Tensor::empty({N}, DType::f32) : Tensor();
    const bool masks = relu_out.defined();
    detail::to_bf16_with_column_sums(
        g_in.data<float>(), M, N, bits.data(), db ? bias_grad.data<float>() : nullptr,
        masks ? relu_out.data<float>() : nullptr, masks ? g.data<float>() : nullptr);
    detail::Bf16Reuse reuse(g2, bits.data());
    grad_x();
    grad_w();
    if (db) grads[2] = bias_grad;
    return grads;
  }
  const std::int64_t work = dw ? g2.size(0) * N * K : 0;
  // Not while the team's cores are far apart (grain_scale() above 1): handing
  // a product's operands and result between them then costs more than it
  // saves (d2l's toy training: 82,000-94,000 tokens/s side by side against
  // 99,000 on one thread).
  const bool side_by_side = dx && dw && work < detail::kSerialGemmWork &&
                            work >= kSideBySideMinWork && grain_scale() == 1 &&
                            matmul_precision() == Precision::f32 && !autograd::grad_enabled();
  if (side_by_side) {
    detail::run_side_by_side(true, grad_x, grad_w);
  } else {
    if (dx) grad_x();
    if (dw) grad_w();
  }
  if (db) grads[2] = sum_to(g2, Shape{N});
  return grads;
}

// y = x @ weight^T + b, then relu when `relu`, recorded with its backward.
Tensor affine(const Tensor& x, const Tensor& weight, const Tensor& bias, bool relu,
              const char* op) {
  check_linear(x, weight, bias, op);
  const std::int64_t N = weight.size(0), K = weight.size(1);
  const bool needs =
      x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad());
  if (!autograd::grad_enabled() || !needs) return affine_forward(x, weight, bias, relu, op);
  Tensor xd = x.detach(), wd = weight.detach();
  Rounded kept;
  Tensor y;
  {
    std::optional<detail::Bf16Reuse> reuse_x, reuse_w;
    if (keeps_rounded(xd, wd)) {
      // A weight frozen by the step's PrecisionScope (training) has its copy
      // there, made once for all its uses in the step.
      Rounded now{rounded_copy(xd), detail::frozen_parameter(wd) ? nullptr : rounded_copy(wd)};
      reuse_kept(reuse_x, xd, now.x);
      reuse_kept(reuse_w, wd, now.w);
      // dW takes x; dx takes W.
      if (weight.requires_grad()) kept.x = now.x;
      if (x.requires_grad()) kept.w = now.w;
    }
    y = affine_forward(x, weight, bias, relu, op);
  }
  Tensor yd = relu ? y.detach() : Tensor();
  std::vector<Tensor> inputs = {x, weight};
  if (bias.defined()) inputs.push_back(bias);
  return record(y, op, inputs, [xd, wd, yd, N, K, op, kept](const Tensor& g, const Needs& n) {
    return affine_backward(g, xd, wd, yd, N, K, n, kept, op);
  });
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return affine(x, weight, bias, false, "linear");
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return affine(x, weight, bias, true, "linear_relu");
}

}  // namespace attn
