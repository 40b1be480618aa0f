#include "attn/optim/optimizer.h"

#include <cmath>

#include "attn/core/threads.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;

TEST(SGD, StepsAgainstTheGradient) {
  Tensor p = tensor({1.0f, -2.0f});
  p.requires_grad_();
  sum(mul(p, p)).backward();  // grad = 2p
  optim::SGD sgd({p}, 0.25);
  sgd.step();
  EXPECT_EQ(to_vector<float>(p), (std::vector<float>{0.5f, -1.0f}));
  sgd.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

// Two Adam steps computed by hand with torch.optim.Adam's formula.
TEST(Adam, MatchesTheReferenceFormula) {
  Tensor p = tensor({0.5f});
  p.requires_grad_();
  optim::Adam adam({p}, 0.1);
  double x = 0.5, m = 0, v = 0;
  for (int t = 1; t <= 2; ++t) {
    p.zero_grad();
    sum(mul(p, p)).backward();
    adam.step();
    double g = 2 * x;
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    x -= 0.1 * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.999, t))) + 1e-8);
    EXPECT_NEAR(p.item<float>(), x, 1e-6);
  }
  EXPECT_THROW(optim::Adam({p}, -1.0), ValueError);
}

TEST(ClipGradNorm, ScalesOnlyAboveTheThreshold) {
  Tensor a = tensor({3.0f}), b = tensor({4.0f});
  a.set_grad(tensor({3.0f}));
  b.set_grad(tensor({4.0f}));
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm({a, b}, 1.0), 5.0);
  EXPECT_NEAR(a.grad().item<float>(), 0.6, 1e-6);
  EXPECT_NEAR(b.grad().item<float>(), 0.8, 1e-6);
  EXPECT_NEAR(optim::clip_grad_norm({a, b}, 10.0), 1.0, 1e-6);
  EXPECT_NEAR(a.grad().item<float>(), 0.6, 1e-6);
}

namespace {

// Parameters of odd sizes, one above the parallel grain, with gradients.
std::vector<Tensor> params_with_grads(std::uint64_t seed) {
  std::vector<Tensor> ps;
  const std::vector<Shape> shapes = {{7}, {33, 17}, {301, 123}, {1}, {5, 3}};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    Tensor p = attn::testing::rand32(shapes[i], seed + i);
    p.set_grad(attn::testing::rand32(shapes[i], seed + 100 + i, -3.0, 3.0));
    ps.push_back(p);
  }
  return ps;
}

std::vector<Tensor> clones(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (const auto& p : ps) {
    Tensor c = p.clone();
    c.set_grad(p.grad().clone());
    out.push_back(c);
  }
  return out;
}

// Copies with copies of their gradients (where they have one).
std::vector<Tensor> clones_or_plain(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (const auto& p : ps) {
    Tensor c = p.clone();
    if (p.grad().defined()) c.set_grad(p.grad().clone());
    out.push_back(c);
  }
  return out;
}

}  // namespace

// The fused path the trainer takes (grad_norm, then Adam::step_scaled) gives
// bit for bit what clip_grad_norm and Adam::step give, on 1 and 2 threads,
// for steps that clip and steps that do not.
TEST(Adam, StepScaledEqualsClipThenStepExactly) {
  const int saved = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (double max_norm : {1.0, 1e9}) {
      std::vector<Tensor> a = params_with_grads(11), b = clones(a);
      optim::Adam adam_a(a, 1e-3, 0.9, 0.98, 1e-9), adam_b(b, 1e-3, 0.9, 0.98, 1e-9);
      for (int step = 0; step < 3; ++step) {
        // New gradients each step, the same on both sides (as a backward pass).
        for (std::size_t k = 0; k < a.size(); ++k) {
          Tensor g = attn::testing::rand32(a[k].shape(), 1000 + 10 * step + k, -3.0, 3.0);
          a[k].set_grad(g.clone());
          b[k].set_grad(g.clone());
        }
        const double n_a = optim::clip_grad_norm(a, max_norm);
        adam_a.step();
        const double n_b = optim::grad_norm(b);
        EXPECT_EQ(n_a, n_b);
        adam_b.step_scaled(n_b > max_norm ? max_norm / n_b : 1.0);
        for (std::size_t k = 0; k < a.size(); ++k) {
          EXPECT_EQ(to_vector<float>(a[k]), to_vector<float>(b[k])) << "param " << k;
          EXPECT_EQ(to_vector<float>(adam_a.exp_avg_sq()[k]),
                    to_vector<float>(adam_b.exp_avg_sq()[k]));
        }
      }
    }
  }
  set_num_threads(saved);
  std::vector<Tensor> p = params_with_grads(3);
  optim::Adam adam(p, 1e-3);
  EXPECT_THROW(adam.step_scaled(0.0), ValueError);
  EXPECT_THROW(adam.step_scaled(std::nan("")), ValueError);
}

// grad_norm: the same value on 1 and 2 threads, equal to a plain f64 sum.
TEST(GradNorm, IndependentOfThreadsAndMatchesAPlainSum) {
  const int saved = get_num_threads();
  std::vector<Tensor> ps = params_with_grads(21);
  double plain = 0;
  for (const auto& p : ps)
    for (float g : to_vector<float>(p.grad())) plain += static_cast<double>(g) * g;
  set_num_threads(1);
  const double one = optim::grad_norm(ps);
  set_num_threads(2);
  const double two = optim::grad_norm(ps);
  set_num_threads(saved);
  EXPECT_EQ(one, two);
  EXPECT_NEAR(one, std::sqrt(plain), 1e-12 * std::sqrt(plain));
  Tensor no_grad = tensor({1.0f});
  EXPECT_EQ(optim::grad_norm({no_grad}), 0.0);
}

// Adam's step treats the f32 parameters' elements as one range split over
// the threads across parameter boundaries: the same bits on 1 and 2 threads,
// the same as each parameter stepped by an Adam of its own, and within f32
// rounding of the formula in double; an empty parameter, one without a
// gradient (untouched) and an f64 one (stepped apart) among them.
TEST(Adam, OneRangeOverAllParametersEqualsEachAlone) {
  const int saved = get_num_threads();
  std::vector<Tensor> base = params_with_grads(31);
  base.push_back(attn::testing::rand32({0, 4}, 7));
  base.back().set_grad(attn::testing::rand32({0, 4}, 8));
  base.push_back(attn::testing::rand32({40, 3}, 9));  // no gradient
  base.push_back(attn::testing::leaf64({6, 5}, 10).detach());
  base.back().set_grad(attn::testing::leaf64({6, 5}, 11).detach());
  std::vector<Tensor> results[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<Tensor> ps = clones_or_plain(base);
    optim::Adam adam(ps, 1e-2, 0.9, 0.98, 1e-9);
    adam.step_scaled(0.5);
    adam.step_scaled(0.5);
    results[threads - 1] = ps;
  }
  set_num_threads(saved);
  for (std::size_t k = 0; k < base.size(); ++k) {
    SCOPED_TRACE(k);
    const Tensor& one = results[0][k];
    EXPECT_EQ(max_abs_diff(one, results[1][k]), 0.0);
    std::vector<Tensor> alone = clones_or_plain({base[k]});
    optim::Adam single(alone, 1e-2, 0.9, 0.98, 1e-9);
    single.step_scaled(0.5);
    single.step_scaled(0.5);
    EXPECT_EQ(max_abs_diff(one, alone[0]), 0.0);
    if (!base[k].grad().defined()) {
      EXPECT_EQ(max_abs_diff(one, base[k]), 0.0);
      continue;
    }
    const std::vector<double> p0 = to_vector<double>(base[k].to(DType::f64)),
                              g = to_vector<double>(base[k].grad().to(DType::f64)),
                              got = to_vector<double>(one.to(DType::f64));
    for (std::size_t i = 0; i < p0.size(); ++i) {
      double x = p0[i], m = 0, v = 0;
      for (int t = 1; t <= 2; ++t) {
        const double gi = 0.5 * g[i];
        m = 0.9 * m + 0.1 * gi;
        v = 0.98 * v + 0.02 * gi * gi;
        x -= 1e-2 * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.98, t))) + 1e-9);
      }
      ASSERT_NEAR(got[i], x, 1e-6 * (1 + std::fabs(x))) << "element " << i;
    }
  }
}
