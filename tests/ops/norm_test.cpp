#include "attn/ops/norm.h"

#include <cstring>

#include "attn/ops/dropout.h"
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

// Rows normalized 16 at a time (AVX-512 builds: f32, d a multiple of 16)
// give the bits of rows normalized one at a time, forward and backward
// (dx; dw and db are column sums, the same code either way), with and
// without a weight and bias, for row counts around the blocks.
TEST(LayerNorm, RowBlocksSameBitsAsOneRow) {
  std::uint64_t seed = 70;
  for (std::int64_t d : {16, 32, 48, 256, 40})
    for (std::int64_t rows : {16, 37, 64})
      for (int params = 0; params < 3; ++params) {  // weight and bias, weight only, neither
        Tensor x0 = rand32({rows, d}, seed++, -3.0, 5.0), g = rand32({rows, d}, seed++);
        Tensor w0 = rand32({d}, seed++, 0.5, 1.5), b0 = rand32({d}, seed++);
        const Tensor w = params < 2 ? w0 : Tensor(), b = params < 1 ? b0 : Tensor();
        // All rows at once: y and dx.
        Tensor x = x0.clone().requires_grad_();
        Tensor y = layer_norm(x, w, b);
        y.backward(g);
        const auto vy = to_vector<float>(y), vdx = to_vector<float>(x.grad());
        for (std::int64_t r = 0; r < rows; ++r) {
          Tensor xr = x0.narrow(0, r, 1).clone().requires_grad_();
          Tensor yr = layer_norm(xr, w, b);
          yr.backward(g.narrow(0, r, 1).contiguous());
          const auto ry = to_vector<float>(yr), rdx = to_vector<float>(xr.grad());
          ASSERT_EQ(std::memcmp(ry.data(), vy.data() + r * d, d * sizeof(float)), 0)
              << "y, row " << r << " of " << rows << ", d " << d << ", params " << params;
          ASSERT_EQ(std::memcmp(rdx.data(), vdx.data() + r * d, d * sizeof(float)), 0)
              << "dx, row " << r << " of " << rows << ", d " << d << ", params " << params;
        }
      }
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

// dropout_add_layer_norm against its two ops, dropout_add then layer_norm:
// the same bits forward and in every gradient, the same draws from the
// generator; rows whose width is no multiple of 4 (rows share Philox
// counters), rows wider than a block, d2l's toy shape, strided inputs.
TEST(DropoutAddLayerNorm, SameBitsAsDropoutAddThenLayerNorm) {
  std::uint64_t seed = 40;
  for (const Shape& shape :
       std::vector<Shape>{{5, 33}, {3, 7, 1025}, {64, 10, 32}, {2, 3, 4}, {1, 1}})
    for (double p : {0.1, 0.5})
      for (int params = 0; params < 3; ++params) {  // weight and bias, weight only, neither
        const std::int64_t d = shape.back();
        Tensor b0 = rand32(shape, seed++), x0 = rand32(shape, seed++), r = rand32(shape, seed++);
        Tensor w0 = rand32({d}, seed++, 0.5, 1.5), c0 = rand32({d}, seed++);
        auto run = [&](bool fused, Generator& gen) {
          Tensor base = b0.clone().requires_grad_(), x = x0.clone().requires_grad_();
          Tensor w = params < 2 ? w0.clone().requires_grad_() : Tensor();
          Tensor c = params < 1 ? c0.clone().requires_grad_() : Tensor();
          Tensor y = fused ? dropout_add_layer_norm(base, x, p, true, gen, w, c)
                           : layer_norm(dropout_add(base, x, p, true, gen), w, c);
          sum(mul(y, r)).backward();
          std::vector<Tensor> out = {y.detach(), base.grad(), x.grad()};
          if (w.defined()) out.push_back(w.grad());
          if (c.defined()) out.push_back(c.grad());
          return out;
        };
        Generator g1(seed), g2(seed);
        g1.set_offset(3);
        g2.set_offset(3);
        auto fused = run(true, g1), composite = run(false, g2);
        EXPECT_EQ(g1.offset(), g2.offset());
        for (std::size_t i = 0; i < fused.size(); ++i) {
          auto vf = to_vector<float>(fused[i]), vc = to_vector<float>(composite[i]);
          ASSERT_EQ(vf.size(), vc.size());
          ASSERT_EQ(std::memcmp(vf.data(), vc.data(), vf.size() * sizeof(float)), 0)
              << "tensor " << i << " (y, dbase, dx, dw, db) for " << shape_str(shape) << ", p " << p
              << ", params " << params;
        }
      }
  // A strided base and x (transposed views) read as their values.
  Tensor bt = rand32({9, 6}, 1).transpose(0, 1), xt = rand32({9, 6}, 2).transpose(0, 1);
  Generator g1(5), g2(5);
  auto vf = to_vector<float>(dropout_add_layer_norm(bt, xt, 0.2, true, g1, Tensor(), Tensor()));
  auto vc = to_vector<float>(layer_norm(dropout_add(bt, xt, 0.2, true, g2), Tensor(), Tensor()));
  EXPECT_EQ(vf, vc);
}

TEST(DropoutAddLayerNorm, OutsideTrainingItIsAddThenLayerNorm) {
  Tensor base = rand32({4, 9}, 1), x = rand32({4, 9}, 2), w = rand32({9}, 3), b = rand32({9}, 4);
  Generator gen(0);
  for (auto [p, training] : {std::pair{0.3, false}, {0.0, true}}) {
    auto vf = to_vector<float>(dropout_add_layer_norm(base, x, p, training, gen, w, b));
    auto vc = to_vector<float>(layer_norm(add(base, x), w, b));
    EXPECT_EQ(vf, vc);
  }
  EXPECT_EQ(gen.offset(), 0u);
}

TEST(DropoutAddLayerNorm, Gradcheck) {
  // A new generator of the same seed per call: the same mask every time.
  Tensor base = leaf64({3, 2, 7}, 21, -2.0, 2.0), x = leaf64({3, 2, 7}, 22, -2.0, 2.0);
  Tensor w = leaf64({7}, 23, 0.5, 1.5), b = leaf64({7}, 24);
  EXPECT_GRADCHECK(
      [](const Inputs& v) {
        Generator gen(9);
        return dropout_add_layer_norm(v[0], v[1], 0.3, true, gen, v[2], v[3]);
      },
      (Inputs{base, x, w, b}));
  EXPECT_GRADCHECK(
      [](const Inputs& v) {
        Generator gen(9);
        return dropout_add_layer_norm(v[0], v[1], 0.5, true, gen, Tensor(), Tensor());
      },
      (Inputs{base, x}));
}

TEST(DropoutAddLayerNorm, ErrorsNameTheProblem) {
  Generator gen(0);
  try {
    dropout_add_layer_norm(zeros({2, 4}), zeros({2, 5}), 0.1, true, gen, Tensor(), Tensor());
    FAIL() << "no throw";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(),
                 "dropout_add_layer_norm: base f32 [2, 4] and x f32 [2, 5] must have the same "
                 "shape and dtype");
  }
  try {
    dropout_add_layer_norm(zeros({2, 4}), zeros({2, 4}), 0.1, true, gen, ones({3}), Tensor());
    FAIL() << "no throw";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(),
                 "dropout_add_layer_norm: weight must have shape [4] for input [2, 4], got [3]");
  }
  EXPECT_THROW(
      dropout_add_layer_norm(zeros({2, 4}), zeros({2, 4}), 1.5, true, gen, Tensor(), Tensor()),
      ValueError);
}
