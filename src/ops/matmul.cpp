// Matrix products: matmul, bmm, and the plain reference they are tested against.
//
//   C = A @ B        C[i,j] = sum_k A[i,k] B[k,j]
//   dA = g @ B^T     dB = A^T @ g      (B^T, A^T are transposed views, not copies)
// Batch dims broadcast; each gradient is summed back to its input's shape
// (sum_to). When one B matrix serves the whole batch (the Linear case,
// (B, T, D) @ (D, N)), dB is one GEMM over the flattened batch:
//   dB = A_flat^T @ g_flat,   A_flat (B*T, D), g_flat (B*T, N).
//
// Kernel. Every operand matrix is handed to the GEMM as it lies in memory:
// row-major rows ('N', leading dimension = row stride) or a transposed view
// ('T', leading dimension = column stride). Any other layout of the last two
// dims is copied once (the unbroadcast tensor, never its expansion). Batch
// items are addressed through the (broadcast) batch strides, so a shared
// operand is read in place. Then, for f32:
//   1. one matrix, or a fold: when B is the same matrix for every batch item
//      and A's rows are evenly spaced across the batch (the Linear case), the
//      product is one GEMM of batch*M rows: oneDNN's matmul primitive from
//      2^23 multiply-adds on (1.3x dnnl_sgemm's speed there), dnnl_sgemm
//      below, from 2^22 on in row blocks of one thread each (their bits do
//      not depend on the load: ops/row_blocks.h);
//   2. other batches: one call of oneDNN's matmul primitive for the whole
//      batch (brgemm kernels), built once per geometry and cached per thread,
//      on one thread below 2^22 multiply-adds;
//   3. where oneDNN offers only its reference kernel for a geometry: one
//      dnnl_sgemm per item, in parallel over the items when they are small
//      (each call then runs single-threaded inside the OpenMP region).
// Measured on 64 x (10 x 8) @ (8 x 10), the d2l attention-score shape (see
// bench/matmul_bench.cpp): dnnl_sgemm costs about 0.6 us per call, so the
// primitive (2.) is several times faster than per-item calls, parallel or not.
// f64 (gradient checks, references) runs on plain loops through steps 1 and 3.
// In a bf16 scope (attn/ops/precision.h) f32 products take run_bf16 instead:
// the same geometry, bf16 operands, one primitive.
#include "attn/ops/matmul.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <type_traits>

#include "attn/autograd/node.h"
#include "attn/core/storage.h"
#include "attn/core/threads.h"
#include "attn/ops/precision.h"
#include "attn/ops/reduce.h"
#include "core/parallel.h"
#include "kernels/gemm/f32_gemm.h"
#include "ops/matmul_internal.h"
#include "ops/matmul_primitive.h"
#include "ops/onednn_isa.h"
#include "ops/precision_internal.h"
#include "ops/row_blocks.h"
#include "ops/thread_limit.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

namespace {

// Below this many multiply-adds per matrix, batches run in parallel over items.
constexpr std::int64_t kSmallGemmWork = 64 * 64 * 64;
// Below this many multiply-adds in total, everything runs on one thread.
constexpr std::int64_t kMinParallelWork = 64 * 1024;
// Below this many multiply-adds in total, plain loops beat oneDNN's fixed cost
// per call (the products of one decoding step: 1 x 32 @ 32 x 32 and the like).
constexpr std::int64_t kTinyWork = 1 << 15;
using detail::kSerialGemmWork;

using detail::on_row_blocks;
using detail::ThreadLimit;
// From this many multiply-adds on, a one-matrix f32 product runs on oneDNN's
// matmul primitive rather than dnnl_sgemm.
constexpr std::int64_t kPrimitiveWork = 1 << 23;

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// Checks operands and returns the broadcast batch shape.
Shape check_operands(const Tensor& a, const Tensor& b, const char* op) {
  ATTN_CHECK(a.defined() && b.defined(), ValueError, "{}: undefined operand", op);
  ATTN_CHECK(a.dim() >= 2 && b.dim() >= 2, ShapeError,
             "{}: expected tensors with at least 2 dims, got a {} and b {}", op,
             shape_str(a.shape()), shape_str(b.shape()));
  ATTN_CHECK(a.dtype() == b.dtype(), DTypeError, "{}: dtypes differ: a is {} {}, b is {} {}", op,
             dtype_name(a.dtype()), shape_str(a.shape()), dtype_name(b.dtype()),
             shape_str(b.shape()));
  ATTN_CHECK(is_floating(a.dtype()), DTypeError,
             "{}: expected a floating dtype (f32 or f64), got {}: a is {}, b is {}", op,
             dtype_name(a.dtype()), shape_str(a.shape()), shape_str(b.shape()));
  ATTN_CHECK(a.size(-1) == b.size(-2), ShapeError, "{}: inner dimensions differ: a is {}, b is {}",
             op, shape_str(a.shape()), shape_str(b.shape()));
  Shape ba = batch_of(a), bb = batch_of(b);
  std::size_t n = std::max(ba.size(), bb.size());
  Shape batch(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t x = i < n - ba.size() ? 1 : ba[i - (n - ba.size())];
    std::int64_t y = i < n - bb.size() ? 1 : bb[i - (n - bb.size())];
    ATTN_CHECK(x == y || x == 1 || y == 1, ShapeError,
               "{}: batch dims do not broadcast: a is {}, b is {}", op, shape_str(a.shape()),
               shape_str(b.shape()));
    batch[i] = x == 1 ? y : x;
  }
  return batch;
}

// How a row-major GEMM reads a rows x cols matrix with strides (sr, sc):
// 'N' with ld = sr, or 'T' (the matrix is a transposed view) with ld = sc.
// Strides of size-1 dims do not matter. False when neither fits.
bool gemm_layout(std::int64_t rows, std::int64_t cols, std::int64_t sr, std::int64_t sc,
                 char& trans, std::int64_t& ld) {
  if ((cols == 1 || sc == 1) && (rows == 1 || sr >= std::max<std::int64_t>(cols, 1))) {
    trans = 'N';
    ld = rows == 1 ? std::max<std::int64_t>(cols, 1) : sr;
    return true;
  }
  if ((rows == 1 || sr == 1) && (cols == 1 || sc >= std::max<std::int64_t>(rows, 1))) {
    trans = 'T';
    ld = cols == 1 ? std::max<std::int64_t>(rows, 1) : sc;
    return true;
  }
  return false;
}

// One side of the product as the GEMM reads it.
struct Operand {
  Tensor t;  // the input, or its contiguous copy
  char trans = 'N';
  std::int64_t ld = 1;
};

Operand prepare(const Tensor& x) {
  Operand o{x};
  if (!gemm_layout(x.size(-2), x.size(-1), x.stride(-2), x.stride(-1), o.trans, o.ld)) {
    o.t = x.detach().contiguous();  // detached: the copy is internal to the product
    gemm_layout(x.size(-2), x.size(-1), o.t.stride(-2), o.t.stride(-1), o.trans, o.ld);
  }
  return o;
}

// Offset (in elements, from x's first element) of each batch item of x read
// as the broadcast batch shape `batch`, in row-major order of `batch`.
std::vector<std::int64_t> batch_offsets(const Tensor& x, const Shape& batch) {
  const std::size_t nd = batch.size();
  const std::size_t lead = nd - (static_cast<std::size_t>(x.dim()) - 2);
  Shape st(nd, 0);
  for (std::size_t d = lead; d < nd; ++d)
    st[d] = x.shape()[d - lead] == 1 ? 0 : x.strides()[d - lead];
  std::vector<std::int64_t> off(static_cast<std::size_t>(shape_numel(batch)));
  Shape idx(nd, 0);
  std::int64_t o = 0;
  for (auto& v : off) {
    v = o;
    for (std::size_t d = nd; d-- > 0;) {
      o += st[d];
      if (++idx[d] < batch[d]) break;
      o -= st[d] * batch[d];
      idx[d] = 0;
    }
  }
  return off;
}

// When A is read 'N' and its (batch..., M) rows are evenly spaced, returns
// true with the spacing: the rows of all items form one (batch*M, K) matrix.
bool foldable_rows(const Operand& A, const Shape& batch, std::int64_t K, std::int64_t& ld) {
  if (A.trans != 'N') return false;
  const Tensor& x = A.t;
  const std::size_t nd = batch.size();
  const std::size_t lead = nd - (static_cast<std::size_t>(x.dim()) - 2);
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (size, stride), size > 1
  for (std::size_t d = 0; d < nd; ++d) {
    if (batch[d] == 1) continue;
    std::int64_t s = d < lead || x.shape()[d - lead] == 1 ? 0 : x.strides()[d - lead];
    dims.emplace_back(batch[d], s);
  }
  if (x.size(-2) != 1) dims.emplace_back(x.size(-2), x.stride(-2));
  for (std::size_t i = 0; i + 1 < dims.size(); ++i)
    if (dims[i].second != dims[i + 1].second * dims[i + 1].first) return false;
  ld = dims.empty() ? A.ld : dims.back().second;
  return ld >= std::max<std::int64_t>(K, 1);
}

// ---- GEMM kernels: C (M x N, row stride ldc) = op(A) @ op(B) ----

// f64: plain loops (gradient checks and references only).
template <class T>
void gemm_loops(char ta, char tb, std::int64_t M, std::int64_t N, std::int64_t K, const T* A,
                std::int64_t lda, const T* B, std::int64_t ldb, T* C, std::int64_t ldc) {
  const std::int64_t si = ta == 'N' ? lda : 1,
                     sk = ta == 'N' ? 1 : lda;  // op(A)[i,k] = A[i*si + k*sk]
  const bool threaded = M > 1 && M * N * K >= (1 << 20);
  detail::parallel_for(M, detail::loop_threads(threaded), [&](std::int64_t i) {
    const T* a = A + i * si;
    T* c = C + i * ldc;
    if (tb == 'T' && ta == 'N') {  // C[i,j] = dot(A[i,:], B[j,:]), both unit-stride
      for (std::int64_t j = 0; j < N; ++j) {
        const T* b = B + j * ldb;
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (std::int64_t k = 0; k < K; ++k) acc += a[k] * b[k];
        c[j] = acc;
      }
    } else {  // C[i,:] = sum_k op(A)[i,k] op(B)[k,:]
      const std::int64_t bk = tb == 'N' ? ldb : 1, bj = tb == 'N' ? 1 : ldb;
      std::fill(c, c + N, T(0));
      for (std::int64_t k = 0; k < K; ++k) {
        const T aik = a[k * sk];
        const T* b = B + k * bk;
        if (bj == 1) {
#pragma omp simd
          for (std::int64_t j = 0; j < N; ++j) c[j] += aik * b[j];
        } else {
          for (std::int64_t j = 0; j < N; ++j) c[j] += aik * b[j * bj];
        }
      }
    }
  });
}

// C = op(A) @ op(B) on dnnl_sgemm, in row blocks from row_block_work() on
// (ops/row_blocks.h), each on one thread.
bool gemm(char ta, char tb, std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
          std::int64_t lda, const float* B, std::int64_t ldb, float* C, std::int64_t ldc) {
  return on_row_blocks(M, M * N * K, [&](std::int64_t first, std::int64_t rows) {
    return dnnl_sgemm(ta, tb, rows, N, K, 1.0f, ta == 'N' ? A + first * lda : A + first, lda, B,
                      ldb, 0.0f, C + first * ldc, ldc) == dnnl_success;
  });
}

bool gemm(char ta, char tb, std::int64_t M, std::int64_t N, std::int64_t K, const double* A,
          std::int64_t lda, const double* B, std::int64_t ldb, double* C, std::int64_t ldc) {
  gemm_loops(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
  return true;
}

// ---- batches: oneDNN's matmul primitive ----
//
// One primitive call computes the whole batch with oneDNN's brgemm kernels,
// threaded over items and rows: for the attention shapes (many products of
// about 10 x 8 x 10) it is several times faster than one dnnl_sgemm per item,
// whose fixed cost per call (about 0.6 us) dominates. Creating a primitive
// costs about 0.5 ms, so each thread keeps the ones it built, keyed by geometry
// and thread count (src/ops/matmul_primitive.cpp).

std::atomic<bool> g_batched_primitive{true};

// dims and strides of operand x over the output batch, as oneDNN reads them:
// batch dims of size 1 (or expanded with stride 0) broadcast.
void onednn_geometry(const Operand& x, const Shape& batch, std::int64_t rows, std::int64_t cols,
                     dnnl::memory::dims& dims, dnnl::memory::dims& strides) {
  const std::size_t nd = batch.size();
  const std::size_t lead = nd - (static_cast<std::size_t>(x.t.dim()) - 2);
  dims.assign(nd + 2, 1);
  strides.assign(nd + 2, 0);
  dims[nd] = rows;
  dims[nd + 1] = cols;
  strides[nd] = x.trans == 'N' ? x.ld : 1;
  strides[nd + 1] = x.trans == 'N' ? 1 : x.ld;
  for (std::size_t d = lead; d < nd; ++d) {
    const std::int64_t size = x.t.shape()[d - lead], stride = x.t.strides()[d - lead];
    if (size > 1 && stride != 0) {
      dims[d] = size;
      strides[d] = stride;
    }
  }
  // A size-1 dim gets the stride it would have in a dense layout (the extent
  // of the dims inside it), so that oneDNN sees a contiguous tensor as dense.
  std::int64_t extent = x.ld * (x.trans == 'N' ? rows : cols);
  for (std::size_t d = nd; d-- > 0;) {
    if (dims[d] == 1) strides[d] = extent;
    extent = std::max(extent, dims[d] * strides[d]);
  }
}

// out = A @ B over the whole batch in one primitive call (pointers to
// operands of type `ab` laid out as A and B), on one thread below
// kSerialGemmWork multiply-adds, else on the team, whatever the load (the
// bits depend on the team: ops/row_blocks.h); false when not available.
bool batched_call(dnnl::memory::data_type ab, const void* pa, const Operand& A, const void* pb,
                  const Operand& B, const Shape& batch, std::int64_t M, std::int64_t N,
                  std::int64_t K, const Tensor& out) {
  dnnl::memory::dims ad, as, bd, bs, cd = batch;
  onednn_geometry(A, batch, M, K, ad, as);
  onednn_geometry(B, batch, K, N, bd, bs);
  cd.push_back(M);
  cd.push_back(N);
  std::optional<ThreadLimit> one;
  if (shape_numel(batch) * M * N * K < kSerialGemmWork && omp_get_max_threads() > 1 &&
      !omp_in_parallel())
    one.emplace(1);
  return detail::primitive_product(ab, pa, ad, as, pb, bd, bs, out.data<float>(), cd);
}

// The `rows` rows of a folded product (one matrix, or the Linear fold with
// rows ld_rows apart) on the matmul primitive, in row blocks
// (ops/row_blocks.h); `elem`, the size of an operand element of type `ab`.
bool folded_call(dnnl::memory::data_type ab, std::size_t elem, const void* pa, const Operand& A,
                 std::int64_t ld_rows, const void* pb, const Operand& B, std::int64_t rows,
                 std::int64_t N, std::int64_t K, float* pc) {
  using dims = dnnl::memory::dims;
  const dims as = A.trans == 'N' ? dims{ld_rows, 1} : dims{1, A.ld};
  const dims bs = B.trans == 'N' ? dims{B.ld, 1} : dims{1, B.ld};
  return on_row_blocks(rows, rows * N * K, [&](std::int64_t first, std::int64_t n) {
    const std::int64_t offset = A.trans == 'N' ? first * ld_rows : first;
    return detail::primitive_product(ab, static_cast<const char*>(pa) + offset * elem, {n, K}, as,
                                     pb, {K, N}, bs, pc + first * N, {n, N});
  });
}

bool batched_primitive(const Operand& A, const Operand& B, const Shape& batch, std::int64_t M,
                       std::int64_t N, std::int64_t K, const Tensor& out) {
  if (!g_batched_primitive.load(std::memory_order_relaxed)) return false;
  return batched_call(dnnl::memory::data_type::f32, A.t.data<float>(), A, B.t.data<float>(), B,
                      batch, M, N, K, out);
}

// True when every batch item of x (read over `batch`) is the same matrix.
bool shared_by_batch(const Tensor& x) {
  for (std::int64_t d = 0; d + 2 < x.dim(); ++d)
    if (x.shape()[d] != 1 && x.strides()[d] != 0) return false;
  return true;
}

template <class T>
void run_gemms(const Operand& A, const Operand& B, const Shape& batch, std::int64_t M,
               std::int64_t N, std::int64_t K, const Tensor& out, const char* op);

// ---- bf16 (ops/precision.h): both operands rounded to bf16 in their own
// layouts, one oneDNN primitive accumulating in f32 ----

// The floats of `bits` (x's bf16 rounding: `span` elements in x's layout from
// its first element) as a tensor of x's shape and strides.
Tensor widened(const Tensor& x, const std::uint16_t* bits, std::int64_t span) {
  auto storage = std::make_shared<Storage>(static_cast<std::size_t>(span) * sizeof(float));
  float* p = static_cast<float*>(storage->data());
  for (std::int64_t i = 0; i < span; ++i) p[i] = from_bf16(bits[i]);
  return Tensor::make_view(std::move(storage), x.shape(), x.strides(), 0, DType::f32);
}

void run_bf16(const Operand& A, const Operand& B, const Shape& batch, std::int64_t M,
              std::int64_t N, std::int64_t K, const Tensor& out, const char* op) {
  thread_local std::vector<std::uint16_t> scratch_a, scratch_b;
  const std::int64_t span_a = detail::storage_span(A.t), span_b = detail::storage_span(B.t);
  bool ok = span_a > 0 && span_b > 0;
  const std::uint16_t *pa = nullptr, *pb = nullptr;
  if (ok) {
    pa = detail::bf16_span(A.t, span_a, scratch_a);
    pb = detail::bf16_span(B.t, span_b, scratch_b);
    std::int64_t ld_rows = A.ld;
    const auto bf16 = dnnl::memory::data_type::bf16;
    ok = shape_numel(batch) == 1 || (shared_by_batch(B.t) && foldable_rows(A, batch, K, ld_rows))
             ? folded_call(bf16, sizeof(std::uint16_t), pa, A, ld_rows, pb, B,
                           shape_numel(batch) * M, N, K, out.data<float>())
             : batched_call(bf16, pa, A, pb, B, batch, M, N, K, out);
  }
  if (!ok) {
    // No fast bf16 kernel for this geometry (or none on this CPU): the same
    // rounding, f32 products. The bits bf16_span gave, where it gave any:
    // an open detail::Bf16Reuse's (a Linear layer's input as its forward
    // rounded it) are the operand, whatever its floats hold now.
    PrecisionScope f32(Precision::f32);
    run_gemms<float>(prepare(pa ? widened(A.t, pa, span_a) : round_to_bf16(A.t)),
                     prepare(pb ? widened(B.t, pb, span_b) : round_to_bf16(B.t)), batch, M, N, K,
                     out, op);
  }
}

template <class T>
void run_gemms(const Operand& A, const Operand& B, const Shape& batch, std::int64_t M,
               std::int64_t N, std::int64_t K, const Tensor& out, const char* op) {
  const T* pa = A.t.data<T>();
  const T* pb = B.t.data<T>();
  T* pc = out.data<T>();
  if constexpr (std::is_same_v<T, float>) {
    if (matmul_precision() == Precision::bf16) {
      run_bf16(A, B, batch, M, N, K, out, op);
      return;
    }
  }
  const std::int64_t nb = shape_numel(batch);
  std::int64_t ld_rows = A.ld;
  bool ok = true;
  if (nb * M * N * K <= kTinyWork) {
    const std::vector<std::int64_t> oa = batch_offsets(A.t, batch), ob = batch_offsets(B.t, batch);
    for (std::int64_t i = 0; i < nb; ++i)
      gemm_loops(A.trans, B.trans, M, N, K, pa + oa[i], A.ld, pb + ob[i], B.ld, pc + i * M * N, N);
  } else if (nb == 1 || (shared_by_batch(B.t) && foldable_rows(A, batch, K, ld_rows))) {
    // Item 0 of every operand starts at its first element. Large f32
    // products run on the matmul primitive: its brgemm kernels measured 1.3x
    // dnnl_sgemm's GFLOP/s on an AMD EPYC Zen 5 (1024 x 512 x 2048, 2 threads); small ones
    // (every product of d2l's toy model) stay on dnnl_sgemm.
    bool done = false;
    Operand Au = A, Bu = B;
    Tensor copy_a, copy_b;
    if constexpr (std::is_same_v<T, float>) {
      const std::int64_t work = nb * M * N * K;
      if (work >= kSerialGemmWork) {
        // Only the operands whose K lines the sum runs across; A is read 'T'
        // only where nb is 1, and ld_rows is then its leading dimension.
        if (A.trans == 'T') {
          detail::unalias(pa, ld_rows, K, M, work, copy_a);
          Au.ld = ld_rows;
        }
        if (B.trans == 'N') detail::unalias(pb, Bu.ld, K, N, work, copy_b);
      }
      if (work >= kPrimitiveWork && g_batched_primitive.load(std::memory_order_relaxed))
        done = folded_call(dnnl::memory::data_type::f32, sizeof(float), pa, Au, ld_rows, pb, Bu,
                           nb * M, N, K, pc);
    }
    if (!done) ok = gemm(Au.trans, Bu.trans, nb * M, N, K, pa, ld_rows, pb, Bu.ld, pc, N);
  } else if (std::is_same_v<T, float> && batched_primitive(A, B, batch, M, N, K, out)) {
    // done: one oneDNN matmul primitive call for the whole batch
  } else {
    const std::vector<std::int64_t> oa = batch_offsets(A.t, batch), ob = batch_offsets(B.t, batch);
    if (M * N * K <= kSmallGemmWork && nb * M * N * K >= kMinParallelWork * grain_scale() &&
        omp_get_max_threads() > 1 && !omp_in_parallel() && fork_ok()) {
      std::atomic<bool> all_ok{true};
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < nb; ++i)
        if (!gemm(A.trans, B.trans, M, N, K, pa + oa[i], A.ld, pb + ob[i], B.ld, pc + i * M * N, N))
          all_ok = false;
      ok = all_ok;
    } else {
      for (std::int64_t i = 0; i < nb && ok; ++i)
        ok = gemm(A.trans, B.trans, M, N, K, pa + oa[i], A.ld, pb + ob[i], B.ld, pc + i * M * N, N);
    }
  }
  ATTN_CHECK(ok, InternalError, "{}: oneDNN failed: a is {}, b is {}", op, shape_str(A.t.shape()),
             shape_str(B.t.shape()));
}

}  // namespace

// The product without autograd.
Tensor detail::product(const Tensor& a, const Tensor& b, const char* op) {
  Shape batch = check_operands(a, b, op);
  const std::int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  if (shape_numel(out_shape) == 0) return Tensor::empty(out_shape, a.dtype());
  if (K == 0) return zeros(out_shape, a.dtype());
  // bf16 converts an operand's whole layout: a sparse view is copied first.
  const bool bf16 = a.dtype() == DType::f32 && matmul_precision() == Precision::bf16;
  auto dense_enough = [](const Tensor& x) {
    const std::int64_t span = detail::storage_span(x);
    return span >= 0 && span <= 2 * x.numel() + 4096;
  };
  Operand A = prepare(bf16 && !dense_enough(a) ? a.detach().contiguous() : a),
          B = prepare(bf16 && !dense_enough(b) ? b.detach().contiguous() : b);
  Tensor out = Tensor::empty(out_shape, a.dtype());
  // The bits depend on the shape and the thread count only, never on the
  // load (ops/row_blocks.h). While other processes keep the cores busy
  // (fork_ok), the row blocks of a large single product run on the calling
  // thread one after another; while the team's cores sit far apart
  // (grain_scale, attn/core/threads.h), those of products below the scaled
  // serial threshold do. The per-item loop over a batch of small products
  // looks at the load too; the other paths do not.
  const int threads = omp_get_max_threads();
  const std::int64_t scale = grain_scale(), work = shape_numel(batch) * M * N * K;
  const bool alone = threads > 1 && !omp_in_parallel() &&
                     (!fork_ok() || (scale > 1 && work < kSerialGemmWork * scale));
  const detail::TeamScope team({threads, alone});
  dispatch_float(a.dtype(), op, [&]<class T>() { run_gemms<T>(A, B, batch, M, N, K, out, op); });
  return out;
}

namespace {

using detail::product;

// dB = A^T @ g, summed to b's shape.
Tensor grad_b(const Tensor& g, const Tensor& a, const Tensor& b) {
  const std::int64_t K = b.size(-2), N = b.size(-1);
  if (K * N > 0 && b.numel() == K * N && a.numel() > 0) {
    // One B for the whole batch: a single GEMM over the flattened batch rows.
    Tensor a2 = a.reshape({-1, K}), g2 = g.reshape({-1, N});
    return matmul(a2.transpose(0, 1), g2).reshape(b.shape());
  }
  return sum_to(matmul(a.transpose(-2, -1), g), b.shape());
}

Tensor differentiable_product(const Tensor& a, const Tensor& b, const char* op) {
  Tensor out = product(a, b, op);
  if (!autograd::grad_enabled() || !(a.requires_grad() || b.requires_grad())) return out;
  Tensor ad = a.detach(), bd = b.detach();
  return record(out, op, {a, b}, [ad, bd](const Tensor& g, const Needs& n) {
    Tensor ga, gb;
    if (n[0]) ga = sum_to(matmul(g, bd.transpose(-2, -1)), ad.shape());
    if (n[1]) gb = grad_b(g, ad, bd);
    return Grads{ga, gb};
  });
}

}  // namespace

void detail::set_matmul_batched_primitive(bool on) { g_batched_primitive = on; }

std::int64_t detail::row_block_work() {
  static const std::int64_t line =
      detail::onednn_isa_has(dnnl::cpu_isa::avx512_core) ? std::int64_t(1) << 19 : kSerialGemmWork;
  return line;
}

bool detail::f32_product_bits_depend_on_ld() {
  static const bool depend = detail::onednn_isa_has(dnnl::cpu_isa::avx512_core);
  return depend;
}

bool detail::linear_on_f32_kernel() {
  static const bool on =
      !detail::onednn_isa_has(dnnl::cpu_isa::avx512_core) && detail::f32_gemm_supported();
  return on;
}

Tensor matmul(const Tensor& a, const Tensor& b) { return differentiable_product(a, b, "matmul"); }

Tensor bmm(const Tensor& a, const Tensor& b) {
  ATTN_CHECK(a.defined() && b.defined(), ValueError, "bmm: undefined operand");
  ATTN_CHECK(a.dim() == 3 && b.dim() == 3, ShapeError,
             "bmm: expected 3-D tensors, got a {} and b {}", shape_str(a.shape()),
             shape_str(b.shape()));
  ATTN_CHECK(a.size(0) == b.size(0), ShapeError, "bmm: batch sizes differ: a is {}, b is {}",
             shape_str(a.shape()), shape_str(b.shape()));
  return differentiable_product(a, b, "bmm");
}

// Plain loops straight over the strided inputs; shares nothing with the
// kernel above but the argument checks.
Tensor matmul_reference(const Tensor& a, const Tensor& b) {
  Shape batch = check_operands(a, b, "matmul_reference");
  const std::int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = Tensor::empty(out_shape, a.dtype());
  const std::int64_t nb = shape_numel(batch), nd = static_cast<std::int64_t>(batch.size());
  dispatch_float(a.dtype(), "matmul_reference", [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    const std::int64_t sa0 = a.stride(-2), sa1 = a.stride(-1), sb0 = b.stride(-2),
                       sb1 = b.stride(-1);
    for (std::int64_t n = 0; n < nb; ++n) {
      // Unravel n over `batch`, then locate the item in a and b (size-1 dims broadcast).
      std::int64_t rem = n, off_a = 0, off_b = 0;
      for (std::int64_t d = nd - 1; d >= 0; --d) {
        std::int64_t i = rem % batch[d];
        rem /= batch[d];
        std::int64_t da = d - (nd - (a.dim() - 2)), db = d - (nd - (b.dim() - 2));
        if (da >= 0 && a.shape()[da] != 1) off_a += i * a.strides()[da];
        if (db >= 0 && b.shape()[db] != 1) off_b += i * b.strides()[db];
      }
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
          double acc = 0;
          for (std::int64_t k = 0; k < K; ++k)
            acc += static_cast<double>(pa[off_a + i * sa0 + k * sa1]) *
                   static_cast<double>(pb[off_b + k * sb0 + j * sb1]);
          pc[(n * M + i) * N + j] = static_cast<T>(acc);
        }
    }
  });
  return out;
}

}  // namespace attn
