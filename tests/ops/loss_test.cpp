#include "attn/ops/loss.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "attn/ops/softmax.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;
using attn::testing::rand32;

namespace {
using Inputs = std::vector<Tensor>;

// One-hot (..., C) in `dt` from integer labels (...).
Tensor one_hot(const Tensor& labels, std::int64_t c, DType dt) {
  auto lab = to_vector<std::int64_t>(labels);
  std::vector<double> v(lab.size() * c, 0.0);
  for (std::size_t i = 0; i < lab.size(); ++i) v[i * c + lab[i]] = 1.0;
  Shape shape = labels.shape();
  shape.push_back(c);
  return from_vector<double>(v, shape).to(dt);
}

// The composite reference: -sum_c onehot * log_softmax.
Tensor cross_entropy_composite(const Tensor& logits, const Tensor& labels) {
  return neg(sum(mul(one_hot(labels, logits.size(-1), logits.dtype()), log_softmax(logits)), {-1}));
}

Tensor random_labels(const Shape& shape, std::int64_t c, std::uint64_t seed,
                     DType dt = DType::i64) {
  Generator gen(seed);
  return randint(0, c, shape, gen, dt);
}
}  // namespace

// d2l 10.7 (MaskedSoftmaxCELoss): loss(ones(3, 4, 10), ones(3, 4), valid_len [4, 2, 0]).
TEST(CrossEntropy, D2lMaskedSoftmaxCELossGolden) {
  Tensor pred = ones({3, 4, 10});
  Tensor label = ones({3, 4}, DType::i64);
  Tensor mask = from_vector<float>({1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, {3, 4});
  Tensor loss = mean(cross_entropy(pred, label, mask), {1});
  auto v = to_vector<float>(loss);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_NEAR(v[0], 2.3026f, 1e-4);
  EXPECT_NEAR(v[1], 1.1513f, 1e-4);
  EXPECT_EQ(v[2], 0.0f);
}

TEST(CrossEntropy, MatchesCompositeReferenceOnOddSizes) {
  for (const Shape& shape :
       std::vector<Shape>{{1, 1}, {3, 7}, {2, 5, 13}, {37, 1001}, {3, 4, 2, 257}}) {
    SCOPED_TRACE(shape_str(shape));
    Shape pos(shape.begin(), shape.end() - 1);
    Tensor x32 = rand32(shape, 1, -6.0, 6.0);
    Tensor lab = random_labels(pos, shape.back(), 2);
    Tensor x64 = x32.to(DType::f64);
    EXPECT_LT(max_abs_diff(cross_entropy(x64, lab), cross_entropy_composite(x64, lab)), 1e-12);
    EXPECT_LT(max_abs_diff(cross_entropy(x32, lab), cross_entropy_composite(x64, lab)), 5e-6);
    Tensor lab32 = lab.to(DType::i32);
    EXPECT_EQ(max_abs_diff(cross_entropy(x32, lab32), cross_entropy(x32, lab)), 0.0);
  }
}

// Rows go in blocks of 16 whose sums are finished side by side: each row's
// loss is the one it has alone, whatever its place in a block.
TEST(CrossEntropy, RowsInBlocksSameBitsAsOneRow) {
  for (std::int64_t c : {1, 16, 201, 1001})
    for (std::int64_t rows : {16, 37}) {
      Tensor x = rand32({rows, c}, 3, -6.0, 6.0);
      Tensor lab = random_labels({rows}, c, 4);
      const auto all = to_vector<float>(cross_entropy(x, lab, Tensor(), Reduction::none));
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto one = to_vector<float>(
            cross_entropy(x.narrow(0, r, 1), lab.narrow(0, r, 1), Tensor(), Reduction::none));
        ASSERT_EQ(std::bit_cast<std::uint32_t>(one[0]),
                  std::bit_cast<std::uint32_t>(all[static_cast<std::size_t>(r)]))
            << "row " << r << " of " << rows << ", " << c << " classes";
      }
    }
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  Tensor x = from_vector<float>({1000, 0, -1000, 5e5, 5e5 + 1, 5e5 + 2}, {2, 3});
  Tensor lab = from_vector<std::int64_t>({2, 0}, {2});
  auto v = to_vector<float>(cross_entropy(x, lab));
  EXPECT_NEAR(v[0], 2000.0f, 1e-2);
  EXPECT_NEAR(v[1], 2.0f + std::log(1 + std::exp(-1.0f) + std::exp(-2.0f)), 1e-5);
}

TEST(CrossEntropy, ReductionsAndWeights) {
  Tensor x = rand32({4, 6, 9}, 3).to(DType::f64);
  Tensor lab = random_labels({4, 6}, 9, 4);
  Tensor w = rand32({4, 6}, 5, 0.0, 1.0).to(DType::f64);
  Tensor per = cross_entropy(x, lab, w);
  EXPECT_LT(max_abs_diff(per, mul(cross_entropy_composite(x, lab), w)), 1e-12);
  EXPECT_NEAR(cross_entropy(x, lab, w, Reduction::sum).item<double>(), sum(per).item<double>(),
              1e-12);
  EXPECT_NEAR(cross_entropy(x, lab, w, Reduction::mean).item<double>(), mean(per).item<double>(),
              1e-12);
  EXPECT_EQ(cross_entropy(x, lab, Tensor(), Reduction::mean).dim(), 0);
  // Broadcast weights: one weight per sequence position.
  Tensor wpos = rand32({6}, 6, 0.0, 1.0).to(DType::f64);
  EXPECT_LT(max_abs_diff(cross_entropy(x, lab, wpos), mul(cross_entropy(x, lab), wpos)), 1e-15);
}

TEST(CrossEntropy, BackwardIsSoftmaxMinusOneHot) {
  Tensor x = rand32({37, 1001}, 7, -4.0, 4.0).to(DType::f64);
  Tensor lab = random_labels({37}, 1001, 8, DType::i32);
  Tensor w = rand32({37}, 9, 0.0, 2.0).to(DType::f64);
  x.requires_grad_();
  cross_entropy(x, lab, w, Reduction::sum).backward();
  Tensor want = mul(sub(softmax(x.detach()), one_hot(lab, 1001, DType::f64)), w.reshape({37, 1}));
  EXPECT_LT(max_abs_diff(x.grad(), want), 1e-15);

  Tensor x32 = x.detach().to(DType::f32);
  x32.requires_grad_();
  cross_entropy(x32, lab, w.to(DType::f32), Reduction::sum).backward();
  EXPECT_LT(max_abs_diff(x32.grad(), want), 1e-6);
}

TEST(CrossEntropy, Gradcheck) {
  Tensor x = leaf64({3, 4, 7}, 11, -3.0, 3.0);
  Tensor lab = random_labels({3, 4}, 7, 12);
  Tensor w = leaf64({3, 4}, 13, 0.0, 1.0);
  EXPECT_GRADCHECK([lab](const Inputs& v) { return cross_entropy(v[0], lab); }, {x});
  EXPECT_GRADCHECK([lab](const Inputs& v) { return cross_entropy(v[0], lab, v[1]); },
                   (Inputs{x, w}));
  EXPECT_GRADCHECK(
      [lab](const Inputs& v) { return cross_entropy(v[0], lab, v[1], Reduction::mean); },
      (Inputs{x, w}));
  EXPECT_GRADCHECK(
      [lab](const Inputs& v) { return cross_entropy(v[0], lab, Tensor(), Reduction::sum); }, {x});
  // Permuted logits (classes strided) and a broadcast weight.
  Tensor xp = leaf64({7, 3, 4}, 14, -3.0, 3.0);
  Tensor wb = leaf64({4}, 15, 0.0, 1.0);
  EXPECT_GRADCHECK(
      [lab](const Inputs& v) {
        return cross_entropy(v[0].permute({1, 2, 0}), lab, v[1]);
      },
      (Inputs{xp, wb}));
  // d2l's masked loss, through the mean over time steps.
  Tensor mask = from_vector<double>({1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, {3, 4});
  EXPECT_GRADCHECK(
      [lab, mask](const Inputs& v) { return mean(cross_entropy(v[0], lab, mask), {1}); }, {x});
}

// Label smoothing: against the composite -sum_c target_c log_softmax_c with
// target = (1 - eps) onehot + eps / C, a value computed by hand, the
// gradient softmax - target, and the gradcheck.
TEST(CrossEntropy, LabelSmoothing) {
  // Hand-computed: logits (0, ln 2, ln 5) -> softmax (1/8, 2/8, 5/8), label 2,
  // eps 0.3: loss = -(0.1 ln(1/8) + 0.1 ln(2/8) + 0.8 ln(5/8)).
  Tensor x = from_vector<double>({0.0, std::log(2.0), std::log(5.0)}, {1, 3});
  Tensor lab = from_vector<std::int64_t>({2}, {1});
  const double want =
      -(0.1 * std::log(1.0 / 8) + 0.1 * std::log(2.0 / 8) + 0.8 * std::log(5.0 / 8));
  Tensor nll;
  EXPECT_NEAR(cross_entropy(x, lab, Tensor(), Reduction::sum, 0.3, &nll).item<double>(), want,
              1e-14);
  EXPECT_NEAR(nll.item<double>(), -std::log(5.0 / 8), 1e-14);

  const std::int64_t c = 53;
  Tensor xs = rand32({4, 5, c}, 21, -3.0, 3.0).to(DType::f64);
  Tensor labs = random_labels({4, 5}, c, 22);
  for (double eps : {0.0, 0.1, 0.5}) {
    Tensor target = add(mul(one_hot(labs, c, DType::f64), 1.0 - eps), eps / c);
    Tensor composite = neg(sum(mul(target, log_softmax(xs)), {-1}));
    EXPECT_LT(max_abs_diff(cross_entropy(xs, labs, Tensor(), Reduction::none, eps), composite),
              1e-12)
        << eps;
    Tensor xg = xs.detach();
    xg.requires_grad_();
    cross_entropy(xg, labs, Tensor(), Reduction::sum, eps).backward();
    EXPECT_LT(max_abs_diff(xg.grad(), sub(softmax(xs), target)), 1e-14) << eps;
  }
  // eps = 0 is the plain loss, bit for bit.
  Tensor x32 = rand32({9, 41}, 23, -4.0, 4.0);
  Tensor l32 = random_labels({9}, 41, 24);
  EXPECT_EQ(max_abs_diff(cross_entropy(x32, l32, Tensor(), Reduction::none, 0.0),
                         cross_entropy(x32, l32)),
            0.0);
  Tensor xl = leaf64({3, 4, 7}, 25, -3.0, 3.0);
  Tensor ll = random_labels({3, 4}, 7, 26);
  Tensor w = leaf64({3, 4}, 27, 0.0, 1.0);
  EXPECT_GRADCHECK(
      [ll](const Inputs& v) { return cross_entropy(v[0], ll, v[1], Reduction::sum, 0.2); },
      (Inputs{xl, w}));
  EXPECT_THROW(cross_entropy(xl, ll, Tensor(), Reduction::sum, 1.0), ValueError);
  EXPECT_THROW(cross_entropy(xl, ll, Tensor(), Reduction::sum, -0.1), ValueError);
}

TEST(CrossEntropy, ErrorsNameTheProblem) {
  try {
    cross_entropy(zeros({2, 10}), from_vector<std::int64_t>({3, 12}, {2}));
    FAIL() << "no throw";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(),
                 "cross_entropy: label 12 at position 1 is out of range [0, 10) for 10 classes");
  }
  EXPECT_THROW(cross_entropy(zeros({2, 10}), from_vector<std::int32_t>({-1, 0}, {2})), ValueError);
  EXPECT_THROW(cross_entropy(zeros({2, 10}), zeros({3}, DType::i64)), ShapeError);
  EXPECT_THROW(cross_entropy(zeros({2, 10}), zeros({2}, DType::f32)), DTypeError);
  EXPECT_THROW(cross_entropy(zeros({2, 10}), zeros({2}, DType::i64), ones({3})), ShapeError);
  EXPECT_THROW(cross_entropy(zeros({2, 10}), zeros({2}, DType::i64), ones({2}, DType::f64)),
               DTypeError);
  EXPECT_THROW(cross_entropy(zeros({2, 10}, DType::i64), zeros({2}, DType::i64)), DTypeError);
}
