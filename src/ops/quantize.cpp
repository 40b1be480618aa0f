// int8 weights for inference (attn/ops/quantize.h): the scope and its
// quantized weights, and the product: attn's VNNI kernel (kernels/gemm/int8_gemm.h)
// where the CPU has AVX-512 VNNI, its AVX2 kernel where it has AVX2, else
// integer loops and the dequantization with the bias in one pass.
//
//   sw[n] = max_k |W[n,k]| / L      Wq[n,k] = round(W[n,k] * (L / max_k |W[n,k]|))
//   sx[m] = max_k |x[m,k]| / L      xq[m,k] = round(x[m,k] * (L / max_k |x[m,k]|))
//   acc[m,n] = sum_k xq[m,k] Wq[n,k]
//            = sum_k (xq[m,k] + 128) Wq[n,k] - 128 sum_k Wq[n,k]   (the u8 x s8 VNNI product)
//            = sum_k (xq[m,k] + 64) Wq[n,k] - 64 sum_k Wq[n,k]     (AVX2's vpmaddubsw)
//   y[m,n] = fma(float(acc[m,n]), sx[m] * sw[n], b[n])
//
// L = 127, or 63 where the AVX2 kernel runs (int8_levels(): 7-bit operands,
// whose pairs of products fit vpmaddubsw's int16 twice over;
// kernels/gemm/int8_gemm.h).
#include "attn/ops/quantize.h"
#include "attn/core/env.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/core/error.h"
#include "attn/core/threads.h"
#include "core/parallel.h"
#include "kernels/gemm/int8_gemm.h"
#include "kernels/quantize/quantize_rows.h"
#include "kernels/vec/vec_form.h"
#include "ops/matmul_internal.h"
#include "ops/onednn_isa.h"
#include "ops/quantize_internal.h"

namespace attn {

namespace {

using detail::kMaxK;
using detail::quantize_weight;
using detail::QuantizedWeight;
using detail::run_int8;
// Products below this many multiply-adds run on the calling thread.
constexpr std::int64_t kSerialWork = detail::kSerialGemmWork;

}  // namespace

// The quantized weights of a scope's frozen parameters, kept by the scope
// given them and by the scopes that joined it (other threads): `mu` guards
// `weights`.
struct QuantizeScope::Cache : std::enable_shared_from_this<QuantizeScope::Cache> {
  std::mutex mu;
  std::set<const void*> storages;  // the frozen parameters' storages (read only)
  std::vector<Tensor> keep;  // keeps those storages (and their addresses) alive
  std::map<
      std::tuple<const void*, const float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t>,
      std::unique_ptr<QuantizedWeight>>
      weights;  // (storage, first element, N, K, strides) -> quantized
};

namespace {

thread_local QuantizeScope::Cache* t_cache = nullptr;

bool cpu_has_vnni() {
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")))
    return false;
  // A cap on oneDNN's ISA (ONEDNN_MAX_CPU_ISA) caps this kernel too: one
  // variable turns every AVX-512 path off.
  return detail::onednn_isa_has(dnnl::cpu_isa::avx512_core_vnni);
}

// int8_kernel(), chosen once: ATTN_ISA caps it as it caps every kernel
// (kernels/vec/vec_form.h): unset or avx512, the best; avx2, AVX-VNNI's or
// AVX2's; portable, none. ATTN_NO_VNNI takes both VNNI kernels away.
Int8Kernel choose_int8_kernel() {
  const detail::VecForm cap = detail::form_cap();
  const bool vnni = !env_flag(EnvVar::no_vnni);
  if (cap == detail::VecForm::avx512 && vnni && cpu_has_vnni()) return Int8Kernel::avx512_vnni;
  if (cap >= detail::VecForm::avx2 && vnni && detail::int8_gemm_avx_vnni_cpu())
    return Int8Kernel::avx_vnni;
  if (cap >= detail::VecForm::avx2 && detail::int8_gemm_avx2_cpu()) return Int8Kernel::avx2;
  return Int8Kernel::none;
}

// Row x (K) into u8 (xq + 128) in out, by the kernel's row quantization
// (AVX-512's, AVX2's, else the reference: the same bits); returns its scale.
float quantize_row_u8(Int8Kernel kernel, const float* x, std::int64_t K, std::uint8_t* out) {
  if (kernel == Int8Kernel::avx_vnni) return detail::quantize_row_u8_avx2(x, K, out);
  return detail::quantize_row(x, K, out, kernel == Int8Kernel::avx512_vnni);
}

using detail::dequantize_row;
using detail::quantize_reference;
using detail::quantize_row;
using detail::quantize_row_s8;
using detail::row_scale_reference;
using detail::RowScale;

bool parallel_rows(std::int64_t M, std::int64_t per_row) {
  return M > 1 && M * per_row >= 2 * parallel_grain();
}

// acc (M x N) = the int32 sums of the u8 rows xq (M x K), `offset` (128,
// or 64 for 7-bit rows) taken off each (the portable path).
void int8_sums(const std::uint8_t* xq, std::int64_t M, const QuantizedWeight& w, int offset,
               std::int32_t* acc) {
  const std::int64_t N = w.N, K = w.K;
  detail::parallel_for(M, detail::loop_threads(parallel_rows(M, N * K / 16)), [&](std::int64_t m) {
    const std::uint8_t* a = xq + m * K;
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int8_t* b = w.q.data() + n * K;
      std::int32_t s = 0;
#pragma omp simd reduction(+ : s)
      for (std::int64_t k = 0; k < K; ++k)
        s += (static_cast<std::int32_t>(a[k]) - offset) * static_cast<std::int32_t>(b[k]);
      acc[m * N + n] = s;
    }
  });
}

// Scratch reused by every product of this thread.
struct Scratch {
  std::vector<std::uint8_t> xq;
  std::vector<float> sx;
};

// x (M, K) contiguous f32 -> xq, sx in the scratch; acc (M x N) filled.
void quantized_sums(const float* x, std::int64_t M, const QuantizedWeight& w, Scratch& s,
                    std::int32_t* acc) {
  const std::int64_t K = w.K;
  if (s.xq.size() < static_cast<std::size_t>(M * K)) s.xq.resize(M * K);
  if (s.sx.size() < static_cast<std::size_t>(M)) s.sx.resize(M);
  const Int8Kernel kernel = int8_kernel();
  const bool seven = detail::int8_levels() == 63;
  detail::parallel_for(M, detail::loop_threads(parallel_rows(M, K)), [&](std::int64_t m) {
    s.sx[m] = seven ? detail::quantize_row_u7(x + m * K, K, &s.xq[m * K], true)
                    : quantize_row_u8(kernel, x + m * K, K, &s.xq[m * K]);
  });
  int8_sums(s.xq.data(), M, w, seven ? 64 : 128, acc);
}

Scratch& thread_scratch() {
  thread_local Scratch s;
  return s;
}

// y through the kernel of kernels/gemm/int8_gemm.h this CPU runs: the VNNI
// kernels (AVX-512's, AVX-VNNI's) on u8 rows (xq + 128), the AVX2 one on
// 7-bit rows (xq + 64); the floats
// straight from its registers, no int32 sums in memory; the rows quantized
// and the column groups shared out over threads where the product is large
// enough. The same bits as the reference at the same levels (exact int32
// sums, the same formula).
// The VNNI kernel replaced oneDNN's u8 x s8 primitive, which it beat by
// 10-20% on every shape of the tatoeba model (1 to 1,024 rows;
// kernels/gemm/int8_gemm.h); on AVX2, oneDNN 2.6's u8 x s8 matmul against the AVX2
// kernel: docs/design.md.
Tensor run_int8_kernel(Int8Kernel kernel, const Tensor& x, std::int64_t M, QuantizedWeight& w,
                       const Tensor& bias, const Shape& out_shape) {
  const std::int64_t N = w.N, K = w.K;
  Tensor y = Tensor::empty(out_shape, DType::f32);
  Tensor xc = x.detach().contiguous();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Scratch& s = thread_scratch();
  // 3 readable bytes past the last row (int8_gemm.h).
  if (s.xq.size() < static_cast<std::size_t>(M * K + 64)) s.xq.resize(M * K + 64);
  if (s.sx.size() < static_cast<std::size_t>(M)) s.sx.resize(M);
  const float* px = xc.data<float>();
  const bool seven = kernel == Int8Kernel::avx2;
  detail::parallel_for(M, detail::loop_threads(parallel_rows(M, K)), [&](std::int64_t m) {
    s.sx[m] = seven ? detail::quantize_row_u7(px + m * K, K, &s.xq[m * K], true)
                    : quantize_row_u8(kernel, px + m * K, K, &s.xq[m * K]);
  });
  const float* b = bc.defined() ? bc.data<float>() : nullptr;
  const detail::Int8GemmArgs a{.x = s.xq.data(),
                               .ldx = K,
                               .sx = s.sx.data(),
                               .packed = w.gemm_layout(),
                               .comp = seven ? w.comp7.data() : w.comp.data(),
                               .sw = w.scale.data(),
                               .bias = b,
                               .M = M,
                               .K = K,
                               .N = N,
                               .y = y.data<float>()};
  const std::int64_t groups = (N + 31) / 32;
  const bool parallel = M * N * K >= kSerialWork * grain_scale() && groups > 1;
  detail::parallel_ranges(groups, detail::loop_threads(parallel),
                          [&](std::int64_t g0, std::int64_t g1) {
                            switch (kernel) {
                              case Int8Kernel::avx512_vnni: detail::int8_gemm(a, g0, g1); break;
                              case Int8Kernel::avx_vnni:
                                detail::int8_gemm_avx_vnni(a, g0, g1);
                                break;
                              default: detail::int8_gemm_avx2(a, g0, g1);
                            }
                          });
  return y;
}

void check_operands(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* op) {
  detail::check_linear_shapes(x, weight, bias, op);
  const std::int64_t K = weight.size(1);
  ATTN_CHECK(x.dtype() == DType::f32 && weight.dtype() == DType::f32 &&
                 (!bias.defined() || bias.dtype() == DType::f32),
             DTypeError, "{}: expected f32 tensors, got x {}, weight {}{}", op,
             dtype_name(x.dtype()), dtype_name(weight.dtype()),
             bias.defined() ? fmt::format(", bias {}", dtype_name(bias.dtype())) : std::string());
  ATTN_CHECK(K <= kMaxK, ValueError,
             "{}: {} inputs per row is more than {} (the int32 sums could overflow)", op, K, kMaxK);
}

bool records_grad(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return autograd::grad_enabled() &&
         (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
}

// The scope's quantization of a frozen weight (made on first use), or null
// when no scope is open or the weight is not frozen in it.
QuantizedWeight* frozen_weight(const Tensor& weight, const char* op) {
  if (t_cache == nullptr || t_cache->storages.count(weight.storage().get()) == 0) return nullptr;
  auto key = std::make_tuple(static_cast<const void*>(weight.storage().get()), weight.data<float>(),
                             weight.size(0), weight.size(1), weight.stride(0), weight.stride(1));
  std::lock_guard<std::mutex> lock(t_cache->mu);  // the first use quantizes, under the lock
  auto it = t_cache->weights.find(key);
  if (it == t_cache->weights.end())
    it = t_cache->weights.emplace(key, quantize_weight(weight, op)).first;
  return it->second.get();
}

}  // namespace

namespace detail {

std::unique_ptr<QuantizedWeight> quantize_weight(const Tensor& weight, const char* op) {
  auto w = std::make_unique<QuantizedWeight>();
  const std::int64_t N = weight.size(0), K = weight.size(1);
  const std::int64_t s0 = weight.stride(0), s1 = weight.stride(1);
  w->N = N;
  w->K = K;
  w->q.resize(static_cast<std::size_t>(N * K));
  w->scale.resize(static_cast<std::size_t>(N));
  w->comp.resize(static_cast<std::size_t>(N));
  w->comp7.resize(static_cast<std::size_t>(N));
  const float* p = weight.data<float>();
  // Rows in parallel, each through quantize_row (the AVX-512 kernel where the
  // CPU has VNNI), quantize_row_s7 (7 bits, the AVX2 kernel where it has
  // AVX2), or quantize_row_s8 (AVX2's for AVX-VNNI, else the integer loops), the same bits as the
  // reference, from a contiguous copy of the row where the weight's rows are
  // not.
  const Int8Kernel kernel = int8_kernel();
  std::atomic<std::int64_t> bad{N};
  detail::parallel_for(N, detail::loop_threads(parallel_rows(N, K)), [&](std::int64_t n) {
    thread_local std::vector<float> row;
    thread_local std::vector<std::uint8_t> u;
    const float* x = p + n * s0;
    if (s1 != 1) {
      row.resize(static_cast<std::size_t>(K));
      for (std::int64_t k = 0; k < K; ++k) row[k] = p[n * s0 + k * s1];
      x = row.data();
    }
    std::int8_t* q = w->q.data() + n * K;
    float scale;
    if (kernel == Int8Kernel::avx512_vnni) {
      u.resize(static_cast<std::size_t>(K));
      scale = quantize_row(x, K, u.data(), true);
      for (std::int64_t k = 0; k < K; ++k)
        q[k] = static_cast<std::int8_t>(static_cast<std::int32_t>(u[k]) - 128);
    } else if (kernel == Int8Kernel::avx2) {
      scale = detail::quantize_row_s7(x, K, q, true);
    } else {
      scale = quantize_row_s8(x, K, q, kernel == Int8Kernel::avx_vnni);
    }
    if (std::isnan(scale)) {  // the first such row is named
      std::int64_t seen = bad.load();
      while (n < seen && !bad.compare_exchange_weak(seen, n)) {}
      return;
    }
    std::int32_t sum = 0;
    for (std::int64_t k = 0; k < K; ++k) sum += q[k];
    w->scale[n] = scale;
    w->comp[n] = 128 * sum;
    w->comp7[n] = 64 * sum;
  });
  ATTN_CHECK(bad.load() == N, ValueError,
             "{}: weight {} holds an infinity or a NaN in row {}: it cannot be quantized", op,
             shape_str(weight.shape()), bad.load());
  return w;
}

int int8_levels() { return int8_kernel() == Int8Kernel::avx2 ? 63 : 127; }

float quantize_row_as_run(const float* x, std::int64_t K, std::int8_t* q) {
  // quantize_row_s7's values are quantize_row_u7's, 64 lower (kernels_quantize_rows_test).
  if (int8_levels() == 63) return detail::quantize_row_s7(x, K, q, true);
  return quantize_row_s8(x, K, q, int8_gemm_avx2_cpu());
}

Tensor run_int8(const Tensor& x, QuantizedWeight& w, const Tensor& bias) {
  const std::int64_t N = w.N;
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(N);
  const std::int64_t M = N == 0 ? 0 : shape_numel(out_shape) / N;
  if (M * N == 0) return Tensor::empty(out_shape, DType::f32);
  if (const Int8Kernel kernel = int8_kernel(); kernel != Int8Kernel::none)
    return run_int8_kernel(kernel, x, M, w, bias, out_shape);
  static_assert(sizeof(std::int32_t) == sizeof(float));
  Tensor y = Tensor::empty(out_shape, DType::f32);
  Tensor xc = x.detach().contiguous();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Scratch& s = thread_scratch();
  float* out = y.data<float>();
  auto* acc = reinterpret_cast<std::int32_t*>(out);
  quantized_sums(xc.data<float>(), M, w, s, acc);
  const float* b = bc.defined() ? bc.data<float>() : nullptr;
  detail::parallel_for(M, detail::loop_threads(parallel_rows(M, N)), [&](std::int64_t m) {
    dequantize_row(acc + m * N, s.sx[m], w.scale.data(), b, N, out + m * N);
  });
  return y;
}

}  // namespace detail

const char* quantization_name(Quantization q) { return q == Quantization::int8 ? "int8" : "none"; }

Quantization parse_quantization(const std::string& text) {
  if (text == "none") return Quantization::none;
  if (text == "int8") return Quantization::int8;
  throw ValueError(fmt::format("unknown quantization '{}' (choices: none, int8)", text));
}

Int8Kernel int8_kernel() {
  static const Int8Kernel kernel = choose_int8_kernel();
  return kernel;
}

bool int8_supported() { return int8_kernel() != Int8Kernel::none; }

const char* int8_kernel_name(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::avx512_vnni: return "avx512_vnni";
    case Int8Kernel::avx_vnni: return "avx_vnni";
    case Int8Kernel::avx2: return "avx2";
    case Int8Kernel::none: return "none";
  }
  return "none";
}

std::string int8_description() {
  switch (int8_kernel()) {
    case Int8Kernel::avx512_vnni: return "AVX-512 VNNI (vpdpbusd)";
    case Int8Kernel::avx_vnni: return "AVX-VNNI (vpdpbusd, 256-bit)";
    case Int8Kernel::avx2: return "AVX2 (vpmaddubsw, 7 bits)";
    case Int8Kernel::none: break;
  }
  if (const std::optional<std::string> isa = isa_cap(); isa && detail::int8_gemm_avx2_cpu())
    return fmt::format("none (ATTN_ISA={})", *isa);
  return "none (no AVX2)";
}

QuantizedRows quantize_rows_int8(const Tensor& weight, const std::string& name) {
  ATTN_CHECK(weight.dtype() == DType::f32 && weight.dim() == 2, ValueError,
             "quantize_rows_int8: '{}' is {} of shape {}, not an f32 matrix", name,
             dtype_name(weight.dtype()), shape_str(weight.shape()));
  const Tensor w = weight.contiguous();
  const std::int64_t N = w.size(0), K = w.size(1);
  QuantizedRows q{Tensor::empty({N, K}, DType::f32), Tensor::empty({N}, DType::f32)};
  const float* x = w.data<float>();
  float* v = q.values.data<float>();
  float* s = q.scales.data<float>();
  for (std::int64_t n = 0; n < N; ++n) {
    const RowScale r = row_scale_reference(x + n * K, K);
    ATTN_CHECK(r.finite, ValueError, "quantize_rows_int8: '{}' row {} holds a NaN or an infinity",
               name, n);
    s[n] = r.scale;
    for (std::int64_t k = 0; k < K; ++k)
      v[n * K + k] = static_cast<float>(quantize_reference(x[n * K + k], r.inv));
  }
  return q;
}

QuantizeScope::QuantizeScope(const std::vector<Tensor>& frozen) : previous_(t_cache) {
  ATTN_CHECK(int8_supported(), ValueError,
             "QuantizeScope: int8 products need AVX2 or AVX-512 VNNI; here: {}",
             int8_description());
  cache_ = std::make_shared<Cache>();
  for (const Tensor& t : frozen) {
    if (!t.defined() || t.dtype() != DType::f32) continue;
    cache_->storages.insert(t.storage().get());
    cache_->keep.push_back(t);
  }
  t_cache = cache_.get();
}

QuantizeScope::QuantizeScope(const Shared& shared) : previous_(t_cache), cache_(shared.cache) {
  t_cache = cache_.get();
}

QuantizeScope::~QuantizeScope() { t_cache = previous_; }

QuantizeScope::Shared QuantizeScope::current() {
  return {t_cache != nullptr ? t_cache->shared_from_this() : nullptr};
}

Tensor linear_int8(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_operands(x, weight, bias, "linear_int8");
  ATTN_CHECK(!records_grad(x, weight, bias), ValueError,
             "linear_int8: not differentiable (inference only): a tensor requires grad while "
             "grad is enabled");
  if (QuantizedWeight* w = frozen_weight(weight, "linear_int8")) return run_int8(x, *w, bias);
  std::unique_ptr<QuantizedWeight> w = quantize_weight(weight, "linear_int8");
  return run_int8(x, *w, bias);
}

Tensor linear_int8_reference(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_operands(x, weight, bias, "linear_int8_reference");
  const std::int64_t N = weight.size(0), K = weight.size(1);
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(N);
  Tensor y = Tensor::empty(out_shape, DType::f32);
  if (y.numel() == 0) return y;
  const std::int64_t M = y.numel() / N;
  Tensor xc = x.detach().contiguous(), wc = weight.detach().contiguous();
  const float* px = xc.data<float>();
  const float* pw = wc.data<float>();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  std::vector<std::int8_t> wq(static_cast<std::size_t>(N * K));
  std::vector<float> sw(static_cast<std::size_t>(N));
  const int levels = detail::int8_levels();
  for (std::int64_t n = 0; n < N; ++n) {
    const RowScale s = row_scale_reference(pw + n * K, K, static_cast<float>(levels));
    ATTN_CHECK(s.finite, ValueError,
               "linear_int8_reference: weight {} holds an infinity or a NaN in row {}: it "
               "cannot be quantized",
               shape_str(weight.shape()), n);
    sw[n] = s.scale;
    for (std::int64_t k = 0; k < K; ++k)
      wq[n * K + k] = quantize_reference(pw[n * K + k], s.inv, levels);
  }
  std::vector<std::int8_t> xq(static_cast<std::size_t>(K));
  float* out = y.data<float>();
  for (std::int64_t m = 0; m < M; ++m) {
    const RowScale s = row_scale_reference(px + m * K, K, static_cast<float>(levels));
    for (std::int64_t k = 0; k < K; ++k) xq[k] = quantize_reference(px[m * K + k], s.inv, levels);
    for (std::int64_t n = 0; n < N; ++n) {
      std::int64_t acc = 0;
      for (std::int64_t k = 0; k < K; ++k)
        acc += static_cast<std::int64_t>(xq[k]) * static_cast<std::int64_t>(wq[n * K + k]);
      const float b = bc.defined() ? bc.data<float>()[n] : 0.0f;
      out[m * N + n] = std::fma(static_cast<float>(acc), s.scale * sw[n], b);
    }
  }
  return y;
}

namespace detail {

bool quantize_scope_open() { return t_cache != nullptr; }

std::optional<Tensor> quantized_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (t_cache == nullptr) return std::nullopt;
  if (x.dtype() != DType::f32 || weight.dtype() != DType::f32 ||
      (bias.defined() && bias.dtype() != DType::f32))
    return std::nullopt;
  const std::int64_t K = weight.size(1);
  if (K == 0 || K > kMaxK || records_grad(x, weight, bias)) return std::nullopt;
  QuantizedWeight* w = frozen_weight(weight, "linear");
  if (w == nullptr) return std::nullopt;
  return run_int8(x, *w, bias);
}

Tensor int8_accumulators(const Tensor& x, const Tensor& weight) {
  check_operands(x, weight, Tensor(), "int8_accumulators");
  ATTN_CHECK(x.dim() == 2, ShapeError, "int8_accumulators: expected x (M, K), got {}",
             shape_str(x.shape()));
  std::unique_ptr<QuantizedWeight> w = quantize_weight(weight, "int8_accumulators");
  const std::int64_t M = x.size(0), N = w->N;
  Tensor acc = Tensor::empty({M, N}, DType::i32);
  if (M * N == 0) return acc;
  Tensor xc = x.detach().contiguous();
  Scratch s;
  quantized_sums(xc.data<float>(), M, *w, s, acc.data<std::int32_t>());
  return acc;
}

Tensor int8_accumulators_reference(const Tensor& x, const Tensor& weight) {
  check_operands(x, weight, Tensor(), "int8_accumulators_reference");
  ATTN_CHECK(x.dim() == 2, ShapeError, "int8_accumulators_reference: expected x (M, K), got {}",
             shape_str(x.shape()));
  const std::int64_t M = x.size(0), N = weight.size(0), K = weight.size(1);
  Tensor xc = x.detach().contiguous(), wc = weight.detach().contiguous();
  Tensor acc = Tensor::empty({M, N}, DType::i32);
  std::vector<std::int8_t> xq(static_cast<std::size_t>(K)), wq(static_cast<std::size_t>(K));
  const int levels = int8_levels();
  const float lf = static_cast<float>(levels);
  for (std::int64_t m = 0; m < M; ++m) {
    const float* xr = xc.data<float>() + m * K;
    const RowScale sx = row_scale_reference(xr, K, lf);
    for (std::int64_t k = 0; k < K; ++k) xq[k] = quantize_reference(xr[k], sx.inv, levels);
    for (std::int64_t n = 0; n < N; ++n) {
      const float* wr = wc.data<float>() + n * K;
      const RowScale sw = row_scale_reference(wr, K, lf);
      std::int64_t sum = 0;
      for (std::int64_t k = 0; k < K; ++k)
        sum += static_cast<std::int64_t>(xq[k]) * quantize_reference(wr[k], sw.inv, levels);
      acc.data<std::int32_t>()[m * N + n] = static_cast<std::int32_t>(sum);
    }
  }
  return acc;
}

}  // namespace detail

}  // namespace attn
