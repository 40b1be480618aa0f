// The attention op's seams: the one valid-lengths rule (attention_limits),
// the one choice between the decode, small and tiled kernels, the kernel
// setting (instruction set, small path, tiles) and the materialized path
// that returns the weights.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "attn/core/threads.h"
#include "attn/ops/attention.h"
#include "core/contention.h"
#include "kernels/attention/attention_kernel.h"
#include "ops/attention_testing.h"
#include "testing.h"

using namespace attn;
using attn::testing::for_each_isa;
using attn::testing::KernelGuard;
using attn::testing::rel_diff;

namespace {

std::vector<std::int64_t> limits_of(const Tensor& valid_lens, bool causal, std::int64_t B,
                                    std::int64_t Q, std::int64_t K) {
  Tensor l = attention_limits(valid_lens, causal, B, Q, K);
  EXPECT_EQ(l.shape(), (Shape{B, Q}));
  EXPECT_EQ(l.dtype(), DType::i64);
  return to_vector<std::int64_t>(l);
}

}  // namespace

TEST(AttentionLimits, ValidLensPerRowAndPerQuery) {
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(limits_of(Tensor(), false, 2, 3, 5), (V{5, 5, 5, 5, 5, 5}));
  EXPECT_EQ(limits_of(from_vector<std::int64_t>({2, 0}), false, 2, 3, 5), (V{2, 2, 2, 0, 0, 0}));
  EXPECT_EQ(limits_of(from_vector<std::int32_t>({1, 2, 3, 4, 5, 0}, {2, 3}), false, 2, 3, 5),
            (V{1, 2, 3, 4, 5, 0}));
  // A fractional length l means k < ceil(l).
  EXPECT_EQ(limits_of(from_vector<float>({2.5f, 0.25f}), false, 2, 1, 5), (V{3, 1}));
}

// Causal is d2l's dec_valid_lens = 1..T when Q == K; with Q < K (new queries
// after a prefix) query q sees K - Q + q + 1 keys; with valid_lens, the minimum.
TEST(AttentionLimits, CausalIsDecValidLens) {
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(limits_of(Tensor(), true, 2, 4, 4), (V{1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(limits_of(Tensor(), true, 1, 2, 5), (V{4, 5}));
  EXPECT_EQ(limits_of(Tensor(), true, 1, 4, 2), (V{0, 0, 1, 2}));  // Q > K: clamped at 0
  EXPECT_EQ(limits_of(from_vector<std::int64_t>({2, 4}), true, 2, 4, 4),
            (V{1, 2, 2, 2, 1, 2, 3, 4}));
  EXPECT_EQ(limits_of(from_vector<double>({3, 0, 1, 4}, {1, 4}), true, 1, 4, 4), (V{1, 0, 1, 4}));
}

TEST(AttentionLimits, BadValidLensNameTheOpAndTheValue) {
  auto message = [](const Tensor& vl, std::int64_t B, std::int64_t Q, std::int64_t K) {
    try {
      attention_limits(vl, false, B, Q, K, "my_op");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(from_vector<std::int64_t>({1, 6}), 2, 3, 5),
            "my_op: valid length 6 is outside [0, 5] (the number of keys)");
  EXPECT_EQ(message(from_vector<float>({-1.0f, 2.0f}), 2, 3, 5),
            "my_op: valid length -1 is outside [0, 5] (the number of keys)");
  EXPECT_EQ(message(from_vector<float>({5.5f, 2.0f}), 2, 3, 5),
            "my_op: valid length 5.5 is outside [0, 5] (the number of keys)");
  EXPECT_EQ(message(from_vector<float>({NAN, 2.0f}), 2, 3, 5),
            "my_op: valid length nan is not finite");
  EXPECT_EQ(message(zeros({2, 4}, DType::i64), 2, 3, 5),
            "my_op: valid_lens must have shape [2] or [2, 3] (per batch row, or per batch row and "
            "query), got [2, 4]");
  EXPECT_THROW(attention_limits(zeros({3}, DType::i64), false, 2, 3, 5), ShapeError);
  EXPECT_THROW(attention_limits(from_vector<std::int64_t>({1, 6}), true, 2, 3, 5), ValueError);
}

// ---- the choice of kernel ----

TEST(AttentionPath, OneChoiceBetweenDecodeSmallAndTiled) {
  using detail::AttnPath;
  using detail::choose_attention_path;
  // Inference with at most 8 queries decodes, whatever the rest.
  EXPECT_EQ(choose_attention_path(1, 4000, 64, 64, false, false, true), AttnPath::decode);
  EXPECT_EQ(choose_attention_path(8, 10, 8, 8, false, false, true), AttnPath::decode);
  // A gradient, active dropout or more queries: small or tiled.
  EXPECT_EQ(choose_attention_path(8, 10, 8, 8, true, false, true), AttnPath::small);
  EXPECT_EQ(choose_attention_path(8, 10, 8, 8, false, true, true), AttnPath::small);
  EXPECT_EQ(choose_attention_path(9, 10, 8, 8, false, false, true), AttnPath::small);
  EXPECT_EQ(choose_attention_path(10, 10, 8, 8, true, false, false), AttnPath::tiled);
  // The small path's edges: Q, K <= 64 and Q K <= 1024; head dims D, Dv <=
  // 8, or with a gradient <= 32 while Q K + (Q + K) max(D, Dv) <= 1200.
  EXPECT_EQ(choose_attention_path(64, 16, 8, 8, true, false, true), AttnPath::small);
  EXPECT_EQ(choose_attention_path(32, 32, 8, 8, true, false, true), AttnPath::small);
  EXPECT_EQ(choose_attention_path(64, 16, 32, 32, true, false, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(14, 14, 32, 32, true, false, true), AttnPath::small);
  EXPECT_EQ(choose_attention_path(16, 16, 32, 32, true, false, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(20, 20, 16, 16, true, false, true), AttnPath::small);
  EXPECT_EQ(choose_attention_path(24, 24, 16, 16, true, false, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(20, 20, 8, 16, true, false, true), AttnPath::small);
  EXPECT_EQ(choose_attention_path(24, 24, 16, 8, true, false, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(32, 32, 32, 32, true, true, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(65, 8, 8, 8, true, false, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(8, 65, 8, 8, true, false, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(33, 32, 8, 8, true, false, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(10, 10, 33, 8, true, false, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(10, 10, 8, 33, true, false, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(10, 10, 8, 8, false, false, true), AttnPath::small);
  EXPECT_EQ(choose_attention_path(10, 10, 9, 8, false, false, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(10, 10, 8, 9, false, true, true), AttnPath::tiled);
  EXPECT_EQ(choose_attention_path(10, 10, 32, 32, true, true, true), AttnPath::small);
}

// The fused op makes that choice itself: without a gradient, 8 queries run
// the decode kernel (the same numbers as attention_decode), 9 the kernel the
// training forward runs (the same numbers as with a gradient).
TEST(AttentionPath, FusedOpDecodesFewQueriesWithoutGradient) {
  for_each_isa([] {
    for (std::int64_t Q : {8, 9}) {
      SCOPED_TRACE(fmt::format("Q {}", Q));
      Generator gen(21);
      Tensor q = uniform(-2, 2, {3, Q, 4, 8}, gen), k = uniform(-2, 2, {3, 10, 4, 8}, gen);
      Tensor v = uniform(-1, 1, {3, 10, 4, 8}, gen);
      AttentionOptions o;
      o.valid_lens = from_vector<std::int64_t>({10, 3, 0});
      o.causal = true;
      o.training = false;
      o.dropout = 0.1;
      Tensor no_grad = scaled_dot_product_attention(q, k, v, o);
      Tensor qg = q.clone();
      qg.requires_grad_();
      Tensor with_grad = scaled_dot_product_attention(qg, k, v, o);
      Tensor decoded = attention_decode(q, k, v, o);
      EXPECT_LT(rel_diff(decoded, with_grad), 1e-5);
      if (Q <= detail::kDecodeMaxQueries)
        EXPECT_EQ(max_abs_diff(no_grad, decoded), 0.0);
      else
        EXPECT_EQ(max_abs_diff(no_grad, with_grad), 0.0);
    }
  });
}

// The grain scale (attn/core/threads.h: 16 while the team's cores are far
// apart) decides how many threads run a call, never how it is split: one
// head with long keys (the backward splits the keys over the team, partial
// dQ summed; the decode splits the cache), the small path and the tiled
// path give the same bits at scale 1 (a team of 4 for these sizes) and 16
// (one thread).
TEST(AttentionPath, GrainScaleChangesThreadsNotBits) {
  const int saved_threads = get_num_threads();
  set_num_threads(4);
  struct Shape4 {
    std::int64_t B, Q, K, H, D;
  };
  for (const Shape4 s :
       {Shape4{1, 64, 64, 1, 64}, Shape4{1, 1, 2000, 1, 64}, Shape4{64, 10, 10, 4, 8},
        Shape4{2, 40, 40, 2, 48}, Shape4{3, 70, 70, 2, 32}}) {
    SCOPED_TRACE(fmt::format("B {} Q {} K {} H {} D {}", s.B, s.Q, s.K, s.H, s.D));
    Generator gen(5);
    Tensor q = uniform(-2, 2, {s.B, s.Q, s.H, s.D}, gen),
           k = uniform(-2, 2, {s.B, s.K, s.H, s.D}, gen),
           v = uniform(-1, 1, {s.B, s.K, s.H, s.D}, gen),
           g = uniform(-1, 1, {s.B, s.Q, s.H, s.D}, gen);
    AttentionOptions o;
    o.causal = s.Q == s.K;
    std::vector<Tensor> got[2];
    for (int i = 0; i < 2; ++i) {
      const std::int64_t before = detail::set_grain_scale(i == 0 ? 1 : 16);
      ASSERT_EQ(grain_scale(), i == 0 ? 1 : 16);
      Tensor qg = q.clone(), kg = k.clone(), vg = v.clone();
      for (Tensor* t : {&qg, &kg, &vg}) t->requires_grad_();
      Tensor y = scaled_dot_product_attention(qg, kg, vg, o);
      sum(mul(y, g)).backward();
      got[i] = {y.detach(), qg.grad(), kg.grad(), vg.grad(), attention_decode(q, k, v, o)};
      detail::set_grain_scale(before);
    }
    for (std::size_t t = 0; t < got[0].size(); ++t)
      EXPECT_EQ(max_abs_diff(got[0][t], got[1][t]), 0.0) << "tensor " << t;
  }
  set_num_threads(saved_threads);
}

// ---- the kernel setting ----

TEST(AttentionKernelConfig, InstructionSetsTilesAndSmallPath) {
  const std::vector<std::string> isas = attention_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.back(), "portable");
  // The default: ATTN_ISA when set (the suite runs forced to each set), else the best.
  const char* env = std::getenv("ATTN_ISA");
  const std::string default_isa = env && *env ? env : isas.front();
  EXPECT_EQ(attention_kernel_config().isa, default_isa);
  EXPECT_TRUE(attention_kernel_config().small_path);
  for (const std::string& isa : isas) {
    KernelGuard guard([&](AttentionKernelConfig& c) {
      c.isa = isa;
      c.small_path = false;
      c.tile_queries = 7;
      c.tile_keys = 5;
    });
    const AttentionKernelConfig c = attention_kernel_config();
    EXPECT_EQ(c.isa, isa);
    EXPECT_FALSE(c.small_path);
    EXPECT_EQ(c.tile_queries, 7);
    EXPECT_EQ(c.tile_keys, 5);
  }
  EXPECT_EQ(attention_kernel_config().isa, default_isa);  // restored
  {
    KernelGuard guard([&](AttentionKernelConfig& c) { c.isa = "portable"; });
    set_attention_kernel_config({});  // "": back to the default
    EXPECT_EQ(attention_kernel_config().isa, default_isa);
  }
  for (const char* isa : {"avx512", "avx2"}) {
    if (std::find(isas.begin(), isas.end(), isa) != isas.end()) continue;
    AttentionKernelConfig c;
    c.isa = isa;
    try {
      set_attention_kernel_config(c);
      ADD_FAILURE() << isa << " accepted on a CPU without it";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("this CPU cannot run the"), std::string::npos);
    }
  }
  AttentionKernelConfig bad;
  bad.isa = "sse9";
  try {
    set_attention_kernel_config(bad);
    ADD_FAILURE() << "an unknown instruction set was accepted";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(),
                 "set_attention_kernel_config: unknown instruction set 'sse9' (expected avx512, "
                 "avx2, portable, or \"\" for the best)");
  }
  bad.isa = "";
  bad.tile_keys = -1;
  EXPECT_THROW(set_attention_kernel_config(bad), ValueError);
  EXPECT_EQ(attention_kernel_config().tile_keys, 0);  // unchanged
}

// ---- the materialized path ----

// It returns d2l's weights (before dropout, one row per head and query) along
// with the output; the reference is its output.
TEST(AttentionMaterialized, ReturnsTheWeights) {
  Generator gen(22);
  Tensor q = uniform(-2, 2, {2, 3, 2, 4}, gen), k = uniform(-2, 2, {2, 5, 2, 4}, gen);
  Tensor v = uniform(-1, 1, {2, 5, 2, 3}, gen);
  AttentionOptions o;
  o.valid_lens = from_vector<std::int64_t>({4, 0});
  o.causal = true;
  MaterializedAttention m = scaled_dot_product_attention_materialized(q, k, v, o);
  ASSERT_EQ(m.weights.shape(), (Shape{4, 3, 5}));  // (B * H, Q, K)
  const std::int64_t limit[2][3] = {{3, 4, 4}, {0, 0, 0}};  // min(valid_lens, q + 1 + K - Q)
  for (std::int64_t n = 0; n < 4; ++n)
    for (std::int64_t i = 0; i < 3; ++i) {
      const std::int64_t L = limit[n / 2][i];
      double total = 0;
      for (std::int64_t c = 0; c < 5; ++c) {
        const double w = m.weights.at({n, i, c});
        total += w;
        if (L == 0)
          EXPECT_NEAR(w, 0.2, 1e-6);
        else if (c >= L)
          EXPECT_EQ(w, 0.0);
        else
          EXPECT_GT(w, 0.0);
      }
      EXPECT_NEAR(total, 1.0, 1e-6);
    }
  EXPECT_EQ(max_abs_diff(m.output, scaled_dot_product_attention_reference(q, k, v, o)), 0.0);
  EXPECT_LT(rel_diff(m.output, scaled_dot_product_attention(q, k, v, o)), 1e-5);
}

// A NaN in a query reaches its own output row, on every path and instruction
// set (the kernels' exp keeps NaN, as exp_simd does), and no other row.
TEST(AttentionPath, NanInAQueryReachesItsRowOnly) {
  struct Shape4 {
    std::int64_t T;
    bool grad;  // T 10 with a gradient: the small path; without: tiled (or decode at 1)
  };
  for_each_isa([] {
    for (Shape4 s : {Shape4{10, true}, Shape4{10, false}, Shape4{1, false}, Shape4{200, false}}) {
      SCOPED_TRACE(fmt::format("T {} grad {}", s.T, s.grad));
      Generator gen(9);
      Tensor q = uniform(-1, 1, {2, s.T, 2, 16}, gen), k = uniform(-1, 1, {2, 12, 2, 16}, gen);
      Tensor v = uniform(-1, 1, {2, 12, 2, 16}, gen);
      q.data<float>()[((1 * s.T + s.T - 1) * 2 + 1) * 16 + 3] = std::nanf("");  // (1, T-1, 1, 3)
      if (s.grad) q.requires_grad_();
      const Tensor out = scaled_dot_product_attention(q, k, v, AttentionOptions{}).contiguous();
      const float* o = out.data<float>();
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t t = 0; t < s.T; ++t)
          for (std::int64_t h = 0; h < 2; ++h) {
            const bool hit = b == 1 && t == s.T - 1 && h == 1;
            for (std::int64_t d = 0; d < 16; ++d)
              ASSERT_EQ(std::isnan(o[((b * s.T + t) * 2 + h) * 16 + d]), hit)
                  << "b " << b << " t " << t << " h " << h << " d " << d;
          }
    }
  });
}
