#include "attn/ops/rnn.h"

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;
using attn::testing::rand32;

namespace {

struct GruInputs {
  Tensor X, h0, w_ih, w_hh, b_ih, b_hh;
};

GruInputs random_inputs(std::int64_t T, std::int64_t B, std::int64_t I, std::int64_t H,
                        std::uint64_t seed, DType dt) {
  auto r = [&](const Shape& s, std::uint64_t k) { return rand32(s, seed + k).to(dt); };
  return {r({T, B, I}, 1),  r({B, H}, 2),  r({3 * H, I}, 3),
          r({3 * H, H}, 4), r({3 * H}, 5), r({3 * H}, 6)};
}

}  // namespace

// One step by hand: PyTorch's gate order (r, z, n) and r applied to the
// recurrent part of n only.
TEST(Gru, OneStepByHand) {
  // H = 1, I = 1: w_ih = [a_r, a_z, a_n], w_hh = [c_r, c_z, c_n].
  Tensor X = from_vector<double>({0.5}, {1, 1, 1}), h0 = from_vector<double>({-0.3}, {1, 1});
  Tensor w_ih = from_vector<double>({0.1, -0.2, 0.3}, {3, 1});
  Tensor w_hh = from_vector<double>({0.4, 0.5, -0.6}, {3, 1});
  Tensor b_ih = from_vector<double>({0.01, 0.02, 0.03}, {3});
  Tensor b_hh = from_vector<double>({-0.01, 0.05, 0.07}, {3});
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double x = 0.5, h = -0.3;
  const double r = sig(0.1 * x + 0.01 + 0.4 * h - 0.01);
  const double z = sig(-0.2 * x + 0.02 + 0.5 * h + 0.05);
  const double n = std::tanh(0.3 * x + 0.03 + r * (-0.6 * h + 0.07));
  const double want = (1 - z) * n + z * h;
  EXPECT_NEAR(gru(X, h0, w_ih, w_hh, b_ih, b_hh).item<double>(), want, 1e-15);
  EXPECT_NEAR(gru_reference(X, h0, w_ih, w_hh, b_ih, b_hh).item<double>(), want, 1e-15);
}

// The fused layer against the composite reference, forward and every
// gradient, on odd sizes; f64 to 1e-12, f32 to 1e-5 of the tensor's largest
// magnitude (the two sum their products in different orders).
TEST(Gru, FusedMatchesReference) {
  struct Size {
    std::int64_t T, B, I, H;
  };
  for (Size s : {Size{1, 1, 1, 1}, Size{3, 2, 5, 7}, Size{7, 5, 3, 33}, Size{10, 64, 64, 32},
                 Size{4, 3, 65, 129}}) {
    SCOPED_TRACE(fmt::format("T {} B {} I {} H {}", s.T, s.B, s.I, s.H));
    for (DType dt : {DType::f64, DType::f32}) {
      const double rel = dt == DType::f64 ? 1e-12 : 1e-5;
      auto grads = [&](bool fused, bool with_bias) {
        GruInputs in = random_inputs(s.T, s.B, s.I, s.H, 10, dt);
        std::vector<Tensor> leaves = {in.X, in.h0, in.w_ih, in.w_hh, in.b_ih, in.b_hh};
        for (auto& t : leaves) t.requires_grad_();
        Tensor bi = with_bias ? leaves[4] : Tensor(), bh = with_bias ? leaves[5] : Tensor();
        Tensor y = fused ? gru(leaves[0], leaves[1], leaves[2], leaves[3], bi, bh)
                         : gru_reference(leaves[0], leaves[1], leaves[2], leaves[3], bi, bh);
        y.backward(rand32(y.shape(), 99).to(dt));
        std::vector<Tensor> out = {y.detach()};
        for (int i = 0; i < (with_bias ? 6 : 4); ++i) out.push_back(leaves[i].grad());
        return out;
      };
      for (bool with_bias : {true, false}) {
        auto fast = grads(true, with_bias), ref = grads(false, with_bias);
        ASSERT_EQ(fast.size(), ref.size());
        for (std::size_t i = 0; i < fast.size(); ++i) {
          const double scale = std::max(1.0, max(abs(ref[i].flatten()), 0).item<double>());
          EXPECT_LT(max_abs_diff(fast[i], ref[i]), rel * scale)
              << "tensor " << i << " " << dtype_name(dt);
        }
      }
    }
  }
}

TEST(Gru, Gradcheck) {
  const std::int64_t T = 4, B = 3, I = 5, H = 6;
  std::vector<Tensor> in = {leaf64({T, B, I}, 1),  leaf64({B, H}, 2),  leaf64({3 * H, I}, 3),
                            leaf64({3 * H, H}, 4), leaf64({3 * H}, 5), leaf64({3 * H}, 6)};
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& x) { return gru(x[0], x[1], x[2], x[3], x[4], x[5]); }, in);
  // Only part of the sequence used downstream: gradients flow through time.
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& x) {
        return gru(x[0], x[1], x[2], x[3], x[4], x[5]).select(0, 1);
      },
      in);
}

TEST(Gru, EmptySequenceAndBadShapes) {
  GruInputs in = random_inputs(0, 2, 3, 4, 1, DType::f32);
  EXPECT_EQ(gru(in.X, in.h0, in.w_ih, in.w_hh, in.b_ih, in.b_hh).shape(), (Shape{0, 2, 4}));
  GruInputs ok = random_inputs(2, 2, 3, 4, 1, DType::f32);
  EXPECT_THROW(gru(ok.X.select(0, 0), ok.h0, ok.w_ih, ok.w_hh), ShapeError);
  EXPECT_THROW(gru(ok.X, ok.h0, ok.w_hh, ok.w_hh), ShapeError);
  EXPECT_THROW(gru(ok.X, ok.h0.narrow(1, 0, 3), ok.w_ih, ok.w_hh), ShapeError);
  EXPECT_THROW(gru(ok.X, ok.h0, ok.w_ih, ok.w_hh, ok.b_ih.narrow(0, 0, 5)), ShapeError);
  EXPECT_THROW(gru(ok.X, ok.h0.to(DType::f64), ok.w_ih, ok.w_hh), DTypeError);
  try {
    gru(ok.X, ok.h0, ok.w_hh, ok.w_hh);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gru: w_ih must be (3H, I)"), std::string::npos)
        << e.what();
  }
}
