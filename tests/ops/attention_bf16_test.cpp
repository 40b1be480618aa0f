// The tiled attention kernels in bf16 (src/kernels/attention/attention_avx512_bf16.cpp), forward
// and backward, against the materialized reference on the inputs rounded to
// bf16, on odd sizes with every mask kind and dropout; and the paths that
// stay f32.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attn/ops/attention.h"
#include "attn/ops/precision.h"
#include "ops/attention_testing.h"
#include "testing.h"

using namespace attn;
using attn::testing::rel_diff;

namespace {

class AttentionBf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!bf16_supported()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
    if (attention_kernel_config().isa != "avx512")
      GTEST_SKIP() << "the bf16 kernel runs with the AVX-512 kernels only, not "
                   << attention_kernel_config().isa;
  }
};

struct Case {
  std::int64_t B, H, Q, K, D, Dv;
  bool four_d;
  int mask;  // 0 none, 1 valid_lens per batch row (one of them 0), 2 causal, 3 per query
  double dropout;
};

const Case kCases[] = {
    {2, 3, 67, 45, 19, 13, true, 0, 0.0}, {2, 3, 67, 45, 19, 13, true, 1, 0.0},
    {1, 2, 70, 70, 64, 64, true, 2, 0.0}, {3, 1, 33, 95, 73, 37, false, 3, 0.0},
    {2, 2, 130, 99, 8, 5, true, 1, 0.25}, {1, 4, 41, 200, 96, 80, true, 2, 0.1},
    {2, 1, 17, 129, 1, 3, false, 0, 0.0},
};

struct Inputs {
  Tensor q, k, v;
  AttentionOptions opt;
};

Inputs make_inputs(const Case& c, std::uint64_t seed) {
  Generator gen(seed);
  auto shape = [&](std::int64_t T, std::int64_t d) {
    return c.four_d ? Shape{c.B, T, c.H, d} : Shape{c.B * c.H, T, d};
  };
  Inputs in;
  in.q = uniform(-2, 2, shape(c.Q, c.D), gen);
  in.k = uniform(-2, 2, shape(c.K, c.D), gen);
  in.v = uniform(-1, 1, shape(c.K, c.Dv), gen);
  const std::int64_t rows = c.four_d ? c.B : c.B * c.H;
  if (c.mask == 1) {
    std::vector<std::int64_t> lens(static_cast<std::size_t>(rows));
    for (std::int64_t b = 0; b < rows; ++b) lens[b] = b == 0 ? 0 : (c.K * (b + 1)) / (rows + 1);
    in.opt.valid_lens = from_vector<std::int64_t>(lens);
  } else if (c.mask == 3) {
    std::vector<std::int64_t> lens(static_cast<std::size_t>(rows * c.Q));
    for (std::size_t i = 0; i < lens.size(); ++i)
      lens[i] = static_cast<std::int64_t>((i * 37 + 5) % static_cast<std::size_t>(c.K + 1));
    in.opt.valid_lens = from_vector<std::int64_t>(lens, {rows, c.Q});
  }
  in.opt.causal = c.mask == 2;
  in.opt.dropout = c.dropout;
  return in;
}

std::string name(const Case& c) {
  return fmt::format("B {} H {} Q {} K {} D {} Dv {} {} mask {} dropout {}", c.B, c.H, c.Q, c.K,
                     c.D, c.Dv, c.four_d ? "4-D" : "3-D", c.mask, c.dropout);
}

// Runs attention on q, k, v (clones requiring grad) with the dropout stream
// at `seed`, backpropagates `g`; returns {out, dq, dk, dv}.
std::vector<Tensor> run(Tensor (*fn)(const Tensor&, const Tensor&, const Tensor&,
                                     const AttentionOptions&),
                        const Tensor& q, const Tensor& k, const Tensor& v, AttentionOptions opt,
                        const Tensor& g) {
  Generator drop(77);
  opt.generator = &drop;
  Tensor qq = q.clone(), kk = k.clone(), vv = v.clone();
  for (const Tensor& t : {qq, kk, vv}) t.requires_grad_();
  Tensor out = fn(qq, kk, vv, opt);
  out.backward(g);
  return {out.detach(), qq.grad(), kk.grad(), vv.grad()};
}

// Max over elements of |a - b| / bound; a value <= 1 means within the bound.
double worst(const Tensor& a, const Tensor& b, double bound) { return max_abs_diff(a, b) / bound; }

}  // namespace

// Forward: the only rounding left after the inputs' is that of the softmax
// weights (exp(S - m) <= 1, relative 2^-9 each), so each output is within
// 2^-8 max|v| / (1 - p) of the reference on the rounded inputs (twice the
// bound; accumulation order adds ~1e-6). The rounding of the inputs moves the
// f32 result by more than 1e-4: bf16 really ran.
TEST_F(AttentionBf16, ForwardAndBackwardAgainstReferenceOnRoundedInputs) {
  std::uint64_t seed = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    const Inputs in = make_inputs(c, seed++);
    Generator gg(1000 + seed);
    Tensor gout =
        uniform(-1, 1, c.four_d ? Shape{c.B, c.Q, c.H, c.Dv} : Shape{c.B * c.H, c.Q, c.Dv}, gg);
    std::vector<Tensor> bf, ref, f32;
    {
      PrecisionScope scope(Precision::bf16);
      bf = run(scaled_dot_product_attention, in.q, in.k, in.v, in.opt, gout);
    }
    ref = run(scaled_dot_product_attention_reference, round_to_bf16(in.q), round_to_bf16(in.k),
              round_to_bf16(in.v), in.opt, gout);
    f32 = run(scaled_dot_product_attention, in.q, in.k, in.v, in.opt, gout);
    double vmax = 0;
    for (float x : to_vector<float>(in.v)) vmax = std::max(vmax, std::fabs(double(x)));
    const double bound = std::ldexp(vmax, -8) / (1.0 - c.dropout) + 1e-5;
    EXPECT_LE(worst(bf[0], ref[0], bound), 1.0);
    // bf16 ran: the f32 kernel is within ~1e-6 of its reference, this far off it.
    EXPECT_GT(rel_diff(bf[0], f32[0]), 1e-4);
    // Gradients: the bf16 backward rounds dO and the tiles of P, W and dS as
    // well (relative 2^-9 each): within 2e-2 of each reference gradient's
    // largest element. Measured: 1.8e-3 to 4e-3, and 9.6e-3 for dq with head
    // dimension 1; the f32 gradients on the unrounded inputs are 1.3e-3 to
    // 8.2e-3 away from the same references.
    for (int i = 1; i < 4; ++i) {
      SCOPED_TRACE(fmt::format("gradient {}", i));
      EXPECT_LT(rel_diff(bf[i], ref[i]), 2e-2);
    }
  }
}

// The small path (d2l's sizes), the decode kernel and the AVX2 kernels stay
// in f32 under bf16: the same bits as outside the scope.
TEST_F(AttentionBf16, OtherPathsStayF32) {
  Generator gen(5);
  for (std::int64_t Q : {1, 10, 90}) {
    SCOPED_TRACE(fmt::format("Q {}", Q));
    Tensor q = uniform(-2, 2, {2, Q, 4, 8}, gen), k = uniform(-2, 2, {2, 12, 4, 8}, gen);
    Tensor v = uniform(-1, 1, {2, 12, 4, 8}, gen);
    AttentionOptions o;
    o.valid_lens = from_vector<std::int64_t>({12, 5});
    o.training = false;
    const Tensor f32 = scaled_dot_product_attention(q, k, v, o);
    Tensor bf;
    {
      PrecisionScope scope(Precision::bf16);
      bf = scaled_dot_product_attention(q, k, v, o);
    }
    // 90 queries by 12 keys is tiled: bf16; 1 decodes, 10 is small: f32.
    if (Q == 90)
      EXPECT_GT(max_abs_diff(bf, f32), 1e-4);
    else
      EXPECT_EQ(max_abs_diff(bf, f32), 0.0);
    attn::testing::KernelGuard avx2([](AttentionKernelConfig& c) { c.isa = "avx2"; });
    const Tensor f32_avx2 = scaled_dot_product_attention(q, k, v, o);
    PrecisionScope scope(Precision::bf16);
    EXPECT_EQ(max_abs_diff(scaled_dot_product_attention(q, k, v, o), f32_avx2), 0.0);
  }
}
