// Scaled dot-product attention: the valid-lengths rule, argument checks, the
// choice of kernel, the fused op with its backward, the materialized
// reference, and the KV-cache decode step.
//
//   forward   S = scale q k^T, masked (d2l: -1e6, i.e. weight 0; a row of
//             length 0 uniform), P = softmax(S), W = dropout(P), out = W v,
//             lse = m + log l per row (m the row max, l the row sum)
//   backward  P = exp(S - lse), dV = W^T dO, dP = (dO v^T) o Z,
//             dS = P o (dP - D) with D = rowsum(dO o out), dQ = scale dS k,
//             dK = scale dS^T q; dS = 0 on masked scores and rows of length 0
//
// The kernels, one header per algorithm, are assembled by attention_table.h
// into a table per instruction set: AVX-512 (attention_avx512.cpp), AVX2
// (attention_avx2.cpp) and portable vectors (attention_portable.cpp: the f32
// fallback and all of f64). The table and the algorithm of a call are chosen
// here, in kernels_for and choose_attention_path, and nowhere else.
#include "attn/ops/attention.h"
#include "attn/core/env.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "attn/autograd/node.h"
#include "attn/ops/dropout.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/index.h"
#include "attn/ops/matmul.h"
#include "attn/ops/positions.h"
#include "attn/ops/precision.h"
#include "attn/ops/softmax.h"
#include "kernels/attention/attention_kernel.h"
#include "ops/attention_kv_rows.h"
#include "ops/positions_internal.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;
using detail::AttnArgs;
using detail::AttnKernelTable;
using detail::AttnMask;
using detail::AttnPath;
using detail::AttnTiles;
using detail::HeadView;

// ---- kernel selection ----

namespace {

constexpr const char* kIsas[] = {"avx512", "avx2", "portable"};  // best first

// The f32 kernels of `isa` when this build has them and this CPU runs them.
const AttnKernelTable<float>* f32_table(std::string_view isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (isa == "avx512" && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return detail::attention_kernels_avx512();
  if (isa == "avx2" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return detail::attention_kernels_avx2();
#endif
  return isa == "portable" ? detail::attention_kernels_portable_f32() : nullptr;
}

const AttnKernelTable<float>* best_f32() {
  for (const char* isa : kIsas)
    if (const auto* t = f32_table(isa)) return t;
  return detail::attention_kernels_portable_f32();
}

// The kernels of `isa`, or the ValueError that names what is wrong with it
// (`what`: the function or variable the name came from).
const AttnKernelTable<float>* f32_table_or_throw(const std::string& isa, std::string_view what) {
  if (const auto* t = f32_table(isa)) return t;
  const bool known = std::find(std::begin(kIsas), std::end(kIsas), isa) != std::end(kIsas);
  if (known)
    throw ValueError(fmt::format("{}: this CPU cannot run the {} kernels (it runs: {})", what, isa,
                                 fmt::join(attention_isas(), ", ")));
  const bool env = what == "ATTN_ISA";
  throw ValueError(
      fmt::format("{}: unknown instruction set '{}' (expected avx512, avx2, portable{})", what, isa,
                  env ? "; unset: the best" : ", or \"\" for the best"));
}

// The default kernels: ATTN_ISA's when it is set, else the best this CPU has.
// A bad ATTN_ISA leaves `error` set and no table.
struct DefaultKernels {
  const AttnKernelTable<float>* f32 = nullptr;
  std::string error;
};

DefaultKernels default_f32() {
  DefaultKernels d;
  try {
    const std::optional<std::string> cap = isa_cap();
    d.f32 = cap ? f32_table_or_throw(*cap, "ATTN_ISA") : best_f32();
  } catch (const ValueError& e) {
    d.error = e.what();
  }
  return d;
}

// The setting of AttentionKernelConfig, read by every call. f32 is null
// while a bad ATTN_ISA is in force (env_error says why).
struct KernelSetting {
  KernelSetting() : env(default_f32()), f32(env.f32) {}
  const DefaultKernels env;
  std::atomic<const AttnKernelTable<float>*> f32;
  std::atomic<std::int64_t> tile_br{0}, tile_bc{0};
  std::atomic<bool> small_path{true};

  const AttnKernelTable<float>* f32_or_throw() const {
    const AttnKernelTable<float>* t = f32.load();
    if (!t) throw ValueError(env.error);
    return t;
  }
};

KernelSetting& setting() {
  static KernelSetting s;
  return s;
}

// The kernels of one call: the table of its dtype, the tiles, the algorithm.
template <class T>
struct Launch {
  const AttnKernelTable<T>* kernels = nullptr;
  AttnTiles tiles;
  AttnPath path = AttnPath::tiled;
  // The tiled kernels: the table's, or in bf16 (attention_forward_bf16,
  // _backward_bf16) for f32 inputs in a bf16 PrecisionScope on the AVX-512
  // kernels (and so a CPU with AVX-512 BF16).
  void (*tiled_forward)(const AttnArgs<T>&, AttnTiles) = nullptr;
  void (*tiled_backward)(const AttnArgs<T>&, AttnTiles) = nullptr;
};

// The one place a dtype (and for f32 the instruction set) picks a kernel
// table; a later device would be chosen here too.
template <class T>
Launch<T> kernels_for(std::int64_t Q, std::int64_t K, std::int64_t D, std::int64_t Dv,
                      bool need_grad, bool dropout, bool positions = false) {
  const KernelSetting& s = setting();
  Launch<T> l;
  if constexpr (std::is_same_v<T, float>)
    l.kernels = s.f32_or_throw();
  else
    l.kernels = detail::attention_kernels_portable_f64();
  l.tiles = l.kernels->tiles;
  if (std::int64_t br = s.tile_br.load()) l.tiles.br = l.tiles.fwd_br = br;
  if (std::int64_t bc = s.tile_bc.load()) l.tiles.bc = l.tiles.fwd_bc = bc;
  // The small and bf16 kernels have no position bias or rotary.
  l.path = detail::choose_attention_path(Q, K, D, Dv, need_grad, dropout,
                                         s.small_path.load() && !positions);
  l.tiled_forward = l.kernels->forward;
  l.tiled_backward = l.kernels->backward;
  if constexpr (std::is_same_v<T, float>) {
    if (l.path == AttnPath::tiled && !positions && matmul_precision() == Precision::bf16 &&
        std::string_view(l.kernels->name) == "avx512" && detail::attention_forward_bf16()) {
      l.tiled_forward = detail::attention_forward_bf16();
      l.tiled_backward = detail::attention_backward_bf16();
    }
  }
  return l;
}

}  // namespace

std::vector<std::string> attention_isas() {
  std::vector<std::string> out;
  for (const char* isa : kIsas)
    if (f32_table(isa)) out.emplace_back(isa);
  return out;
}

void set_attention_kernel_config(const AttentionKernelConfig& config) {
  const char* op = "set_attention_kernel_config";
  KernelSetting& s = setting();
  const AttnKernelTable<float>* t = nullptr;
  if (!config.isa.empty())
    t = f32_table_or_throw(config.isa, op);
  else if (!(t = s.env.f32))
    throw ValueError(s.env.error);
  ATTN_CHECK(config.tile_queries >= 0 && config.tile_keys >= 0, ValueError,
             "{}: tile sizes must be >= 0 (0: the default), got {} x {}", op, config.tile_queries,
             config.tile_keys);
  s.f32.store(t);
  s.tile_br.store(config.tile_queries);
  s.tile_bc.store(config.tile_keys);
  s.small_path.store(config.small_path);
}

AttentionKernelConfig attention_kernel_config() {
  const KernelSetting& s = setting();
  AttentionKernelConfig c;
  c.isa = s.f32_or_throw()->name;
  c.small_path = s.small_path.load();
  c.tile_queries = s.tile_br.load();
  c.tile_keys = s.tile_bc.load();
  return c;
}

// ---- the valid-lengths rule ----

namespace {

// valid_lens as a contiguous i64 tensor of the same shape: fractional
// lengths ceiled, every value checked to be finite and in [0, K].
Tensor lengths_i64(const Tensor& lens, std::int64_t K, const char* op) {
  Tensor out;
  if (is_floating(lens.dtype())) {
    Tensor f = Tensor::empty(lens.shape(), DType::f64);
    copy_(f, lens);
    out = Tensor::empty(lens.shape(), DType::i64);
    const double* p = f.data<double>();
    std::int64_t* pi = out.data<std::int64_t>();
    for (std::int64_t i = 0; i < f.numel(); ++i) {
      ATTN_CHECK(std::isfinite(p[i]), ValueError, "{}: valid length {} is not finite", op, p[i]);
      ATTN_CHECK(p[i] > -1.0 && p[i] <= static_cast<double>(K), ValueError,
                 "{}: valid length {} is outside [0, {}] (the number of keys)", op, p[i], K);
      pi[i] = static_cast<std::int64_t>(std::ceil(p[i]));
    }
  } else {
    out = lens.detach().to(DType::i64).contiguous();
  }
  const std::int64_t* p = out.data<std::int64_t>();
  for (std::int64_t i = 0; i < out.numel(); ++i)
    ATTN_CHECK(p[i] >= 0 && p[i] <= K, ValueError,
               "{}: valid length {} is outside [0, {}] (the number of keys)", op, p[i], K);
  return out;
}

}  // namespace

Tensor attention_limits(const Tensor& valid_lens, bool causal, std::int64_t B, std::int64_t Q,
                        std::int64_t K, const char* op) {
  ATTN_CHECK(B >= 0 && Q >= 0 && K >= 0, ValueError,
             "{}: sizes must be >= 0, got B = {}, Q = {}, K = {}", op, B, Q, K);
  Tensor lens;
  std::int64_t sb = 0, sq = 0;  // lens[b * sb + q * sq]
  if (valid_lens.defined()) {
    const Tensor& vl = valid_lens;
    ATTN_CHECK(
        (vl.dim() == 1 && vl.size(0) == B) || (vl.dim() == 2 && vl.size(0) == B && vl.size(1) == Q),
        ShapeError,
        "{}: valid_lens must have shape [{}] or [{}, {}] (per batch row, or per batch row "
        "and query), got {}",
        op, B, B, Q, shape_str(vl.shape()));
    lens = lengths_i64(vl, K, op);
    sb = vl.dim() == 2 ? Q : 1;
    sq = vl.dim() == 2 ? 1 : 0;
  }
  Tensor out = Tensor::empty({B, Q}, DType::i64);
  std::int64_t* pl = out.data<std::int64_t>();
  const std::int64_t* l = lens.defined() ? lens.data<std::int64_t>() : nullptr;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t q = 0; q < Q; ++q) {
      std::int64_t L = l ? l[b * sb + q * sq] : K;
      if (causal) L = std::min(L, std::clamp<std::int64_t>(q + 1 + (K - Q), 0, K));
      pl[b * Q + q] = L;
    }
  return out;
}

// ---- the checked problem ----

namespace {

// Geometry, the operands read in place (last dim with stride 1, no autograd),
// and the limits L of attention_limits, (B, Q).
struct Problem {
  bool four_d = false;
  std::int64_t B = 0, H = 0, Q = 0, K = 0, D = 0, Dv = 0;
  Tensor q, k, v;  // detached
  Tensor limits;
  // i64, contiguous, or undefined: (B), row b of q reads row kv_rows[b] of k
  // and v; (B, K), its key c is key c of row kv_rows[b, c].
  Tensor kv_rows;
  bool causal = false;
  double scale = 1.0;
  std::int64_t kv_group = 1;  // query heads per key and value head
  Tensor bias;  // (H, 2K - 1), detached, contiguous, or undefined
  Tensor qstart;  // (B) i64, contiguous, or undefined
  bool rotary_q = false, rotary_k = false;
  double rotary_base = 10000.0;
  Tensor angles;  // (2, K' >= K, D / 2) in q's dtype where rotary_q or rotary_k
  bool positions() const { return bias.defined() || rotary_q || rotary_k; }
  std::int64_t N() const { return B * H; }
  Shape out_shape() const { return four_d ? Shape{B, Q, H, Dv} : Shape{B, Q, Dv}; }
  AttnMask mask() const {
    AttnMask m;
    m.limits = limits.data<std::int64_t>();
    m.Q = Q;
    m.causal = causal;
    return m;
  }
};

// The last dim read with stride 1, so a row is a plain array.
Tensor rows_unit_stride(const Tensor& t) {
  Tensor d = t.detach();
  return d.size(-1) > 1 && d.stride(-1) != 1 ? d.contiguous() : d;
}

// AttentionOptions::position_bias and query_start into p.bias and p.qstart.
void check_positions(Problem& p, const AttentionOptions& opt, DType dtype, const char* op) {
  if (opt.query_start.defined()) {
    const Tensor& qs = opt.query_start;
    ATTN_CHECK(qs.dim() == 1 && qs.size(0) == p.B && !is_floating(qs.dtype()), ShapeError,
               "{}: query_start must be integers of shape [{}] (one per batch row), got {} {}", op,
               p.B, dtype_name(qs.dtype()), shape_str(qs.shape()));
    p.qstart = qs.detach().to(DType::i64).contiguous();
    const std::int64_t* s = p.qstart.data<std::int64_t>();
    for (std::int64_t b = 0; b < p.B; ++b)
      ATTN_CHECK(s[b] >= 0 && s[b] + p.Q <= p.K, ValueError,
                 "{}: query_start[{}] = {} puts its {} queries outside the {} key positions", op, b,
                 s[b], p.Q, p.K);
  }
  if (opt.rotary_queries || opt.rotary_keys) {
    ATTN_CHECK(p.D % 2 == 0, ShapeError,
               "{}: rotary positions turn pairs of dimensions, but the head dim is {}", op, p.D);
    ATTN_CHECK(opt.rotary_base > 1.0 && std::isfinite(opt.rotary_base), ValueError,
               "{}: rotary_base must be a finite number > 1, got {}", op, opt.rotary_base);
    ATTN_CHECK(p.qstart.defined() || p.Q <= p.K || !opt.rotary_queries, ValueError,
               "{}: rotary queries with {} queries after {} keys need query_start", op, p.Q, p.K);
    p.rotary_q = opt.rotary_queries;
    p.rotary_k = opt.rotary_keys;
    p.rotary_base = opt.rotary_base;
    if (p.K >= 1) p.angles = detail::rotary_angles(p.D, p.rotary_base, p.K, dtype);
  }
  if (!opt.position_bias.defined()) return;
  const Tensor& pb = opt.position_bias;
  ATTN_CHECK(p.K >= 1 && pb.dim() == 2 && pb.size(0) == p.H && pb.size(1) == 2 * p.K - 1,
             ShapeError, "{}: position_bias must have shape [{}, {}] (heads, 2 x keys - 1), got {}",
             op, p.H, 2 * p.K - 1, shape_str(pb.shape()));
  ATTN_CHECK(pb.dtype() == dtype, DTypeError,
             "{}: position_bias must be {} like the queries, got {}", op, dtype_name(dtype),
             dtype_name(pb.dtype()));
  ATTN_CHECK(p.qstart.defined() || p.Q <= p.K, ValueError,
             "{}: a position bias with {} queries after {} keys needs query_start", op, p.Q, p.K);
  // A view with rows apart (alibi_bias_kept's) is read in place.
  p.bias = pb.stride(1) == 1 ? pb.detach() : pb.detach().contiguous();
}

Problem prepare(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opt,
                const char* op) {
  ATTN_CHECK(q.defined() && k.defined() && v.defined(), ValueError,
             "{}: queries, keys and values must be defined tensors", op);
  const bool three = q.dim() == 3 && k.dim() == 3 && v.dim() == 3;
  const bool four = q.dim() == 4 && k.dim() == 4 && v.dim() == 4;
  ATTN_CHECK(three || four, ShapeError,
             "{}: expected queries, keys and values all 3-D (N, T, D) or all 4-D (B, T, H, D), "
             "got {}, {}, {}",
             op, shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  ATTN_CHECK(q.dtype() == k.dtype() && k.dtype() == v.dtype(), DTypeError,
             "{}: queries, keys and values must have one dtype, got {}, {}, {}", op,
             dtype_name(q.dtype()), dtype_name(k.dtype()), dtype_name(v.dtype()));
  ATTN_CHECK(is_floating(q.dtype()), DTypeError, "{}: expected f32 or f64, got {}", op,
             dtype_name(q.dtype()));
  Problem p;
  p.four_d = four;
  const std::int64_t t_dim = 1, d_dim = four ? 3 : 2;
  p.B = q.size(0);
  p.H = four ? q.size(2) : 1;
  p.Q = q.size(t_dim);
  p.K = k.size(t_dim);
  p.D = q.size(d_dim);
  p.Dv = v.size(d_dim);
  const bool heads_match =
      !four || (k.size(2) == v.size(2) && k.size(2) >= 1 && p.H % k.size(2) == 0);
  const bool rows = opt.kv_rows.defined();
  ATTN_CHECK((rows || k.size(0) == p.B) && v.size(0) == k.size(0) && heads_match, ShapeError,
             "{}: batch{} sizes differ: queries {}, keys {}, values {}{}", op,
             four ? " or head" : "", shape_str(q.shape()), shape_str(k.shape()),
             shape_str(v.shape()),
             four ? " (keys and values need one number of heads, a divisor of the queries')" : "");
  p.kv_group = four ? p.H / k.size(2) : 1;
  ATTN_CHECK(v.size(t_dim) == p.K, ShapeError,
             "{}: keys {} and values {} must have the same number of steps", op,
             shape_str(k.shape()), shape_str(v.shape()));
  if (rows) p.kv_rows = detail::checked_kv_rows(opt.kv_rows, four, p.B, p.K, k.size(0), op);
  ATTN_CHECK(k.size(d_dim) == p.D, ShapeError,
             "{}: queries {} and keys {} must have the same feature size", op, shape_str(q.shape()),
             shape_str(k.shape()));
  ATTN_CHECK(p.D >= 1, ShapeError, "{}: the feature size of queries and keys must be >= 1, got {}",
             op, shape_str(q.shape()));
  ATTN_CHECK(opt.dropout >= 0.0 && opt.dropout <= 1.0, ValueError,
             "{}: dropout must be in [0, 1], got {}", op, opt.dropout);
  ATTN_CHECK(std::isfinite(opt.scale), ValueError, "{}: scale must be finite, got {}", op,
             opt.scale);
  p.scale = opt.scale != 0.0 ? opt.scale : 1.0 / std::sqrt(static_cast<double>(p.D));
  p.causal = opt.causal;
  p.limits = attention_limits(opt.valid_lens, opt.causal, p.B, p.Q, p.K, op);
  check_positions(p, opt, q.dtype(), op);
  p.q = rows_unit_stride(q);
  p.k = rows_unit_stride(k);
  p.v = rows_unit_stride(v);
  return p;
}

template <class T>
HeadView<T> head_view(const Tensor& t, bool four_d) {
  HeadView<T> h;
  h.ptr = t.data<std::remove_const_t<T>>();
  h.sb = t.stride(0);
  h.st = t.stride(1);
  h.sh = four_d ? t.stride(2) : 0;
  return h;
}

template <class T>
AttnArgs<T> make_args(const Problem& p) {
  AttnArgs<T> a;
  a.B = p.B;
  a.H = p.H;
  a.Q = p.Q;
  a.K = p.K;
  a.D = p.D;
  a.Dv = p.Dv;
  a.q = head_view<const T>(p.q, p.four_d);
  a.k = head_view<const T>(p.k, p.four_d);
  a.v = head_view<const T>(p.v, p.four_d);
  a.mask = p.mask();
  if (p.kv_rows.defined()) {
    const std::int64_t* rows = p.kv_rows.data<std::int64_t>();
    (p.kv_rows.dim() == 1 ? a.kv_rows : a.kv_key_rows) = rows;
  }
  a.scale = p.scale;
  a.kv_group = p.kv_group;
  if (p.bias.defined()) {
    a.bias = p.bias.data<T>();
    a.bias_stride = p.bias.stride(0);
  }
  if (p.qstart.defined()) a.qstart = p.qstart.data<std::int64_t>();
  if (p.angles.defined()) {
    a.rot_cos = p.angles.data<T>();
    a.rot_sin = a.rot_cos + p.angles.size(1) * (p.D / 2);
    a.rotary_q = p.rotary_q;
    a.rotary_k = p.rotary_k;
  }
  return a;
}

// Keys turned by rotary at their indices, outside the kernels (the decode
// kernel turns only queries), in k's layout.
Tensor turned_keys(const Tensor& k, const Problem& p) {
  if (p.four_d) return rotary_heads(k, Tensor(), p.rotary_base);
  return rotary_heads(k.unsqueeze(2), Tensor(), p.rotary_base).squeeze(2);
}

struct DropoutDraw {
  detail::AttnDropout params;
  bool all = false;  // p == 1: every weight dropped
};

// Reserves the numbers of the (N, Q, K) weights exactly as ops dropout would.
DropoutDraw draw_dropout(const Problem& p, const AttentionOptions& opt) {
  DropoutDraw d;
  if (!opt.training || opt.dropout == 0.0) return d;
  if (opt.dropout == 1.0) {
    d.all = true;
    return d;
  }
  Generator& gen = opt.generator ? *opt.generator : default_generator();
  d.params.on = true;
  d.params.seed = gen.seed();
  d.params.offset = gen.reserve(static_cast<std::uint64_t>(p.N() * p.Q * p.K));
  d.params.threshold = static_cast<std::uint32_t>(std::ceil(opt.dropout * 16777216.0));
  d.params.scale = 1.0 / (1.0 - opt.dropout);
  return d;
}

// ---- the kernels run ----

template <class T>
Tensor run_decode(const Problem& given, const AttnKernelTable<T>& kernels) {
  Problem p = given;
  if (p.rotary_k && p.K > 0) {  // the decode kernel turns queries only
    p.k = rows_unit_stride(turned_keys(p.k, p));
    p.rotary_k = false;
  }
  Tensor out =
      p.K == 0 ? zeros(p.out_shape(), p.q.dtype()) : Tensor::empty(p.out_shape(), p.q.dtype());
  if (p.Q == 0 || p.K == 0 || p.Dv == 0) return out;
  AttnArgs<T> a = make_args<T>(p);
  a.o = head_view<T>(out, p.four_d);
  a.split_keys = !batch_invariant();
  kernels.decode(a);
  return out;
}

// The backward of run_fused with the kernels its forward ran (the small
// path's saved buffers are laid out for that table's vector width).
// With a position bias, its gradient comes fourth when `bias_grad`.
template <class T>
Grads fused_backward(const Problem& p, const detail::AttnDropout& drop, const Tensor& out,
                     const Tensor& lse, const Tensor& saved, const Launch<T>& l, const Tensor& g,
                     bool bias_grad) {
  const DType dt = p.q.dtype();
  Tensor dbias = p.bias.defined() ? zeros(p.bias.shape(), dt) : Tensor();
  if (p.Q == 0 || p.K == 0) {
    Grads z{zeros(p.q.shape(), dt), zeros(p.k.shape(), dt), zeros(p.v.shape(), dt)};
    if (dbias.defined()) z.push_back(dbias);
    return z;
  }
  Tensor dq = Tensor::empty(p.q.shape(), dt), dk = Tensor::empty(p.k.shape(), dt),
         dv = Tensor::empty(p.v.shape(), dt);
  Tensor gc = rows_unit_stride(g);
  AttnArgs<T> a = make_args<T>(p);
  a.o = head_view<T>(out, p.four_d);
  a.lse = lse.data<T>();
  a.drop = drop;
  a.dout = head_view<const T>(gc, p.four_d);
  a.dq = head_view<T>(dq, p.four_d);
  a.dk = head_view<T>(dk, p.four_d);
  a.dv = head_view<T>(dv, p.four_d);
  a.saved = saved.defined() ? saved.data<T>() : nullptr;
  if (bias_grad) a.dbias = dbias.data<T>();
  if (l.path == AttnPath::small)
    l.kernels->backward_small(a);
  else
    l.tiled_backward(a, l.tiles);
  if (dbias.defined()) return {dq, dk, dv, dbias};
  return {dq, dk, dv};
}

// The small or tiled forward, recorded for autograd when need_grad.
template <class T>
Tensor run_fused(const Problem& p, const DropoutDraw& drop, const Launch<T>& l, bool need_grad,
                 const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                 const char* op) {
  const DType dt = p.q.dtype();
  Tensor out = p.K == 0 ? zeros(p.out_shape(), dt) : Tensor::empty(p.out_shape(), dt);
  Tensor lse = need_grad ? Tensor::empty({p.N(), p.Q}, dt) : Tensor();
  Tensor saved;
  if (p.Q > 0 && p.K > 0) {
    AttnArgs<T> a = make_args<T>(p);
    a.o = head_view<T>(out, p.four_d);
    a.lse = need_grad ? lse.data<T>() : nullptr;
    a.drop = drop.params;
    if (l.path == AttnPath::small) {
      if (need_grad) {
        saved = Tensor::empty({detail::attention_saved_size(p.N(), p.Q, p.K, p.D, p.Dv,
                                                            l.kernels->width, drop.params.on)},
                              dt);
        a.saved = saved.data<T>();
      }
      l.kernels->forward_small(a);
    } else {
      l.tiled_forward(a, l.tiles);
    }
  }
  if (!need_grad) return out;
  Tensor od = out.detach();
  detail::AttnDropout dp = drop.params;
  std::vector<Tensor> inputs{q, k, v};
  if (bias.defined()) inputs.push_back(bias);
  return record(
      out, op, std::move(inputs), [p, dp, od, lse, saved, l](const Tensor& g, const Needs& needs) {
        return fused_backward<T>(p, dp, od, lse, saved, l, g, needs.size() > 3 && needs[3]);
      });
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& opt) {
  const char* op = "scaled_dot_product_attention";
  Problem p = prepare(q, k, v, opt, op);
  const DropoutDraw drop = draw_dropout(p, opt);
  if (drop.all) {
    Shape qs = q.shape(), ks = k.shape(), vs = v.shape();
    return record(zeros(p.out_shape(), q.dtype()), op, {q, k, v},
                  [qs, ks, vs](const Tensor& g, const Needs&) {
                    return Grads{zeros(qs, g.dtype()), zeros(ks, g.dtype()), zeros(vs, g.dtype())};
                  });
  }
  const Tensor& bias = opt.position_bias;
  const bool need_grad = bias.defined() ? autograd::any_requires_grad({q, k, v, bias})
                                        : autograd::any_requires_grad({q, k, v});
  return dispatch_float(q.dtype(), op, [&]<class T>() {
    const Launch<T> l =
        kernels_for<T>(p.Q, p.K, p.D, p.Dv, need_grad, drop.params.on, p.positions());
    if (l.path == AttnPath::decode) return run_decode<T>(p, *l.kernels);
    if (p.kv_rows.defined() || p.kv_group > 1) {
      // Only the decode kernel reads rows and grouped heads in place: the
      // others get them gathered and repeated per query head (dropout
      // already drawn: it stays as drawn).
      Tensor kg = k, vg = v;
      Problem g = p;
      if (p.kv_rows.defined()) {
        kg = detail::gather_kv(kg, p.kv_rows);
        vg = detail::gather_kv(vg, p.kv_rows);
        g.kv_rows = Tensor();
      }
      if (p.kv_group > 1) {
        kg = repeat_interleave(kg, p.kv_group, 2);
        vg = repeat_interleave(vg, p.kv_group, 2);
        g.kv_group = 1;
      }
      g.k = rows_unit_stride(kg);
      g.v = rows_unit_stride(vg);
      return run_fused<T>(g, drop, l, need_grad, q, kg, vg, bias, op);
    }
    return run_fused<T>(p, drop, l, need_grad, q, k, v, bias, op);
  });
}

namespace {

// The position bias of every score, (N, Q, K) in d2l's row order, gathered
// from `bias` (H, 2K - 1) (differentiable: index_select's gradient adds by
// offset).
Tensor bias_scores(const Tensor& bias, const Problem& p) {
  const std::int64_t rows = p.qstart.defined() ? p.B : 1;
  Tensor index = Tensor::empty({rows * p.Q * p.K}, DType::i64);
  std::int64_t* ix = index.data<std::int64_t>();
  for (std::int64_t b = 0; b < rows; ++b) {
    const std::int64_t s = p.qstart.defined() ? p.qstart.data<std::int64_t>()[b] : p.K - p.Q;
    for (std::int64_t q = 0; q < p.Q; ++q)
      for (std::int64_t k = 0; k < p.K; ++k) *ix++ = s + q - k + p.K - 1;
  }
  // (H, rows * Q * K) -> (rows, H, Q, K), broadcast over the batch when rows is 1.
  Tensor g = index_select(bias, 1, index).reshape({p.H, rows, p.Q, p.K}).permute({1, 0, 2, 3});
  if (rows == 1) g = g.expand({p.B, p.H, p.Q, p.K});
  return g.reshape({p.N(), p.Q, p.K});
}

MaterializedAttention materialized(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const AttentionOptions& opt, const char* op) {
  Problem p = prepare(q, k, v, opt, op);
  if (p.kv_rows.defined()) {
    AttentionOptions o = opt;
    o.kv_rows = Tensor();
    return materialized(q, detail::gather_kv(k, p.kv_rows), detail::gather_kv(v, p.kv_rows), o, op);
  }
  if (p.kv_group > 1)
    return materialized(q, repeat_interleave(k, p.kv_group, 2), repeat_interleave(v, p.kv_group, 2),
                        opt, op);
  if (p.rotary_q || p.rotary_k) {
    // Turned by the differentiable op, then attended as they are.
    AttentionOptions o = opt;
    o.rotary_queries = o.rotary_keys = false;
    Tensor qt = q, kt = k;
    if (p.rotary_q) {
      Tensor starts =
          p.qstart.defined() ? p.qstart : full({p.B}, static_cast<double>(p.K - p.Q), DType::i64);
      qt = p.four_d ? rotary_heads(q, starts, p.rotary_base)
                    : rotary_heads(q.unsqueeze(2), starts, p.rotary_base).squeeze(2);
    }
    if (p.rotary_k) kt = turned_keys(k, p);
    return materialized(qt, kt, v, o, op);
  }
  const std::int64_t N = p.N();
  // (B, T, H, d) -> (B * H, T, d), d2l's transpose_qkv.
  auto to3 = [&](const Tensor& t) {
    return p.four_d ? t.permute({0, 2, 1, 3}).reshape({N, t.size(1), t.size(3)}) : t;
  };
  Tensor q3 = to3(q), k3 = to3(k), v3 = to3(v);
  Tensor scores = bmm(q3, k3.transpose(1, 2));
  // d2l divides by math.sqrt(d); a scale given multiplies.
  scores =
      opt.scale != 0.0 ? mul(scores, opt.scale) : div(scores, std::sqrt(static_cast<double>(p.D)));
  if (p.bias.defined()) scores = add(scores, bias_scores(opt.position_bias, p));
  Tensor weights;
  if (!opt.valid_lens.defined() && !opt.causal) {
    weights = softmax(scores);
  } else {
    // One limit per (head, query) row: d2l's valid_lens repeated over the heads.
    Tensor rows =
        p.H == 1 ? p.limits : p.limits.unsqueeze(1).expand({p.B, p.H, p.Q}).reshape({N, p.Q});
    weights = masked_softmax_lengths(scores, rows);
  }
  Generator& gen = opt.generator ? *opt.generator : default_generator();
  Tensor out = bmm(dropout(weights, opt.dropout, opt.training, gen), v3);
  if (p.four_d) out = out.reshape({p.B, p.H, p.Q, p.Dv}).permute({0, 2, 1, 3}).contiguous();
  return {out, weights};
}

}  // namespace

MaterializedAttention scaled_dot_product_attention_materialized(const Tensor& q, const Tensor& k,
                                                                const Tensor& v,
                                                                const AttentionOptions& opt) {
  return materialized(q, k, v, opt, "scaled_dot_product_attention_materialized");
}

Tensor scaled_dot_product_attention_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const AttentionOptions& opt) {
  return materialized(q, k, v, opt, "scaled_dot_product_attention_reference").output;
}

Tensor attention_decode(const Tensor& q, const Tensor& k, const Tensor& v,
                        const AttentionOptions& opt) {
  const char* op = "attention_decode";
  Problem p = prepare(q, k, v, opt, op);
  ATTN_CHECK(!(opt.training && opt.dropout > 0.0), ValueError,
             "{}: inference only, but dropout is {} with training on (set training = false)", op,
             opt.dropout);
  return dispatch_float(q.dtype(), op, [&]<class T>() {
    return run_decode<T>(p, *kernels_for<T>(p.Q, p.K, p.D, p.Dv, false, false).kernels);
  });
}

}  // namespace attn
