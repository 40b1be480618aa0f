// attn/ops/quantize.h — int8 weights for inference (translation), as
// CTranslate2 runs them, on CPUs with AVX-512 VNNI or AVX2.
//
// Inside a QuantizeScope given the model's parameters (promising that they do
// not change while it is open), every f32 linear(x, W, b) whose weight W is
// one of them runs as an int8 product:
//
//   W (N, K): quantized once per scope, per output row n (symmetric):
//     sw[n] = max_k |W[n,k]| / 127,   Wq[n,k] = round(W[n,k] / sw[n]) in [-127, 127]
//   x (M, K), the rows of x (..., K): quantized at every call, per row m:
//     sx[m] = max_k |x[m,k]| / 127,   xq[m,k] = round(x[m,k] / sx[m]) in [-127, 127]
//   acc[m,n] = sum_k xq[m,k] Wq[n,k]                  (exact, in int32)
//   y[m,n]   = fma(acc[m,n], sx[m] * sw[n], b[n])      (f32, one pass)
//
// round() is to nearest, ties to even, of the f32 product x * (127 / max|x|).
// A row whose largest magnitude is below 1e-30 (all zeros included) gets
// scale 1 and zeros, so it contributes nothing (an error below 1e-30 sum |w|);
// y is then exactly b. A row of x holding an infinity or a NaN gives a row of
// NaN; a weight holding one is refused (ValueError), as its scale would be.
//
// Why one scale per row of x rather than one per tensor: the rows of a batch
// are independent sentences and positions whose magnitudes differ (a large
// activation in one row would otherwise flush the small ones of the others
// to zero), and the result must not depend on which sentences share a batch.
// Per output row of W for the same reason: each output unit keeps its range.
//
// Kernels (int8_kernel()): attn's own AVX-512 VNNI kernel
// (src/kernels/gemm/int8_gemm.h) multiplies u8 activations by s8 weights into int32
// sums held in registers: xq + 128 (u8) times Wq, less the compensation
// 128 * sum_k Wq[n,k] computed once with the weights, which is the same
// integer sum; each sum becomes its float y as it leaves the registers. On
// a CPU without VNNI but with AVX2, attn's AVX2 kernel (the same header)
// gets the same sums from vpmaddubsw: |Wq| (u8) times xq (s8, its bits
// flipped where Wq is negative, a correction taken off at the end), whose
// pairs of products stay below int16's saturation (2 x 127 x 128 = 32512),
// so no bit differs from the VNNI kernel's. The weights are laid out for
// either once per scope. Without either, plain integer loops give the same
// sums.
// Error: |y - x W^T| <= sx/2 sum_k |W[n,k]| + sw/2 (sum_k |x[m,k]| + K sx/2)
// plus f32 rounding; on random data about 0.1 sqrt(K) max|x| max|W| / 127
// (tests/ops/quantize_test.cpp).
//
// What stays f32: every other product (attention scores and values, products
// of weights not given to the scope), biases, layer norm, softmax, the
// embeddings. With a bf16 PrecisionScope open too (attn/ops/precision.h), the
// frozen Linear weights run in int8 and the other products in bf16.
//
// Inference only: while autograd records (grad enabled and x, W or b
// requiring grad) linear() keeps its f32 path and gradients; linear_int8()
// refuses. Sizes int8 does not take (K above 65536, where u8 x s8 sums could
// overflow int32, or dtypes other than f32) keep the f32 path too. Where no
// kernel runs (int8_supported() is false: a CPU without AVX2, or
// ATTN_ISA=portable), a QuantizeScope is refused (ValueError): callers check
// first and fall back to f32 with a message. The scope belongs to the
// thread that opens it (and the threads that join it, below); scopes nest
// (the inner one's parameters apply until it closes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attn/core/tensor.h"

namespace attn {

enum class Quantization { none, int8 };

// "none", "int8"; and back (ValueError naming the text and the choices).
const char* quantization_name(Quantization q);
Quantization parse_quantization(const std::string& text);

// The kernels int8 products run on (src/kernels/gemm/int8_gemm.h); all give the
// same bits.
enum class Int8Kernel { none, avx2, avx_vnni, avx512_vnni };

// This process's kernel, chosen once: AVX-512 VNNI where the CPU has it
// (and ONEDNN_MAX_CPU_ISA, which caps attn's other AVX-512 paths too,
// allows it), else AVX-VNNI where the CPU has it with AVX2 (Intel's cores
// since Alder Lake), else AVX2 where the CPU has AVX2 and FMA, else none.
// The environment caps it as it caps the f32 kernels: ATTN_ISA=avx2 gives
// AVX-VNNI's or AVX2's, ATTN_ISA=portable none; ATTN_NO_VNNI=1 takes both
// VNNI kernels away (AVX2's where the CPU has it).
Int8Kernel int8_kernel();

// int8_kernel() != Int8Kernel::none: QuantizeScope opens.
bool int8_supported();

// "none", "avx2", "avx_vnni", "avx512_vnni" (for machine-readable reports).
const char* int8_kernel_name(Int8Kernel kernel);

// int8_kernel() in words, for `attn --version` and a server's health
// report: "AVX-512 VNNI (vpdpbusd)", "AVX-VNNI (vpdpbusd, 256-bit)", "AVX2
// (vpmaddubsw, 7 bits)", or "none (no AVX2)" / "none (ATTN_ISA=portable)".
std::string int8_description();

// Runs the f32 Linear products whose weights are among `frozen` in int8 until
// the scope ends. Each weight is quantized on first use and kept until then.
//
// Other threads join a thread's scope as they join a PrecisionScope
// (attn/ops/precision.h): Shared (from current() on that thread) is its
// quantized weights, and QuantizeScope(shared) on another thread uses them
// until that scope ends (with a null cache: no int8 products there). Every
// thread multiplies by the same quantized weights, made once by whichever
// thread needs one first, under a lock.
class QuantizeScope {
 public:
  struct Cache;
  struct Shared {
    std::shared_ptr<Cache> cache;  // null: no scope open
  };

  explicit QuantizeScope(const std::vector<Tensor>& frozen);
  explicit QuantizeScope(const Shared& shared);
  ~QuantizeScope();
  QuantizeScope(const QuantizeScope&) = delete;
  QuantizeScope& operator=(const QuantizeScope&) = delete;

  // This thread's quantized weights (null without a scope).
  static Shared current();

 private:
  Cache* previous_;
  std::shared_ptr<Cache> cache_;
};

// The int8 product above for any f32 x (..., K), weight (N, K), bias (N) or
// undefined -> y (..., N), whether or not a scope is open (a weight frozen in
// an open scope uses its kept quantization; any other is quantized now). On
// int8_kernel() where there is one, else on the integer loops (the same
// numbers). Not differentiable: refuses tensors that require grad while
// grad is enabled. Errors name "linear_int8".
Tensor linear_int8(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// The documented reference: the same quantization and integer sums in plain
// scalar loops (int64 accumulation), the same f32 dequantization; equal to
// linear_int8 bit for bit.
Tensor linear_int8_reference(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// A weight (N, K) quantized as the products above quantize it, for storing
// (a model directory in int8): values = round(W[n,:] / scales[n]) to nearest
// even, whole numbers in [-127, 127] held as f32, scales[n] = max|W[n,:]| /
// 127 (1 for a row of zeros). values x scales per row gives the weight back
// within half a step; quantized again, it gives the same values.
// ValueError for a weight that is not f32 and 2-D, or holds a NaN or an
// infinity (naming `name`).
struct QuantizedRows {
  Tensor values, scales;
};
QuantizedRows quantize_rows_int8(const Tensor& weight, const std::string& name);

}  // namespace attn
