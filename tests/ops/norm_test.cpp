#include "attn/ops/norm.h"

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;
using attn::testing::rand32;

namespace {
using Inputs = std::vector<Tensor>;

// The composite reference, from existing differentiable ops.
Tensor layer_norm_composite(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  Tensor mu = mean(x, {-1}, true);
  Tensor xm = sub(x, mu);
  Tensor var = mean(mul(xm, xm), {-1}, true);
  Tensor y = div(xm, sqrt(add(var, eps)));
  if (w.defined()) y = mul(y, w);
  if (b.defined()) y = add(y, b);
  return y;
}
}  // namespace

TEST(LayerNorm, KnownValues) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 2, 2, 2, 2}, {2, 4});
  Tensor y = layer_norm(x, Tensor(), Tensor(), 0.0);
  // Row 0: mean 2.5, biased var 1.25.
  const float r = 1.0f / std::sqrt(1.25f);
  std::vector<float> want = {-1.5f * r, -0.5f * r, 0.5f * r, 1.5f * r, 0, 0, 0, 0};
  auto v = to_vector<float>(y);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(v[i], want[i], 1e-6) << i;
  // Row 1 is constant: (x - mean) = 0 exactly; with eps > 0 the output is 0, not NaN.
  Tensor y1 = layer_norm(x, Tensor(), Tensor());
  for (std::size_t i = 4; i < 8; ++i) EXPECT_EQ(to_vector<float>(y1)[i], 0.0f);
}

TEST(LayerNorm, MatchesCompositeReference) {
  const std::vector<Shape> shapes = {{1, 1}, {3, 7}, {2, 5, 33}, {37, 1001}, {4, 3, 2, 129}};
  for (const auto& shape : shapes) {
    SCOPED_TRACE(shape_str(shape));
    std::int64_t d = shape.back();
    Tensor x = rand32(shape, 1, -3.0, 5.0).to(DType::f64);
    Tensor w = rand32({d}, 2, 0.5, 1.5).to(DType::f64), b = rand32({d}, 3).to(DType::f64);
    EXPECT_LT(max_abs_diff(layer_norm(x, w, b), layer_norm_composite(x, w, b, 1e-5)), 1e-12);
    EXPECT_LT(max_abs_diff(layer_norm(x, Tensor(), b), layer_norm_composite(x, Tensor(), b, 1e-5)),
              1e-12);
    EXPECT_LT(max_abs_diff(layer_norm(x, w, Tensor()), layer_norm_composite(x, w, Tensor(), 1e-5)),
              1e-12);
    Tensor x32 = x.to(DType::f32), w32 = w.to(DType::f32), b32 = b.to(DType::f32);
    EXPECT_LT(max_abs_diff(layer_norm(x32, w32, b32), layer_norm_composite(x, w, b, 1e-5)), 5e-6);
  }
}

// A large common offset must not cancel the variance (two-pass variance).
TEST(LayerNorm, LargeOffsetF32) {
  Tensor base = rand32({5, 64}, 4);
  Tensor x = add(base, 1000.0);
  EXPECT_LT(max_abs_diff(layer_norm(x, Tensor(), Tensor()), layer_norm(base, Tensor(), Tensor())),
            2e-3);
}

TEST(LayerNorm, BackwardMatchesCompositeOnLargeShape) {
  Tensor x0 = rand32({41, 517}, 5, -2.0, 2.0).to(DType::f64);
  Tensor w0 = rand32({517}, 6, 0.5, 1.5).to(DType::f64), b0 = rand32({517}, 7).to(DType::f64);
  Tensor g = rand32({41, 517}, 8).to(DType::f64);
  auto grads = [&](bool fast) {
    Tensor x = x0.clone(), w = w0.clone(), b = b0.clone();
    x.requires_grad_();
    w.requires_grad_();
    b.requires_grad_();
    Tensor y = fast ? layer_norm(x, w, b) : layer_norm_composite(x, w, b, 1e-5);
    y.backward(g);
    return std::vector<Tensor>{x.grad(), w.grad(), b.grad()};
  };
  auto fast = grads(true), ref = grads(false);
  for (int i = 0; i < 3; ++i) EXPECT_LT(max_abs_diff(fast[i], ref[i]), 1e-11) << i;
}

TEST(LayerNorm, Gradcheck) {
  Tensor x = leaf64({3, 5, 7}, 11, -2.0, 2.0);
  Tensor w = leaf64({7}, 12, 0.5, 1.5), b = leaf64({7}, 13);
  EXPECT_GRADCHECK([](const Inputs& v) { return layer_norm(v[0], v[1], v[2]); }, (Inputs{x, w, b}));
  EXPECT_GRADCHECK([](const Inputs& v) { return layer_norm(v[0], Tensor(), Tensor()); }, {x});
  EXPECT_GRADCHECK([](const Inputs& v) { return layer_norm(v[0], v[1], Tensor(), 1e-3); },
                   (Inputs{x, w}));
  EXPECT_GRADCHECK([](const Inputs& v) { return layer_norm(v[0], Tensor(), v[1]); },
                   (Inputs{x, b}));
  // Permuted input (rows strided) and a broadcast one.
  Tensor xp = leaf64({7, 3, 5}, 14, -2.0, 2.0);
  EXPECT_GRADCHECK(
      [](const Inputs& v) {
        return layer_norm(v[0].permute({1, 2, 0}), v[1], v[2]);
      },
      (Inputs{xp, w, b}));
  Tensor row = leaf64({1, 7}, 15);
  EXPECT_GRADCHECK(
      [](const Inputs& v) {
        return layer_norm(v[0].expand({4, 7}), v[1], v[2]);
      },
      (Inputs{row, w, b}));
  // Only the parameters require grad.
  Tensor xc = x.detach();
  EXPECT_GRADCHECK([xc](const Inputs& v) { return layer_norm(xc, v[0], v[1]); }, (Inputs{w, b}));
}

TEST(LayerNorm, ErrorsNameTheProblem) {
  try {
    layer_norm(zeros({2, 4}), ones({3}), Tensor());
    FAIL() << "no throw";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "layer_norm: weight must have shape [4] for input [2, 4], got [3]");
  }
  EXPECT_THROW(layer_norm(zeros({2, 4}), Tensor(), ones({4}, DType::f64)), DTypeError);
  EXPECT_THROW(layer_norm(scalar(1.0), Tensor(), Tensor()), ShapeError);
  EXPECT_THROW(layer_norm(zeros({2, 4}, DType::i32), Tensor(), Tensor()), DTypeError);
}
