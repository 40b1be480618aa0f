#include "attn/ops/dropout.h"

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;
using attn::testing::rand32;

namespace {
using Inputs = std::vector<Tensor>;

// The reference mask, element by element from core's philox_uniform.
std::vector<float> reference_mask(std::int64_t n, double p, std::uint64_t seed,
                                  std::uint64_t offset) {
  std::vector<float> m(n);
  for (std::int64_t i = 0; i < n; ++i) m[i] = philox_uniform(seed, offset, i) >= p ? 1.0f : 0.0f;
  return m;
}
}  // namespace

TEST(Dropout, MatchesReferenceMaskOnOddSizes) {
  for (std::int64_t n : {1, 3, 4, 5, 1023, 1025, 4097, 100003}) {
    SCOPED_TRACE(n);
    Generator gen(42);
    gen.set_offset(7);
    Tensor x = rand32({n}, 1, 1.0, 2.0);  // nonzero, so y == 0 means dropped
    Tensor y = dropout(x, 0.3, true, gen);
    EXPECT_EQ(gen.offset(), 7u + static_cast<std::uint64_t>((n + 3) / 4));
    auto m = reference_mask(n, 0.3, 42, 7);
    auto xv = to_vector<float>(x), yv = to_vector<float>(y);
    for (std::int64_t i = 0; i < n; ++i)
      ASSERT_FLOAT_EQ(yv[i], m[i] * xv[i] * static_cast<float>(1.0 / 0.7)) << i;
  }
}

TEST(Dropout, SameSeedSameMaskAndStreamAdvances) {
  Tensor x = ones({33, 17});
  Generator a(5), b(5);
  Tensor ya = dropout(x, 0.5, true, a), yb = dropout(x, 0.5, true, b);
  EXPECT_EQ(max_abs_diff(ya, yb), 0.0);
  Tensor ya2 = dropout(x, 0.5, true, a);  // the next draw differs
  EXPECT_GT(max_abs_diff(ya, ya2), 0.0);
  Generator c(6);
  EXPECT_GT(max_abs_diff(ya, dropout(x, 0.5, true, c)), 0.0);
}

TEST(Dropout, EvalAndZeroPAreIdentityAndOneGivesZeros) {
  Tensor x = rand32({4, 5}, 2);
  Generator gen(1);
  Tensor e = dropout(x, 0.5, false, gen);
  EXPECT_EQ(e.impl_ptr(), x.impl_ptr());
  EXPECT_EQ(gen.offset(), 0u);  // nothing drawn
  EXPECT_EQ(dropout(x, 0.0, true, gen).impl_ptr(), x.impl_ptr());
  Tensor l = leaf64({4, 5}, 3);
  Tensor z = dropout(l, 1.0, true, gen);
  EXPECT_EQ(max_abs_diff(z, zeros({4, 5}, DType::f64)), 0.0);
  sum(z).backward();
  EXPECT_EQ(max_abs_diff(l.grad(), zeros({4, 5}, DType::f64)), 0.0);
}

TEST(Dropout, FractionKeptIsOneMinusP) {
  Generator gen(123);
  const std::int64_t n = 1 << 20;
  for (double p : {0.1, 0.5, 0.9}) {
    Tensor y = dropout(ones({n}), p, true, gen);
    double kept = sum(gt(y, 0.0)).item<double>() / static_cast<double>(n);
    EXPECT_NEAR(kept, 1.0 - p, 3e-3) << p;  // std of the fraction ~5e-4
    EXPECT_NEAR(mean(y).item<double>(), 1.0, 1.5e-2) << p;  // inverted dropout keeps the mean
  }
}

TEST(Dropout, BackwardRegeneratesTheForwardMask) {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = ones({129, 67}, dt);  // odd sizes, large enough to split over threads
    x.requires_grad_();
    Generator gen(9);
    Tensor y = dropout(x, 0.25, true, gen);
    y.backward(ones({129, 67}, dt));
    // With x = 1 and g = 1, both are mask / (1 - p).
    EXPECT_EQ(max_abs_diff(x.grad(), y.detach()), 0.0);
  }
}

TEST(Dropout, NonContiguousInputUsesRowMajorIndex) {
  Tensor x = rand32({7, 9}, 4, 1.0, 2.0);
  Tensor xt = x.transpose(0, 1);
  Generator a(3), b(3);
  EXPECT_EQ(max_abs_diff(dropout(xt, 0.4, true, a), dropout(xt.contiguous(), 0.4, true, b)), 0.0);
}

TEST(Dropout, Gradcheck) {
  Tensor x = leaf64({5, 7, 3}, 10);
  // gradcheck calls fn many times: a Generator made inside fn sees the same mask each time.
  EXPECT_GRADCHECK(
      [](const Inputs& v) {
        Generator gen(77);
        return dropout(v[0], 0.4, true, gen);
      },
      {x});
  EXPECT_GRADCHECK(
      [](const Inputs& v) {
        Generator gen(78);
        return dropout(v[0].permute({2, 0, 1}), 0.6, true, gen);
      },
      {x});
  Tensor row = leaf64({1, 7}, 11);
  EXPECT_GRADCHECK(
      [](const Inputs& v) {
        Generator gen(79);
        return mul(dropout(v[0].expand({5, 7}), 0.5, true, gen), 3.0);
      },
      {row});
}

TEST(Dropout, DefaultGeneratorOverload) {
  manual_seed(2024);
  Tensor a = dropout(ones({100}), 0.5);
  manual_seed(2024);
  Tensor b = dropout(ones({100}), 0.5, true);
  EXPECT_EQ(max_abs_diff(a, b), 0.0);
}

TEST(Dropout, RejectsPOutsideUnitInterval) {
  Generator gen(0);
  try {
    dropout(ones({3}), 1.5, true, gen);
    FAIL() << "no throw";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "dropout: p must be in [0, 1], got 1.5");
  }
  EXPECT_THROW(dropout(ones({3}), -0.1, false, gen), ValueError);
  EXPECT_THROW(dropout(ones({3}, DType::i64), 0.5, true, gen), DTypeError);
}

// dropout_add is add(base, dropout(x)) in one pass: bit-identical output and
// gradients, the same generator advance.
TEST(DropoutAdd, EqualsAddOfDropoutExactly) {
  for (std::int64_t n : {1, 5, 1023, 4097}) {
    for (double p : {0.0, 0.1, 0.5, 1.0}) {
      for (bool training : {true, false}) {
        SCOPED_TRACE(std::to_string(n) + " p " + std::to_string(p));
        Tensor base = rand32({n, 3}, 1), x = rand32({n, 3}, 2);
        base.requires_grad_();
        x.requires_grad_();
        Generator g1(5), g2(5);
        Tensor fused = dropout_add(base, x, p, training, g1);
        Tensor ref = add(base, dropout(x, p, training, g2));
        EXPECT_EQ(to_vector<float>(fused), to_vector<float>(ref));
        EXPECT_EQ(g1.offset(), g2.offset());
        Tensor w = rand32({n, 3}, 3);
        sum(mul(fused, w)).backward();
        auto gb = to_vector<float>(base.grad()), gx = to_vector<float>(x.grad());
        base.zero_grad();
        x.zero_grad();
        sum(mul(ref, w)).backward();
        EXPECT_EQ(gb, to_vector<float>(base.grad()));
        EXPECT_EQ(gx, to_vector<float>(x.grad()));
      }
    }
  }
}

TEST(DropoutAdd, GradcheckAndErrors) {
  Tensor base = leaf64({3, 7}, 1), x = leaf64({3, 7}, 2);
  EXPECT_GRADCHECK(
      [](const Inputs& v) {
        Generator g(9);  // the same mask on every evaluation
        return dropout_add(v[0], v[1], 0.4, true, g);
      },
      {base, x});
  EXPECT_THROW(dropout_add(zeros({2, 3}), zeros({3, 2}), 0.1), ShapeError);
  EXPECT_THROW(dropout_add(zeros({2, 3}), zeros({2, 3}), 1.5), ValueError);
}
