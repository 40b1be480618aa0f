// A Linear layer's forward product on attn's own kernel while training, where
// detail::linear_on_f32_kernel() says so (a CPU without AVX-512:
// src/ops/linear.cpp): on random operands of odd sizes, with and without the
// bias and the ReLU, the bits of the kernel's plain reference
// (f32_gemm_reference); the same bits on one thread as on two, and for a row
// whatever rows come with it; the gradients still flow. Everywhere, the
// product against the product in double within f32's rounding.
#include <cmath>
#include <cstring>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/core/threads.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"
#include "kernels/gemm/f32_gemm.h"
#include "ops/matmul_internal.h"
#include "testing.h"

using namespace attn;
using attn::testing::rand32;
using attn::testing::same_bits;

namespace {

// y = x @ w^T (+ b) (then the ReLU) by the kernel's plain reference.
std::vector<float> reference(const Tensor& x, const Tensor& w, const Tensor& b, bool relu) {
  const std::int64_t N = w.size(0), K = w.size(1), M = x.numel() / K;
  const Tensor xc = x.detach().contiguous(), wc = w.detach().contiguous();
  std::vector<float> y(static_cast<std::size_t>(M * N));
  const detail::F32GemmArgs a{.x = xc.data<float>(),
                              .ldx = K,
                              .packed = nullptr,
                              .bias = b.defined() ? b.data<float>() : nullptr,
                              .relu = relu,
                              .M = M,
                              .K = K,
                              .N = N,
                              .y = y.data()};
  detail::f32_gemm_reference(a, wc.data<float>());
  return y;
}

bool equal_bits(const Tensor& y, const std::vector<float>& ref) {
  const Tensor yc = y.detach().contiguous();
  return yc.numel() == static_cast<std::int64_t>(ref.size()) &&
         std::memcmp(yc.data<float>(), ref.data(), ref.size() * sizeof(float)) == 0;
}

// |y - ref| <= 1e-5 (|x| |W|^T + |b|) against the product in double.
void expect_close(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, bool relu) {
  const Tensor x64 = x.detach().to(DType::f64).reshape({-1, w.size(1)}),
               w64 = w.detach().to(DType::f64).transpose(0, 1);
  Tensor ref = matmul_reference(x64, w64), scale = matmul_reference(abs(x64), abs(w64));
  if (b.defined()) {
    ref = add(ref, b.detach().to(DType::f64));
    scale = add(scale, abs(b.detach().to(DType::f64)));
  }
  if (relu) ref = attn::relu(ref);
  const std::vector<float> vy = to_vector<float>(y.detach().contiguous());
  const std::vector<double> vr = to_vector<double>(ref), vs = to_vector<double>(scale);
  ASSERT_EQ(vy.size(), vr.size());
  for (std::size_t i = 0; i < vy.size(); ++i)
    ASSERT_LE(std::fabs(double(vy[i]) - vr[i]), 1e-5 * vs[i] + 1e-30) << "element " << i;
}

TEST(LinearKernel, TrainingForwardOnRandomOperandsOfOddSizes) {
  const bool kernel = detail::linear_on_f32_kernel();
  std::printf("  forward products on attn's kernel while training: %s\n", kernel ? "yes" : "no");
  std::uint64_t seed = 100;
  int on_kernel = 0;
  // M from 16 rows (fewer stay on oneDNN), products from 2^15 multiply-adds;
  // N across one column group, two, and a partial last one; a product from
  // 2^19 on shares the threads by rows (N 33: 2 groups) or by groups (N 257).
  for (std::int64_t M : {16, 17, 130, 1100})
    for (std::int64_t K : {7, 33, 131})
      for (std::int64_t N : {5, 33, 257}) {
        const Tensor w = rand32({N, K}, seed++).requires_grad_(true),
                     b = rand32({N}, seed++).requires_grad_(true), x = rand32({M, K}, seed++);
        for (int variant = 0; variant < 4; ++variant) {
          const bool with_bias = variant & 1, relu = variant & 2;
          SCOPED_TRACE(::testing::Message() << "M " << M << " K " << K << " N " << N
                                            << (with_bias ? " bias" : "") << (relu ? " relu" : ""));
          const Tensor bias = with_bias ? b : Tensor();
          const Tensor y = relu ? linear_relu(x, w, bias) : linear(x, w, bias);
          ASSERT_TRUE(y.requires_grad());
          expect_close(y, x, w, bias, relu);
          if (kernel && M * N * K >= (std::int64_t(1) << 15)) {
            ASSERT_TRUE(
                equal_bits(y, reference(x, w, bias.defined() ? bias.detach() : Tensor(), relu)));
            ++on_kernel;
          }
        }
      }
  if (kernel) {
    EXPECT_GT(on_kernel, 60);
  }
}

// The kernel's rows do not depend on how the rows are shared out: one thread
// and two give the same bits, and so does a row computed with others or
// with a few.
TEST(LinearKernel, SameBitsOnOneThreadAsOnTwoAndForEveryRowCount) {
  const Tensor w = rand32({257, 131}, 1).requires_grad_(true), b = rand32({257}, 2),
               x = rand32({1100, 131}, 3);
  const Tensor w2 = rand32({33, 131}, 4).requires_grad_(true);
  const int threads = get_num_threads();
  set_num_threads(2);
  const Tensor two = linear_relu(x, w, b), two_narrow = linear(x, w2);
  set_num_threads(1);
  const Tensor one = linear_relu(x, w, b), one_narrow = linear(x, w2);
  set_num_threads(threads);
  EXPECT_TRUE(same_bits(one.detach(), two.detach()));
  EXPECT_TRUE(same_bits(one_narrow.detach(), two_narrow.detach()));
  if (!detail::linear_on_f32_kernel()) GTEST_SKIP() << "forward products stay on oneDNN here";
  // Rows 500..519 of the 1100, computed as a product of 20 rows.
  const Tensor part = linear_relu(x.slice(0, 500, 520), w, b);
  EXPECT_TRUE(same_bits(part.detach(), two.detach().slice(0, 500, 520).contiguous()));
}

// The backward is the layer's as before: the gradients of x, W and b against
// those of the product in double.
TEST(LinearKernel, GradientsFlow) {
  const Tensor w = rand32({33, 131}, 5).requires_grad_(true),
               b = rand32({33}, 6).requires_grad_(true),
               x = rand32({130, 131}, 7).requires_grad_(true);
  sum(linear_relu(x, w, b)).backward();
  const Tensor w64 = w.detach().to(DType::f64).requires_grad_(true),
               b64 = b.detach().to(DType::f64).requires_grad_(true),
               x64 = x.detach().to(DType::f64).requires_grad_(true);
  sum(linear_relu(x64, w64, b64)).backward();
  EXPECT_LT(max_abs_diff(x.grad().to(DType::f64), x64.grad()), 1e-4);
  EXPECT_LT(max_abs_diff(w.grad().to(DType::f64), w64.grad()), 1e-3);
  EXPECT_LT(max_abs_diff(b.grad().to(DType::f64), b64.grad()), 1e-4);
}

}  // namespace
