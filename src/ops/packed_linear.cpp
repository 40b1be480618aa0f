// Frozen Linear weights packed once (inference; attn/ops/precision.h):
//
//   y = x @ W^T + b        (linear)
//   y = max(x @ W^T + b, 0)  (linear_relu)
//
// attn's own kernels on W laid out once in their column groups: in f32
// kernels/gemm/f32_gemm.h on a CPU with AVX-512 or AVX2 and FMA, in bf16
// kernels/gemm/bf16_gemm.h on one with AVX-512 BF16; elsewhere (ATTN_ISA=portable
// too, and bf16 under ATTN_ISA=avx2) oneDNN's matmul primitive on W
// reordered once into the layout it asks for.
// Either adds the bias and applies the ReLU as it stores y. The products are
// the same as on the unpacked path; only the order of their sums differs.
//
// Why packed: given W (N, K) as it lies in memory, the primitive re-blocks it
// on every call. A decoding step multiplies a few rows by every weight of the
// model, so that copy is most of the product: for 128 rows x 256 x 8000 (a
// subword model's output layer) the packed product took 1.43 ms against
// 2.57 ms in f32 and 0.65 ms against 1.24 ms in bf16 (best of 30, 2 threads,
// an AMD EPYC Zen 5). Why attn's kernel in f32: at a decoding step's 12-64 rows it
// runs at 87-93% of the FMA peak where the packed primitive made 65-70%, and
// it fetches the weights ahead from memory (kernels/gemm/f32_gemm_avx512.cpp); greedy
// translation of 2,000 sentences with the tatoeba model went from 1.10 to
// 0.91 s with the same output (bf16: 0.62 -> 0.56 s). Their sums do not
// depend on the other rows of the batch.
//
// Rows (the primitive): a primitive is built for one row count (about
// 0.5 ms), and decoding's row count changes nearly every step as sentences
// leave. x's rows are cut into runs whose lengths come from a small set
// (4096, multiples of 128 from 1024 rows, multiples of 16 from 16, then
// 1..15), each a primitive that reads x and writes y in place: at most three
// runs below 4096 rows.
// A weight is first packed by a product of 16 rows or more (below), or by
// any product while a PackAllRows guard lives on the thread.
#include <omp.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/core/storage.h"
#include "attn/core/threads.h"
#include "attn/ops/precision.h"
#include "core/parallel.h"
#include "kernels/gemm/bf16_gemm.h"
#include "kernels/gemm/f32_gemm.h"
#include "ops/matmul_internal.h"
#include "ops/matmul_primitive.h"
#include "ops/precision_internal.h"
#include "ops/quantize_internal.h"
#include "ops/thread_limit.h"

namespace attn::detail {

struct PackedStore {
  // One weight's packed copies, one per layout a primitive asked for.
  struct Packed {
    dnnl::memory::desc layout;
    std::unique_ptr<Storage> buffer;  // attn's allocator: huge pages for big weights
    dnnl::memory memory;
  };
  struct Weight {
    std::deque<Packed> layouts;  // a copy stays where it is while others are added
    // attn's kernel's layout (kernels/gemm/f32_gemm.h, or kernels/gemm/bf16_gemm.h in bf16),
    // once used
    std::unique_ptr<Storage> tiles;
    // linear_argmax's int8 screen (ops/linear_argmax.cpp; f32 only), once used
    std::shared_ptr<ArgmaxScreen> screen;
  };
  // Guards `weights` (threads that joined the scope share the store): a
  // lookup, and the first use of a layout, which packs it.
  std::mutex mu;
  // (storage, first element, N, K, strides, bf16) -> packed copies
  std::map<std::tuple<const void*, const float*, std::int64_t, std::int64_t, std::int64_t,
                      std::int64_t, bool>,
           Weight>
      weights;
};

namespace {

// Weights of fewer elements keep the unpacked path (every weight of d2l's toy
// model, whose results stay bit for bit): there a call's fixed costs, not the
// copy of the weight, dominate.
constexpr std::int64_t kMinWeight = std::int64_t(1) << 14;
// Products of fewer multiply-adds keep matmul's plain loops.
constexpr std::int64_t kMinWork = std::int64_t(1) << 15;
// A weight is first packed by a product of at least this many rows; products
// of fewer rows use a copy made before, else the unpacked path. A copy pays
// for itself over many rows, and a single sentence (one row a step) would
// spend more on packing every weight and building primitives than on its
// products (measured with the tatoeba model: 18 ms unpacked, 100 ms packed),
// while a batch's last steps, after most sentences left, reuse the copies.
constexpr std::int64_t kMinRows = 16;
// Open PackAllRows guards on this thread (attn/ops/precision.h).
thread_local int t_pack_all_rows = 0;
// Open BatchInvariant guards on this thread (attn/ops/precision.h): every
// frozen weight's product goes to attn's kernel whatever its size, or to
// the kernel's plain reference (the same bits) where the CPU lacks it.
thread_local int t_batch_invariant = 0;
// Runs of fewer multiply-adds run on the calling thread (as matmul's do);
// larger ones on the team whatever the load, as oneDNN's bits depend on the
// team (ops/row_blocks.h).
constexpr std::int64_t kSerialWork = detail::kSerialGemmWork;
constexpr std::int64_t kMaxRun = 4096;

// The rows of the next run, `left` rows still to do.
std::int64_t run_rows(std::int64_t left) {
  if (left >= kMaxRun) return kMaxRun;
  if (left >= 1024) return left / 128 * 128;
  if (left >= 16) return left / 16 * 16;
  return left;
}

auto weight_key(const Tensor& w, bool bf16) {
  return std::make_tuple(static_cast<const void*>(w.storage().get()), w.data<float>(), w.size(0),
                         w.size(1), w.stride(0), w.stride(1), bf16);
}

// Whether W has a packed copy already.
bool has_copy(PackedStore& store, const Tensor& w, bool bf16) {
  std::lock_guard<std::mutex> lock(store.mu);
  auto it = store.weights.find(weight_key(w, bf16));
  return it != store.weights.end() &&
         (!it->second.layouts.empty() || it->second.tiles || it->second.screen);
}

// W packed in `layout` (made now if it is the first use); null when oneDNN
// refuses.
const dnnl::memory* packed_weight(PackedStore& store, const Tensor& w, bool bf16,
                                  const dnnl::memory::desc& layout) {
  const std::int64_t N = w.size(0), K = w.size(1);
  std::lock_guard<std::mutex> lock(store.mu);
  PackedStore::Weight& e = store.weights[weight_key(w, bf16)];
  for (auto& p : e.layouts)
    if (p.layout == layout) return &p.memory;
  PackedStore::Packed p{layout, std::make_unique<Storage>(layout.get_size()), {}};
  // Element (k, n) of W^T is W[n, k], in W's layout; in bf16, the scope's
  // kept bf16 copy of W (bf16_span), laid out as W.
  const dnnl::memory::dims strides{w.stride(1), w.stride(0)};
  if (bf16) {
    std::vector<std::uint16_t> unused;  // W is frozen: its kept copy is returned
    p.memory = pack_weights(dnnl::memory::data_type::bf16, bf16_span(w, storage_span(w), unused), K,
                            N, strides, layout, p.buffer->data());
  } else {
    p.memory = pack_weights(dnnl::memory::data_type::f32, w.data<float>(), K, N, strides, layout,
                            p.buffer->data());
  }
  if (!p.memory) return nullptr;
  e.layouts.push_back(std::move(p));
  return &e.layouts.back().memory;
}

// W in attn's kernel's layout, f32_gemm's or in bf16 bf16_gemm's (made now
// if it is the first use).
const void* kernel_layout(PackedStore& store, const Tensor& w, bool bf16) {
  const std::int64_t N = w.size(0), K = w.size(1);
  std::lock_guard<std::mutex> lock(store.mu);
  PackedStore::Weight& e = store.weights[weight_key(w, bf16)];
  if (!e.tiles) {
    std::unique_ptr<Storage> tiles;
    if (bf16) {
      tiles = std::make_unique<Storage>(static_cast<std::size_t>(bf16_gemm_packed_size(N, K)) *
                                        sizeof(std::uint16_t));
      std::vector<std::uint16_t> unused;  // W is frozen: its kept copy is returned
      pack_bf16_gemm(bf16_span(w, storage_span(w), unused), N, K, w.stride(0), w.stride(1),
                     static_cast<std::uint16_t*>(tiles->data()));
    } else {
      tiles = std::make_unique<Storage>(static_cast<std::size_t>(f32_gemm_packed_size(N, K)) *
                                        sizeof(float));
      pack_f32_gemm(w.data<float>(), N, K, w.stride(0), w.stride(1),
                    static_cast<float*>(tiles->data()));
    }
    e.tiles = std::move(tiles);
  }
  return e.tiles->data();
}

// y = x @ W^T (+ b) (then the ReLU) through attn's kernel, f32_gemm or (in
// bf16, x rounded first) bf16_gemm, its column groups shared out over
// threads where the product is large enough.
void run_kernel(PackedStore& store, const Tensor& xc, const Tensor& w, const Tensor& bc, bool relu,
                bool bf16, std::int64_t M, Tensor& y) {
  const std::int64_t N = w.size(0), K = w.size(1);
  const void* packed = kernel_layout(store, w, bf16);
  const float* bias = bc.defined() ? bc.data<float>() : nullptr;
  const std::int64_t groups = (N + 31) / 32;
  const int threads = loop_threads(M * N * K >= kSerialWork * grain_scale() && groups > 1);
  // The kernel's rows x (ldx apart) against the packed weights, the column
  // groups shared out over the threads.
  auto run = [&]<class Args, class Elem>(const Elem* x, std::int64_t ldx,
                                         void (*gemm)(const Args&, std::int64_t, std::int64_t)) {
    const Args a{.x = x,
                 .ldx = ldx,
                 .packed = static_cast<const Elem*>(packed),
                 .bias = bias,
                 .relu = relu,
                 .M = M,
                 .K = K,
                 .N = N,
                 .y = y.data<float>()};
    parallel_ranges(groups, threads, [&](std::int64_t g0, std::int64_t g1) { gemm(a, g0, g1); });
  };
  if (!bf16) return run(xc.data<float>(), K, &f32_gemm);
  // x in bf16, rows of an even length (a zero after an odd K's values).
  thread_local std::vector<std::uint16_t> xs;
  const std::int64_t ldx = K + (K & 1);
  if (xs.size() < static_cast<std::size_t>(M * ldx)) xs.resize(static_cast<std::size_t>(M * ldx));
  const float* px = xc.data<float>();
  if (ldx == K) {
    to_bf16(px, xs.data(), M * K);
  } else {
    for (std::int64_t m = 0; m < M; ++m) {
      to_bf16(px + m * K, xs.data() + m * ldx, K);
      xs[static_cast<std::size_t>(m * ldx + K)] = 0;
    }
  }
  run(static_cast<const std::uint16_t*>(xs.data()), ldx, &bf16_gemm);
}

// The path packed_linear takes for a product: none (linear() computes it
// unpacked), attn's kernel, oneDNN's primitive on a packed copy, or (f32
// inside a BatchInvariant scope, where the CPU runs no kernel) the kernel's
// plain reference on the weight itself.
enum class PackedPath { none, kernel, primitive, reference };

PackedPath packed_path(PackedStore* store, const Tensor& x, const Tensor& weight,
                       const Tensor& bias) {
  if (store == nullptr || !frozen_parameter(weight)) return PackedPath::none;
  if (x.dtype() != DType::f32 || weight.dtype() != DType::f32 ||
      (bias.defined() && bias.dtype() != DType::f32))
    return PackedPath::none;
  if (autograd::grad_enabled() &&
      (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad())))
    return PackedPath::none;
  const std::int64_t N = weight.size(0), K = weight.size(1);
  // Inside a BatchInvariant scope no size keeps a product off the kernel:
  // the unpacked path's kernels (plain loops below 2^15 multiply-adds,
  // oneDNN's sgemm above) choose by the number of rows, and oneDNN's AVX2
  // sgemm gives a row other bits in another number of rows.
  const bool invariant = t_batch_invariant > 0;
  if (K == 0 || (!invariant && N * K < kMinWeight) || weight.stride(0) <= 0 ||
      weight.stride(1) <= 0)
    return PackedPath::none;
  const std::int64_t M = x.numel() / K;
  if (!invariant && M * N * K < kMinWork) return PackedPath::none;
  const bool bf16 = matmul_precision() == Precision::bf16;
  if (M < kMinRows && t_pack_all_rows == 0 && !has_copy(*store, weight, bf16))
    return PackedPath::none;
  if (bf16 ? bf16_supported() && bf16_gemm_supported() : f32_gemm_supported())
    return PackedPath::kernel;
  return invariant && !bf16 ? PackedPath::reference : PackedPath::primitive;
}

}  // namespace

std::optional<Tensor> packed_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    bool relu) {
  PackedStore* store = frozen_packed_store();
  const PackedPath path = packed_path(store, x, weight, bias);
  if (path == PackedPath::none) return std::nullopt;
  const std::int64_t N = weight.size(0), K = weight.size(1);
  const std::int64_t M = x.numel() / K;
  const bool bf16 = matmul_precision() == Precision::bf16;

  const Tensor xc = x.detach().contiguous();
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(N);
  Tensor y = Tensor::empty(out_shape, DType::f32);
  if (path == PackedPath::kernel) {
    run_kernel(*store, xc, weight, bc, relu, bf16, M, y);
    return y;
  }
  if (path == PackedPath::reference) {
    const Tensor wc = weight.detach().contiguous();
    const F32GemmArgs a{.x = xc.data<float>(),
                        .ldx = K,
                        .packed = nullptr,
                        .bias = bc.defined() ? bc.data<float>() : nullptr,
                        .relu = relu,
                        .M = M,
                        .K = K,
                        .N = N,
                        .y = y.data<float>()};
    f32_gemm_reference(a, wc.data<float>());
    return y;
  }

  const void* a = xc.data<float>();
  std::size_t a_bytes = sizeof(float);
  thread_local std::vector<std::uint16_t> scratch;
  if (bf16) {
    if (scratch.size() < static_cast<std::size_t>(M * K))
      scratch.resize(static_cast<std::size_t>(M * K));
    to_bf16(xc.data<float>(), scratch.data(), M * K);
    a = scratch.data();
    a_bytes = sizeof(std::uint16_t);
  }
  const auto type = bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
  for (std::int64_t row = 0; row < M;) {
    const std::int64_t rows = run_rows(M - row);
    std::optional<ThreadLimit> alone;
    if (omp_get_max_threads() > 1 && !omp_in_parallel() && rows * N * K < kSerialWork)
      alone.emplace(1);
    PackedPrimitive* p =
        packed_primitive(type, type, dnnl::memory::data_type::f32, rows, K, N, bc.defined(), relu);
    if (p == nullptr) return std::nullopt;
    const dnnl::memory* b = packed_weight(*store, weight, bf16, p->weights);
    if (b == nullptr) return std::nullopt;
    const auto* a_rows = static_cast<const char*>(a) + static_cast<std::size_t>(row * K) * a_bytes;
    if (!run_packed_primitive(*p, a_rows, *b, bc.defined() ? bc.data<float>() : nullptr,
                              y.data<float>() + row * N))
      return std::nullopt;
    row += rows;
  }
  return y;
}

std::shared_ptr<ArgmaxScreen> packed_f32_screen(
    const Tensor& x, const Tensor& weight, const Tensor& bias,
    const std::function<std::shared_ptr<ArgmaxScreen>()>& make) {
  PackedStore* store = frozen_packed_store();
  if (quantize_scope_open() || matmul_precision() != Precision::f32 ||
      packed_path(store, x, weight, bias) != PackedPath::kernel)
    return nullptr;
  // Made under the lock, as a packing is: once per weight and scope (the
  // other threads that joined the scope wait that once).
  std::lock_guard<std::mutex> lock(store->mu);
  PackedStore::Weight& e = store->weights[weight_key(weight, false)];
  if (!e.screen) e.screen = make();
  return e.screen;
}

std::shared_ptr<PackedStore> new_packed_store() { return std::make_shared<PackedStore>(); }

std::int64_t packed_copies() {
  PackedStore* store = frozen_packed_store();
  if (store == nullptr) return 0;
  std::lock_guard<std::mutex> lock(store->mu);
  std::int64_t n = 0;
  for (const auto& [key, w] : store->weights)
    n += static_cast<std::int64_t>(w.layouts.size()) + (w.tiles ? 1 : 0) + (w.screen ? 1 : 0);
  return n;
}

}  // namespace attn::detail

namespace attn {

PackAllRows::PackAllRows() { ++detail::t_pack_all_rows; }
PackAllRows::~PackAllRows() { --detail::t_pack_all_rows; }

BatchInvariant::BatchInvariant() { ++detail::t_batch_invariant; }
BatchInvariant::~BatchInvariant() { --detail::t_batch_invariant; }
bool batch_invariant() { return detail::t_batch_invariant > 0; }

}  // namespace attn
