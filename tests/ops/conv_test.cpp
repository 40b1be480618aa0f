#include "attn/ops/conv.h"

#include <map>

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;
using attn::testing::rand32;

namespace {
using Inputs = std::vector<Tensor>;

struct Case {
  std::int64_t B, n, d_in, d_out, k;
};
// Odd sizes, kernels wider than the sequence, even kernels, n = 1.
const Case kCases[] = {{1, 1, 1, 1, 1},   {2, 7, 3, 5, 3},    {3, 13, 5, 2, 5},
                       {1, 4, 2, 3, 7},   {2, 9, 4, 4, 2},    {1, 11, 3, 6, 4},
                       {5, 31, 17, 9, 3}, {2, 65, 33, 47, 9}, {3, 129, 70, 65, 5}};
}  // namespace

// Known values: k = 3 on one channel is a moving weighted sum with zero padding.
TEST(Conv1d, KnownValues) {
  Tensor X = from_vector<float>({1, 2, 3, 4}, {1, 4, 1});
  Tensor w = from_vector<float>({1, 10, 100}, {1, 1, 3});  // w[0] reads t - 1, w[2] reads t + 1
  Tensor b = from_vector<float>({0.5f}, {1});
  // t=0: 10*1 + 100*2, t=1: 1 + 20 + 300, t=2: 2 + 30 + 400, t=3: 3 + 40
  std::vector<float> want = {210.5f, 321.5f, 432.5f, 43.5f};
  EXPECT_EQ(to_vector<float>(conv1d(X, w, b)), want);
  EXPECT_EQ(to_vector<float>(conv1d_reference(X, w, b)), want);
  // An even kernel pads k/2 - 1 on the left, k/2 on the right (PyTorch's padding='same'):
  // w[0] reads t, w[1] reads t + 1.
  Tensor w2 = from_vector<float>({1, 10}, {1, 1, 2});
  EXPECT_EQ(to_vector<float>(conv1d(X, w2)), (std::vector<float>{21, 32, 43, 4}));
}

// Golden values from PyTorch 1.13: torch.nn.functional.conv1d(x.transpose(1, 2),
// w, b, padding='same').transpose(1, 2) on x[i] = sin(0.37 i + 0.1) (2, 7, 3),
// w[i] = cos(0.53 i + 0.2) (4, 3, k), b[o] = 0.1 o - 0.15, in f64; rows 0, 3
// and 6 of batch element 1. k = 4 checks the even kernel's padding.
TEST(Conv1d, MatchesPyTorchPaddingSame) {
  const std::map<std::int64_t, std::vector<std::vector<double>>> want = {
      {3,
       {{-0.4206993908, 1.4826643302, 0.4971984283, -1.331165714},
        {0.3428410624, -2.2639580654, -0.6977967366, 2.2778430554},
        {-0.6961359477, 1.5978863161, 0.7859037546, -1.4131408818}}},
      {4,
       {{-0.4563916682, -0.4375298917, -0.4163826204, -0.3924848126},
        {0.290835796, 0.4581724899, 0.6225121876, 0.7834754395},
        {-0.2166457669, -0.1386408629, -0.0601131909, 0.0190638843}}}};
  for (const auto& [k, rows] : want) {
    std::vector<double> x(2 * 7 * 3), w(4 * 3 * k), b(4);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * i + 0.1);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.53 * i + 0.2);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.1 * i - 0.15;
    Tensor y = conv1d(from_vector(x, {2, 7, 3}), from_vector(w, {4, 3, k}), from_vector(b, {4}));
    for (std::size_t r = 0; r < 3; ++r)
      for (std::int64_t o = 0; o < 4; ++o)
        EXPECT_NEAR(y.at({1, static_cast<std::int64_t>(3 * r), o}), rows[r][o], 1e-9)
            << "k " << k << " row " << 3 * r << " channel " << o;
  }
}

// Fast path against the loops: f64 to 1e-12 (the same sums in another
// order), f32 to 1e-5 relative to the largest output (oneDNN's f32 product
// against a double accumulation of k * d_in terms).
TEST(Conv1d, FastMatchesReference) {
  std::uint64_t seed = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(fmt::format("B={} n={} d_in={} d_out={} k={}", c.B, c.n, c.d_in, c.d_out, c.k));
    Tensor X = rand32({c.B, c.n, c.d_in}, seed++, -2.0, 2.0);
    Tensor w = rand32({c.d_out, c.d_in, c.k}, seed++), b = rand32({c.d_out}, seed++);
    Tensor ref = conv1d_reference(X.to(DType::f64), w.to(DType::f64), b.to(DType::f64));
    Tensor fast64 = conv1d(X.to(DType::f64), w.to(DType::f64), b.to(DType::f64));
    EXPECT_LT(max_abs_diff(fast64, ref), 1e-12);
    const double scale = std::max(1.0, max_abs_diff(ref, zeros_like(ref)));
    EXPECT_LT(max_abs_diff(conv1d(X, w, b), ref.to(DType::f32)) / scale, 1e-5);
    EXPECT_LT(max_abs_diff(conv1d(X, w), conv1d_reference(X, w)) / scale, 1e-5);
  }
}

// A strided (permuted) input reads the same as its contiguous copy.
TEST(Conv1d, StridedInput) {
  Tensor Xt = rand32({2, 6, 9}, 40);  // (B, d_in, n), PyTorch's layout
  Tensor X = Xt.permute({0, 2, 1});
  Tensor w = rand32({4, 6, 3}, 41), b = rand32({4}, 42);
  EXPECT_EQ(to_vector<float>(conv1d(X, w, b)), to_vector<float>(conv1d(X.contiguous(), w, b)));
}

TEST(Conv1d, Gradcheck) {
  for (const Case& c :
       {Case{2, 5, 3, 4, 3}, Case{1, 6, 2, 3, 4}, Case{2, 3, 2, 2, 5}, Case{1, 1, 1, 1, 1}}) {
    SCOPED_TRACE(fmt::format("n={} k={}", c.n, c.k));
    Tensor X = leaf64({c.B, c.n, c.d_in}, 50 + c.k, -2.0, 2.0);
    Tensor w = leaf64({c.d_out, c.d_in, c.k}, 60 + c.k), b = leaf64({c.d_out}, 70 + c.k);
    EXPECT_GRADCHECK([](const Inputs& v) { return conv1d(v[0], v[1], v[2]); }, (Inputs{X, w, b}));
    EXPECT_GRADCHECK([](const Inputs& v) { return conv1d(v[0], v[1]); }, (Inputs{X, w}));
    Tensor Xc = X.detach();
    EXPECT_GRADCHECK([Xc](const Inputs& v) { return conv1d(Xc, v[0], v[1]); }, (Inputs{w, b}));
  }
  // A permuted input, and the gradient through a stack of two layers.
  Tensor Xt = leaf64({2, 3, 5}, 80);
  Tensor w = leaf64({3, 3, 3}, 81), b = leaf64({3}, 82);
  EXPECT_GRADCHECK(
      [](const Inputs& v) {
        Tensor h = conv1d(v[0].permute({0, 2, 1}), v[1], v[2]);
        return conv1d(tanh(h), v[1], v[2]);
      },
      (Inputs{Xt, w, b}));
}

// The fused backward on a larger f32 case against autograd through the f64 op.
TEST(Conv1d, BackwardF32MatchesF64) {
  Tensor X0 = rand32({3, 57, 19}, 90), w0 = rand32({23, 19, 5}, 91), b0 = rand32({23}, 92);
  Tensor g = rand32({3, 57, 23}, 93);
  auto grads = [&](DType dt) {
    Tensor X = X0.to(dt).clone(), w = w0.to(dt).clone(), b = b0.to(dt).clone();
    X.requires_grad_();
    w.requires_grad_();
    b.requires_grad_();
    conv1d(X, w, b).backward(g.to(dt));
    return std::vector<Tensor>{X.grad(), w.grad(), b.grad()};
  };
  auto g32 = grads(DType::f32), g64 = grads(DType::f64);
  for (int i = 0; i < 3; ++i) EXPECT_LT(max_abs_diff(g32[i].to(DType::f64), g64[i]), 1e-4) << i;
}

TEST(Conv1d, EmptyBatchOrSequence) {
  Tensor w = ones({2, 3, 3}), b = ones({2});
  EXPECT_EQ(conv1d(zeros({0, 4, 3}), w, b).shape(), (Shape{0, 4, 2}));
  Tensor X = zeros({2, 0, 3});
  X.requires_grad_();
  Tensor y = conv1d(X, w, b);
  EXPECT_EQ(y.shape(), (Shape{2, 0, 2}));
  sum(y).backward();
  EXPECT_EQ(X.grad().shape(), X.shape());
}

TEST(Conv1d, ErrorsNameTheProblem) {
  try {
    conv1d(zeros({2, 5, 4}), zeros({3, 6, 3}));
    FAIL() << "no throw";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(
        e.what(),
        "conv1d: the weight [3, 6, 3] expects d_in = 6 channels, the input [2, 5, 4] has 4");
  }
  try {
    conv1d(zeros({2, 5, 4}), zeros({3, 4, 3}), zeros({4}));
    FAIL() << "no throw";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "conv1d: expected a bias (3) for weight [3, 4, 3], got [4]");
  }
  EXPECT_THROW(conv1d(zeros({5, 4}), zeros({3, 4, 3})), ShapeError);
  EXPECT_THROW(conv1d(zeros({2, 5, 4}), zeros({3, 4})), ShapeError);
  EXPECT_THROW(conv1d(zeros({2, 5, 4}), zeros({3, 4, 0})), ShapeError);
  EXPECT_THROW(conv1d(zeros({2, 5, 4}), zeros({3, 4, 3}, DType::f64)), DTypeError);
  EXPECT_THROW(conv1d(zeros({2, 5, 4}, DType::i32), zeros({3, 4, 3}, DType::i32)), DTypeError);
  EXPECT_THROW(conv1d_reference(zeros({2, 5, 4}), zeros({3, 5, 3})), ShapeError);
}
