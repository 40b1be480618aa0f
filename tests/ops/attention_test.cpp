#include "attn/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "ops/attention_testing.h"
#include "testing.h"

using namespace attn;
using attn::testing::for_each_isa;
using attn::testing::KernelGuard;
using attn::testing::leaf64;
using attn::testing::rel_diff;

namespace {

using Fn = autograd::Function;
using Inputs = std::vector<Tensor>;

enum class MaskKind { none, lens, lens_per_query, causal, causal_lens };

const char* mask_name(MaskKind m) {
  switch (m) {
    case MaskKind::none: return "none";
    case MaskKind::lens: return "lens";
    case MaskKind::lens_per_query: return "lens_per_query";
    case MaskKind::causal: return "causal";
    case MaskKind::causal_lens: return "causal_lens";
  }
  return "?";
}

// Valid lengths for B batch rows (and Q queries) in [0, K], some of them 0.
Tensor random_lens(MaskKind kind, std::int64_t B, std::int64_t Q, std::int64_t K,
                   std::uint64_t seed, bool with_zero, DType dtype = DType::i64) {
  if (kind == MaskKind::none || kind == MaskKind::causal) return Tensor();
  const bool per_query = kind == MaskKind::lens_per_query;
  Shape shape = per_query ? Shape{B, Q} : Shape{B};
  Generator gen(seed);
  Tensor l = randint(0, K + 1, shape, gen, DType::i64);
  if (with_zero) {
    std::int64_t* p = l.data<std::int64_t>();
    p[0] = 0;
    if (l.numel() > 2) p[l.numel() - 1] = K;
  }
  return l.to(dtype);
}

AttentionOptions options(MaskKind kind, const Tensor& lens, double p, Generator* gen) {
  AttentionOptions o;
  o.valid_lens = lens;
  o.causal = kind == MaskKind::causal || kind == MaskKind::causal_lens;
  o.dropout = p;
  o.generator = gen;
  return o;
}

struct Case {
  bool four_d;
  std::int64_t B, H, Q, K, D, Dv;
  MaskKind mask;
  double p;
  bool zero_rows = true;
};

std::string describe(const Case& c) {
  return fmt::format("{} B={} H={} Q={} K={} D={} Dv={} mask={} p={}", c.four_d ? "4-D" : "3-D",
                     c.B, c.H, c.Q, c.K, c.D, c.Dv, mask_name(c.mask), c.p);
}

Shape shape_of(const Case& c, std::int64_t T, std::int64_t d) {
  return c.four_d ? Shape{c.B, T, c.H, d} : Shape{c.B * c.H, T, d};
}

// The fused op and the reference on the same random inputs (and the same
// generator state): outputs and the gradients of q, k, v within `tol`.
void expect_fused_matches_reference(const Case& c, double tol = 1e-5) {
  SCOPED_TRACE(describe(c));
  Generator init(c.Q * 1000 + c.K * 10 + c.D);
  Tensor q = uniform(-2, 2, shape_of(c, c.Q, c.D), init);
  Tensor k = uniform(-2, 2, shape_of(c, c.K, c.D), init);
  Tensor v = uniform(-1, 1, shape_of(c, c.K, c.Dv), init);
  Tensor g = uniform(-1, 1, shape_of(c, c.Q, c.Dv), init);
  const std::int64_t lens_rows = c.four_d ? c.B : c.B * c.H;
  Tensor lens = random_lens(c.mask, lens_rows, c.Q, c.K, c.K + 7, c.zero_rows);

  Tensor qf = q.clone(), kf = k.clone(), vf = v.clone();
  Tensor qr = q.clone(), kr = k.clone(), vr = v.clone();
  for (const Tensor& t : {qf, kf, vf, qr, kr, vr}) t.requires_grad_();
  Generator gf(99), gr(99);
  Tensor of = scaled_dot_product_attention(qf, kf, vf, options(c.mask, lens, c.p, &gf));
  Tensor oref = scaled_dot_product_attention_reference(qr, kr, vr, options(c.mask, lens, c.p, &gr));
  EXPECT_EQ(gf.offset(), gr.offset());
  ASSERT_EQ(of.shape(), oref.shape());
  EXPECT_TRUE(of.is_contiguous());
  EXPECT_FALSE(has_nonfinite(of));
  EXPECT_LT(rel_diff(of, oref), tol) << "forward";
  of.backward(g);
  oref.backward(g);
  EXPECT_LT(rel_diff(qf.grad(), qr.grad()), tol) << "dq";
  EXPECT_LT(rel_diff(kf.grad(), kr.grad()), tol) << "dk";
  EXPECT_LT(rel_diff(vf.grad(), vr.grad()), tol) << "dv";
}

struct TileGuard : KernelGuard {
  TileGuard(std::int64_t br, std::int64_t bc)
      : KernelGuard([=](AttentionKernelConfig& c) {
          c.tile_queries = br;
          c.tile_keys = bc;
        }) {}
};

// Runs `body` twice: small problems on the heads-across-lanes path (the
// default), then every problem tiled.
template <class F>
void for_both_paths(F body) {
  for (bool small : {true, false}) {
    KernelGuard guard([=](AttentionKernelConfig& c) { c.small_path = small; });
    SCOPED_TRACE(small ? "small path allowed" : "tiled only");
    body();
  }
}

struct ThreadGuard {
  explicit ThreadGuard(int n) : saved(get_num_threads()) { set_num_threads(n); }
  ~ThreadGuard() { set_num_threads(saved); }
  int saved;
};

const MaskKind kAllMasks[] = {MaskKind::none, MaskKind::lens, MaskKind::lens_per_query,
                              MaskKind::causal, MaskKind::causal_lens};

}  // namespace

// Odd lengths, Q != K, every mask kind, both layouts, with and without dropout.
TEST(Attention, FusedMatchesReferenceOnOddLengthsAndMasks) {
  const std::pair<std::int64_t, std::int64_t> lengths[] = {{1, 1},  {7, 7},  {33, 33}, {257, 257},
                                                           {7, 33}, {33, 7}, {1, 257}, {257, 33}};
  for_both_paths([&] {
    int i = 0;
    for (auto [Q, K] : lengths)
      for (MaskKind m : kAllMasks) {
        const bool four = ++i % 2 == 0;
        const double p = i % 3 == 0 ? 0.3 : 0.0;
        expect_fused_matches_reference({four, 2, 3, Q, K, 24, 24, m, p});
      }
  });
}

// d2l's Transformer shape (batch 64, 10 steps, 4 heads, head dim 8): the
// heads-across-lanes path with a partial last group of heads, and the tiles.
TEST(Attention, FusedMatchesReferenceOnD2lTransformerShape) {
  for_both_paths([] {
    for (MaskKind m : kAllMasks)
      for (double p : {0.0, 0.1}) {
        expect_fused_matches_reference({true, 64, 4, 10, 10, 8, 8, m, p});
        expect_fused_matches_reference({false, 3, 3, 9, 12, 8, 5, m, p});
      }
  });
}

// Head dims 16 to 256 (odd ones too), Dv != D, every mask kind.
TEST(Attention, FusedMatchesReferenceOnHeadDims) {
  int i = 0;
  for (std::int64_t D : {16, 17, 24, 64, 128, 256})
    for (MaskKind m : kAllMasks) {
      ++i;
      const std::int64_t Dv = i % 3 == 0 ? D + 5 : D;
      expect_fused_matches_reference({i % 2 == 0, 1, 2, 33, 45, D, Dv, m, i % 4 == 0 ? 0.2 : 0.0});
    }
}

// Every instruction set, with the default tiles and with tiles much smaller
// than the lengths (many key tiles per row: the online softmax rescaling,
// masks crossing tile edges, the backward's per-tile skipping).
TEST(Attention, EveryInstructionSetAndTileSize) {
  {
    KernelGuard tiled_only([](AttentionKernelConfig& c) { c.small_path = false; });
    for_each_isa([] {
      for (auto [br, bc] : {std::pair<std::int64_t, std::int64_t>{0, 0}, {1, 5}, {16, 13}}) {
        TileGuard tiles(br, bc);
        SCOPED_TRACE(fmt::format("tiles {} x {}", br, bc));
        int i = 0;
        for (MaskKind m : kAllMasks) {
          ++i;
          expect_fused_matches_reference({i % 2 == 0, 2, 2, 37, 29, 17, 12, m, i % 2 ? 0.25 : 0.0});
          expect_fused_matches_reference({i % 2 == 1, 1, 3, 20, 61, 32, 40, m, 0.0});
        }
      }
    });
  }
  for_each_isa([] {
    int i = 0;
    for (MaskKind m : kAllMasks) {
      ++i;
      expect_fused_matches_reference({i % 2 == 0, 5, 4, 13, 17, 19, 7, m, i % 2 ? 0.25 : 0.0});
    }
  });
}

// Few heads, long keys: the backward splits each head's keys over threads
// (partial dQ summed), the forward its query tiles.
TEST(Attention, FewHeadsSplitOverThreads) {
  ThreadGuard threads(4);
  for (MaskKind m : {MaskKind::none, MaskKind::causal_lens})
    expect_fused_matches_reference({false, 1, 1, 150, 300, 64, 64, m, 0.1});
}

// d2l: a row of length 0 has uniform weights over all keys (output = mean of
// the values), never NaN; its scores get no gradient.
TEST(Attention, RowOfLengthZeroIsUniform) {
  for (DType dt : {DType::f32, DType::f64}) {
    Generator gen(5);
    Tensor q = uniform(-1, 1, {2, 3, 4}, gen, dt), k = uniform(-1, 1, {2, 6, 4}, gen, dt);
    Tensor v = uniform(-1, 1, {2, 6, 5}, gen, dt);
    q.requires_grad_();
    k.requires_grad_();
    AttentionOptions o;
    o.valid_lens = from_vector<std::int64_t>({0, 3});
    Tensor out = scaled_dot_product_attention(q, k, v, o);
    EXPECT_FALSE(has_nonfinite(out));
    Tensor mean_v = mean(v.select(0, 0), {0});  // (5)
    for (std::int64_t i = 0; i < 3; ++i)
      EXPECT_LT(max_abs_diff(out.select(0, 0).select(0, i), mean_v), 1e-6);
    sum(mul(out, out)).backward();
    EXPECT_EQ(max_abs_diff(q.grad().select(0, 0), zeros({3, 4}, dt)), 0.0);
    EXPECT_EQ(max_abs_diff(k.grad().select(0, 0), zeros({6, 4}, dt)), 0.0);
    EXPECT_GT(max_abs_diff(q.grad().select(0, 1), zeros({3, 4}, dt)), 0.0);
  }
}

// Masked keys and values do not matter: changing them changes nothing, and
// they get exactly zero gradient.
TEST(Attention, MaskedKeysHaveNoInfluenceAndNoGradient) {
  Generator gen(6);
  Tensor q = uniform(-2, 2, {1, 5, 2, 8}, gen), k = uniform(-2, 2, {1, 9, 2, 8}, gen);
  Tensor v = uniform(-1, 1, {1, 9, 2, 8}, gen);
  AttentionOptions o;
  o.valid_lens = from_vector<std::int64_t>({4});
  Tensor out = scaled_dot_product_attention(q, k, v, o);
  Tensor k2 = k.clone(), v2 = v.clone();
  fill_(k2.narrow(1, 4, 5), 100.0);
  fill_(v2.narrow(1, 4, 5), -7.0);
  EXPECT_EQ(max_abs_diff(scaled_dot_product_attention(q, k2, v2, o), out), 0.0);
  k.requires_grad_();
  v.requires_grad_();
  sum(scaled_dot_product_attention(q, k, v, o)).backward();
  EXPECT_EQ(max_abs_diff(k.grad().narrow(1, 4, 5), zeros({1, 5, 2, 8})), 0.0);
  EXPECT_EQ(max_abs_diff(v.grad().narrow(1, 4, 5), zeros({1, 5, 2, 8})), 0.0);
  EXPECT_GT(max_abs_diff(v.grad().narrow(1, 0, 4), zeros({1, 4, 2, 8})), 0.0);
}

// Causal: query i sees keys < i + 1 + (K - Q); equal to d2l's dec_valid_lens
// = 1..T when Q == K, and to the reference with explicit (N, Q) lengths.
TEST(Attention, CausalIsDecValidLens) {
  Generator gen(7);
  Tensor q = uniform(-2, 2, {3, 6, 8}, gen), k = uniform(-2, 2, {3, 6, 8}, gen);
  Tensor v = uniform(-1, 1, {3, 6, 8}, gen);
  AttentionOptions causal;
  causal.causal = true;
  AttentionOptions lens;
  lens.valid_lens = add(arange(6, DType::i64).unsqueeze(0).expand({3, 6}).to(DType::f32), 1.0);
  EXPECT_LT(max_abs_diff(scaled_dot_product_attention(q, k, v, causal),
                         scaled_dot_product_attention(q, k, v, lens)),
            1e-6);
  // Q < K (new queries after a prefix): query i sees K - Q + i + 1 keys.
  Tensor q2 = q.narrow(1, 4, 2);
  AttentionOptions tail;
  tail.valid_lens = from_vector<float>({5, 6, 5, 6, 5, 6}, {3, 2});
  EXPECT_LT(max_abs_diff(scaled_dot_product_attention(q2, k, v, causal),
                         scaled_dot_product_attention(q2, k, v, tail)),
            1e-6);
}

// Fractional (float) lengths mean k < ceil(length), as masked_softmax.
TEST(Attention, FloatLengthsAreCeiled) {
  Generator gen(8);
  Tensor q = uniform(-2, 2, {2, 4, 8}, gen), k = uniform(-2, 2, {2, 7, 8}, gen);
  Tensor v = uniform(-1, 1, {2, 7, 8}, gen);
  AttentionOptions a, b;
  a.valid_lens = from_vector<float>({2.5f, 6.0f});
  b.valid_lens = from_vector<std::int32_t>({3, 6});
  EXPECT_EQ(max_abs_diff(scaled_dot_product_attention(q, k, v, a),
                         scaled_dot_product_attention(q, k, v, b)),
            0.0);
}

// The same mask as ops dropout on the (B * H, Q, K) weights: with the same
// generator state fused and reference agree (checked above); here the number
// of reserved draws, eval mode, p = 0 and p = 1.
TEST(Attention, DropoutReservesLikeOpsDropout) {
  Generator gen(9);
  Tensor q = uniform(-2, 2, {2, 5, 3, 8}, gen), k = uniform(-2, 2, {2, 7, 3, 8}, gen);
  Tensor v = uniform(-1, 1, {2, 7, 3, 8}, gen);
  Generator g1(1);
  AttentionOptions o;
  o.dropout = 0.5;
  o.generator = &g1;
  Tensor a = scaled_dot_product_attention(q, k, v, o);
  EXPECT_EQ(g1.offset(), static_cast<std::uint64_t>((2 * 3 * 5 * 7 + 3) / 4));
  Tensor b = scaled_dot_product_attention(q, k, v, o);  // the next draw: another mask
  EXPECT_GT(max_abs_diff(a, b), 1e-3);
  o.training = false;
  Tensor ev = scaled_dot_product_attention(q, k, v, o);
  const std::uint64_t before = g1.offset();
  o.dropout = 0.0;
  o.training = true;
  EXPECT_EQ(max_abs_diff(scaled_dot_product_attention(q, k, v, o), ev), 0.0);
  EXPECT_EQ(g1.offset(), before);
  o.dropout = 1.0;
  q.requires_grad_();
  Tensor z = scaled_dot_product_attention(q, k, v, o);
  EXPECT_EQ(max_abs_diff(z, zeros({2, 5, 3, 8})), 0.0);
  EXPECT_EQ(g1.offset(), before);
  sum(z).backward();
  EXPECT_EQ(max_abs_diff(q.grad(), zeros(q.shape())), 0.0);
}

// Strided inputs read in place: slices of a fused QKV projection, a KV-cache
// buffer cut along T, and a last dim with stride != 1 (copied).
TEST(Attention, StridedInputs) {
  Generator gen(10);
  const std::int64_t B = 2, T = 9, H = 3, D = 16;
  Tensor qkv = uniform(-2, 2, {B, T, 3 * H * D}, gen);
  auto part = [&](int i) { return qkv.narrow(2, i * H * D, H * D).view({B, T, H, D}); };
  Tensor q = part(0), k = part(1), v = part(2);
  EXPECT_FALSE(q.is_contiguous());
  AttentionOptions o;
  o.valid_lens = from_vector<std::int64_t>({4, 9});
  o.causal = true;
  EXPECT_LT(
      rel_diff(scaled_dot_product_attention(q, k, v, o),
               scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), o)),
      1e-6);
  Tensor cache = uniform(-2, 2, {B, 20, H, D}, gen);
  Tensor kc = cache.narrow(1, 0, T);
  EXPECT_LT(rel_diff(scaled_dot_product_attention(q, kc, v, o),
                     scaled_dot_product_attention_reference(q, kc, v, o)),
            1e-5);
  Tensor qt = uniform(-2, 2, {B * H, D, T}, gen).transpose(1, 2);  // last dim stride T
  Tensor k3 = uniform(-2, 2, {B * H, T, D}, gen), v3 = uniform(-1, 1, {B * H, T, D}, gen);
  EXPECT_LT(rel_diff(scaled_dot_product_attention(qt, k3, v3),
                     scaled_dot_product_attention_reference(qt, k3, v3)),
            1e-5);
  // Gradients reach the fused projection through the views.
  qkv.requires_grad_();
  Tensor out = scaled_dot_product_attention(part(0), part(1), part(2), o);
  sum(out).backward();
  Tensor g1 = qkv.grad();
  qkv.zero_grad();
  sum(scaled_dot_product_attention_reference(part(0), part(1), part(2), o)).backward();
  EXPECT_LT(rel_diff(g1, qkv.grad()), 1e-5);
}

// Q = 0: an empty output; K = 0: zeros, as the reference; gradients run.
TEST(Attention, EmptyQueriesOrKeys) {
  Tensor q = zeros({2, 0, 8}), k = ones({2, 5, 8}), v = ones({2, 5, 4});
  q.requires_grad_();
  Tensor out = scaled_dot_product_attention(q, k, v);
  EXPECT_EQ(out.shape(), (Shape{2, 0, 4}));
  sum(out).backward();
  EXPECT_EQ(q.grad().shape(), (Shape{2, 0, 8}));
  Tensor q2 = ones({1, 3, 2, 8}), k2 = zeros({1, 0, 2, 8}), v2 = zeros({1, 0, 2, 4});
  q2.requires_grad_();
  Tensor out2 = scaled_dot_product_attention(q2, k2, v2);
  EXPECT_EQ(out2.shape(), (Shape{1, 3, 2, 4}));
  EXPECT_EQ(max_abs_diff(out2, scaled_dot_product_attention_reference(q2, k2, v2)), 0.0);
  sum(out2).backward();
  EXPECT_EQ(max_abs_diff(q2.grad(), zeros({1, 3, 2, 8})), 0.0);
  EXPECT_EQ(attention_decode(q2.detach(), k2, v2).shape(), (Shape{1, 3, 2, 4}));
  // Dv = 0: an empty output, and no gradient for the queries.
  Tensor q3 = ones({2, 4, 8}), k3 = ones({2, 5, 8}), v3 = zeros({2, 5, 0});
  q3.requires_grad_();
  for_both_paths([&] {
    Tensor out3 = scaled_dot_product_attention(q3, k3, v3);
    EXPECT_EQ(out3.shape(), (Shape{2, 4, 0}));
    sum(out3).backward();
    EXPECT_EQ(max_abs_diff(q3.grad(), zeros({2, 4, 8})), 0.0);
    q3.zero_grad();
  });
}

// f64 gradient checks of the fused op for every mask kind (rows of length 0
// included) and with dropout, with tiles small enough that every row spans
// several key tiles and the queries several query tiles.
TEST(Attention, GradcheckEveryMaskKind) {
  TileGuard tiles(2, 3);
  for_both_paths([] {
    for (bool four : {false, true})
      for (MaskKind m : kAllMasks) {
        SCOPED_TRACE(fmt::format("{} {}", four ? "4-D" : "3-D", mask_name(m)));
        Shape qs = four ? Shape{2, 5, 2, 3} : Shape{4, 5, 3};
        Shape ks = four ? Shape{2, 7, 2, 3} : Shape{4, 7, 3};
        Shape vs = four ? Shape{2, 7, 2, 4} : Shape{4, 7, 4};
        Tensor q = leaf64(qs, 1, -2, 2), k = leaf64(ks, 2, -2, 2), v = leaf64(vs, 3);
        Tensor lens = random_lens(m, four ? 2 : 4, 5, 7, 11, true);
        EXPECT_GRADCHECK(
            [m, lens](const Inputs& x) {
              return scaled_dot_product_attention(x[0], x[1], x[2], options(m, lens, 0.0, nullptr));
            },
            (Inputs{q, k, v}));
        // Dropout: every evaluation draws from a fresh generator, so the mask is fixed.
        EXPECT_GRADCHECK(
            [m, lens](const Inputs& x) {
              Generator gen(42);
              return scaled_dot_product_attention(x[0], x[1], x[2], options(m, lens, 0.3, &gen));
            },
            (Inputs{q, k, v}));
      }
  });
}

TEST(Attention, GradcheckDefaultTilesAndScale) {
  Tensor q = leaf64({2, 9, 5}, 4, -2, 2), k = leaf64({2, 11, 5}, 5, -2, 2),
         v = leaf64({2, 11, 3}, 6);
  EXPECT_GRADCHECK(
      [](const Inputs& x) {
        AttentionOptions o;
        o.scale = 0.7;
        o.causal = true;
        return scaled_dot_product_attention(x[0], x[1], x[2], o);
      },
      (Inputs{q, k, v}));
}

// One new query (or a few) against a KV cache cut from a larger buffer.
TEST(Attention, DecodeMatchesReference) {
  for_each_isa([] {
    Generator gen(12);
    for (std::int64_t Tq : {1, 3}) {
      const std::int64_t B = 2, H = 4, D = 24, Tk = 37;
      Tensor cache_k = uniform(-2, 2, {B, 64, H, D}, gen),
             cache_v = uniform(-1, 1, {B, 64, H, 20}, gen);
      Tensor k = cache_k.narrow(1, 0, Tk), v = cache_v.narrow(1, 0, Tk);
      Tensor q = uniform(-2, 2, {B, Tq, H, D}, gen);
      for (MaskKind m : kAllMasks) {
        SCOPED_TRACE(fmt::format("Tq {} {}", Tq, mask_name(m)));
        Tensor lens = random_lens(m, B, Tq, Tk, 13, true);
        AttentionOptions o = options(m, lens, 0.0, nullptr);
        o.training = false;
        EXPECT_LT(rel_diff(attention_decode(q, k, v, o),
                           scaled_dot_product_attention_reference(q, k, v, o)),
                  1e-5);
      }
      // 3-D cache layout.
      Tensor k3 = uniform(-2, 2, {6, 50, 17}, gen).narrow(1, 0, 33);
      Tensor v3 = uniform(-1, 1, {6, 50, 9}, gen).narrow(1, 0, 33);
      Tensor q3 = uniform(-2, 2, {6, Tq, 17}, gen);
      EXPECT_LT(rel_diff(attention_decode(q3, k3, v3),
                         scaled_dot_product_attention_reference(q3, k3, v3)),
                1e-5);
    }
  });
}

// Long cache, one head: the keys are split over threads and the partial
// softmaxes combined.
TEST(Attention, DecodeSplitsLongCaches) {
  ThreadGuard threads(4);
  Generator gen(14);
  Tensor k = uniform(-2, 2, {1, 3000, 1, 64}, gen), v = uniform(-1, 1, {1, 3000, 1, 64}, gen);
  Tensor q = uniform(-2, 2, {1, 2, 1, 64}, gen);
  for (MaskKind m : kAllMasks) {
    SCOPED_TRACE(mask_name(m));
    Tensor lens = random_lens(m, 1, 2, 3000, 15, false);
    AttentionOptions o = options(m, lens, 0.0, nullptr);
    EXPECT_LT(
        rel_diff(attention_decode(q, k, v, o), scaled_dot_product_attention_reference(q, k, v, o)),
        1e-5);
  }
  AttentionOptions zero;
  zero.valid_lens = from_vector<std::int64_t>({0});
  EXPECT_LT(rel_diff(attention_decode(q, k, v, zero),
                     scaled_dot_product_attention_reference(q, k, v, zero)),
            1e-5);
}

TEST(Attention, F64MatchesReference) {
  Generator gen(16);
  Tensor q = uniform(-2, 2, {2, 19, 3, 10}, gen, DType::f64);
  Tensor k = uniform(-2, 2, {2, 23, 3, 10}, gen, DType::f64);
  Tensor v = uniform(-1, 1, {2, 23, 3, 6}, gen, DType::f64);
  for (MaskKind m : kAllMasks) {
    SCOPED_TRACE(mask_name(m));
    Tensor lens = random_lens(m, 2, 19, 23, 17, true);
    Generator g1(3), g2(3);
    EXPECT_LT(rel_diff(scaled_dot_product_attention(q, k, v, options(m, lens, 0.2, &g1)),
                       scaled_dot_product_attention_reference(q, k, v, options(m, lens, 0.2, &g2))),
              1e-12);
    AttentionOptions o = options(m, lens, 0.0, nullptr);
    EXPECT_LT(
        rel_diff(attention_decode(q, k, v, o), scaled_dot_product_attention_reference(q, k, v, o)),
        1e-12);
  }
}

TEST(Attention, BadInputs) {
  Tensor q = zeros({2, 3, 4}), k = zeros({2, 5, 4}), v = zeros({2, 5, 6});
  auto sdpa = [](const Tensor& a, const Tensor& b, const Tensor& c, AttentionOptions o = {}) {
    return scaled_dot_product_attention(a, b, c, o);
  };
  EXPECT_THROW(sdpa(zeros({3, 4}), k, v), ShapeError);  // rank 2
  EXPECT_THROW(sdpa(zeros({2, 3, 1, 4}), k, v), ShapeError);  // mixed ranks
  EXPECT_THROW(sdpa(q, zeros({3, 5, 4}), v), ShapeError);  // batch
  EXPECT_THROW(sdpa(q, k, zeros({2, 6, 6})), ShapeError);  // keys vs values steps
  EXPECT_THROW(sdpa(q, zeros({2, 5, 3}), v), ShapeError);  // feature size
  EXPECT_THROW(sdpa(zeros({2, 3, 0}), zeros({2, 5, 0}), v), ShapeError);  // D = 0
  EXPECT_THROW(sdpa(zeros({1, 3, 2, 4}), zeros({1, 5, 3, 4}), zeros({1, 5, 3, 4})), ShapeError);
  EXPECT_THROW(sdpa(q, k, zeros({2, 5, 6}, DType::f64)), DTypeError);
  EXPECT_THROW(sdpa(zeros({2, 3, 4}, DType::i64), zeros({2, 5, 4}, DType::i64),
                    zeros({2, 5, 6}, DType::i64)),
               DTypeError);
  AttentionOptions o;
  o.valid_lens = from_vector<std::int64_t>({1, 6});  // > K
  EXPECT_THROW(sdpa(q, k, v, o), ValueError);
  o.valid_lens = from_vector<std::int64_t>({-1, 2});
  EXPECT_THROW(sdpa(q, k, v, o), ValueError);
  o.valid_lens = from_vector<float>({NAN, 2});
  EXPECT_THROW(sdpa(q, k, v, o), ValueError);
  o.valid_lens = from_vector<std::int64_t>({1, 2, 3});  // wrong shape
  EXPECT_THROW(sdpa(q, k, v, o), ShapeError);
  o.valid_lens = zeros({2, 4}, DType::i64);  // (N, Q) with Q = 3
  EXPECT_THROW(sdpa(q, k, v, o), ShapeError);
  o.valid_lens = zeros({6}, DType::i64);  // 4-D: per batch element, not per head
  EXPECT_THROW(sdpa(zeros({2, 3, 3, 4}), zeros({2, 5, 3, 4}), zeros({2, 5, 3, 4}), o), ShapeError);
  AttentionOptions d;
  d.dropout = 1.5;
  EXPECT_THROW(sdpa(q, k, v, d), ValueError);
  d.dropout = -0.1;
  d.training = false;
  EXPECT_THROW(sdpa(q, k, v, d), ValueError);
  EXPECT_THROW(scaled_dot_product_attention_reference(q, k, v, d), ValueError);
  AttentionOptions s;
  s.scale = INFINITY;
  EXPECT_THROW(sdpa(q, k, v, s), ValueError);
  AttentionOptions train;
  train.dropout = 0.1;
  EXPECT_THROW(attention_decode(q, k, v, train), ValueError);
  train.training = false;
  EXPECT_NO_THROW(attention_decode(q, k, v, train));
  try {
    sdpa(q, zeros({2, 5, 3}), v);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("scaled_dot_product_attention"), std::string::npos);
  }
}
