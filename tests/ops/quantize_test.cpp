// int8 weights (ops/quantize.h): the integer loops' int32 sums equal the
// plain reference's exactly; linear_int8's f32 results (the VNNI or the AVX2
// kernel, or the loops) equal the reference bit for bit; both stay within
// the bound the quantization step allows of the f32 product; the scope, its
// bypasses, the combination with bf16 and the errors. Run three times by
// CTest: as is (the best kernel of this CPU), with ATTN_NO_VNNI=1 (AVX2's
// kernel on a CPU with VNNI), and with ATTN_ISA=portable (the fallback: no
// scope, the integer loops).
#include "attn/ops/quantize.h"

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/ops/precision.h"
#include "attn/ops/reduce.h"
#include "kernels/gemm/int8_gemm.h"
#include "ops/quantize_internal.h"
#include "testing.h"

using namespace attn;
using attn::testing::rand32;
using attn::testing::same_bits;

namespace {

const std::int64_t kSizes[] = {1, 3, 17, 33, 257};

// ATTN_ISA names a set without the int8 kernels (portable).
bool forced_off() {
  const char* v = std::getenv("ATTN_ISA");
  return v != nullptr && *v != '\0' && std::string(v) != "avx2" && std::string(v) != "avx512";
}

// Inputs with the rows that matter to a per-row quantization: random
// values, then (where there are rows enough) a zero row, a row with one huge
// value, a negative-only row, a row of values below the zero threshold, a
// row of widely spread magnitudes.
Tensor odd_rows(std::int64_t M, std::int64_t K, std::uint64_t seed) {
  Tensor x = rand32({M, K}, seed, -2.0, 2.0).contiguous();
  float* p = x.data<float>();
  auto row = [&](std::int64_t m) { return p + m * K; };
  if (M > 1) std::fill(row(1), row(1) + K, 0.0f);
  if (M > 2) row(2)[K / 2] = 1e6f;
  if (M > 3)
    for (std::int64_t k = 0; k < K; ++k) row(3)[k] = -std::fabs(row(3)[k]) - 0.01f;
  if (M > 4)
    for (std::int64_t k = 0; k < K; ++k) row(4)[k] = 1e-31f * static_cast<float>(k % 7 - 3);
  if (M > 5)
    for (std::int64_t k = 0; k < K; ++k)
      row(5)[k] *= std::pow(10.0f, static_cast<float>(k % 9 - 4));
  return x;
}

class Int8 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!int8_supported()) GTEST_SKIP() << "no int8 kernel: " << int8_description();
  }
};

}  // namespace

TEST(Int8Names, ParseAndPrint) {
  EXPECT_EQ(parse_quantization("none"), Quantization::none);
  EXPECT_EQ(parse_quantization("int8"), Quantization::int8);
  EXPECT_STREQ(quantization_name(Quantization::int8), "int8");
  EXPECT_STREQ(quantization_name(Quantization::none), "none");
  try {
    parse_quantization("int4");
    ADD_FAILURE() << "int4 accepted";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "unknown quantization 'int4' (choices: none, int8)");
  }
}

// The int32 sums of the portable path equal the reference's exactly, on odd
// sizes (K neither a multiple of 4 nor of 64) and odd rows, in x and in the
// weight. (The kernels: ops/int8_gemm_test, and linear_int8 against the
// formula below.)
TEST(Int8Sums, EqualTheReferenceExactly) {
  for (const std::int64_t M : kSizes)
    for (const std::int64_t K : kSizes)
      for (const std::int64_t N : kSizes) {
        if (M * K * N > 257 * 257 * 33) continue;  // the reference is plain loops
        Tensor x = odd_rows(M, K, 100 + M * 7 + K * 3 + N), w = odd_rows(N, K, 200 + M + K + N);
        EXPECT_TRUE(
            same_bits(detail::int8_accumulators(x, w), detail::int8_accumulators_reference(x, w)))
            << "M " << M << " K " << K << " N " << N;
      }
}

// The sums are not trivially equal: a reference that is zero would pass the
// test above only if the fast path were zero too; here both are checked
// against a hand-computed case.
TEST(Int8Sums, HandComputed) {
  // x row (1, -2, 0.5): amax 2, xq = round(x * 63.5) = (64, -127, 32) (63.5 ties to even: 64);
  // w row (4, 4, -4): wq = (127, 127, -127). acc = 127 * (64 - 127 - 32) = -12065.
  // In 7 bits (the AVX2 kernel): xq = round(x * 31.5) = (32, -63, 16) (31.5 ties to
  // even: 32), wq = (63, 63, -63), acc = 63 * (32 - 63 - 16) = -2961.
  Tensor x = from_vector<float>({1.0f, -2.0f, 0.5f}, {1, 3});
  Tensor w = from_vector<float>({4.0f, 4.0f, -4.0f}, {1, 3});
  const int L = detail::int8_levels();
  ASSERT_TRUE(L == 127 || L == 63);
  const std::int32_t want = L == 127 ? -12065 : -2961;
  EXPECT_EQ(detail::int8_accumulators(x, w).data<std::int32_t>()[0], want);
  EXPECT_EQ(detail::int8_accumulators_reference(x, w).data<std::int32_t>()[0], want);
  // y = acc * (2/L) * (4/L): -5.984 (-5.968 in 7 bits); the f32 product is 4 - 8 - 2 = -6.
  const float y = linear_int8(x, w).data<float>()[0];
  EXPECT_NEAR(y, want * (2.0 / L) * (4.0 / L), 1e-5);
}

// linear_int8 equals its reference bit for bit: 3-D inputs, with and without
// bias; this CPU's kernel, AVX2's in the run with ATTN_NO_VNNI=1, and the
// integer loops in the run with ATTN_ISA=portable.
TEST(Int8Linear, EqualsTheReferenceBitForBit) {
  for (const std::int64_t K :
       {std::int64_t(1), std::int64_t(33), std::int64_t(64), std::int64_t(257)}) {
    Tensor x = odd_rows(17 * 3, K, 300 + K).reshape({3, 17, K});
    Tensor w = odd_rows(33, K, 400 + K), bias = rand32({33}, 500 + K);
    EXPECT_TRUE(same_bits(linear_int8(x, w, bias), linear_int8_reference(x, w, bias))) << K;
    EXPECT_TRUE(same_bits(linear_int8(x, w), linear_int8_reference(x, w))) << K;
    Tensor v = x.select(0, 1).select(0, 2);  // a vector input (K)
    EXPECT_EQ(linear_int8(v, w, bias).shape(), Shape{33});
    EXPECT_TRUE(same_bits(linear_int8(v, w, bias), linear_int8_reference(v, w, bias)));
  }
}

// Against the f32 product. Per element, the rounding of x and W to their
// steps sx = max|x_m| / L and sw = max|W_n| / L (L = 127, or 63 in the AVX2
// kernel's 7 bits) bounds the difference:
//   |y - y_f32| <= sx/2 sum_k |W[n,k]| + sw/2 (sum_k |x[m,k]| + K sx/2)
// plus f32 rounding (1e-5 sum_k |x||W| here). On random data the errors are
// independent and the difference grows as sqrt(K): each of the K terms has a
// standard deviation of about (max|x| max|W| / L) / sqrt(18) for uniform
// inputs, so |y - y_f32| <= c sqrt(K) max|x| max|W| / L with c = 1.5 (over
// 6 standard deviations).
TEST(Int8Linear, WithinTheQuantizationStepOfF32) {
  constexpr double kC = 1.5;
  const double L = detail::int8_levels();
  double worst_overall = 0;
  for (const std::int64_t M : kSizes)
    for (const std::int64_t K : kSizes)
      for (const std::int64_t N : {std::int64_t(3), std::int64_t(33), std::int64_t(257)}) {
        Tensor x = odd_rows(M, K, 600 + M + K), w = rand32({N, K}, 700 + K + N);
        Tensor bias = rand32({N}, 800 + N);
        Tensor y = linear_int8(x, w, bias);
        Tensor f32 = linear(x, w, bias);
        auto vy = to_vector<float>(y), vf = to_vector<float>(f32), vx = to_vector<float>(x),
             vw = to_vector<float>(w);
        double worst_c = 0;
        bool differs = false;
        for (std::int64_t m = 0; m < M; ++m) {
          double xmax = 0, xsum = 0;
          for (std::int64_t k = 0; k < K; ++k) {
            xmax = std::max(xmax, double(std::fabs(vx[m * K + k])));
            xsum += std::fabs(vx[m * K + k]);
          }
          const double sx = xmax < 1e-30 ? 0.0 : xmax / L;
          for (std::int64_t n = 0; n < N; ++n) {
            double wmax = 0, wsum = 0, abs_sum = 0;
            for (std::int64_t k = 0; k < K; ++k) {
              wmax = std::max(wmax, double(std::fabs(vw[n * K + k])));
              wsum += std::fabs(vw[n * K + k]);
              abs_sum += std::fabs(double(vx[m * K + k]) * vw[n * K + k]);
            }
            const double sw = wmax / L;
            const double bound = sx / 2 * wsum + sw / 2 * (xsum + K * sx / 2) + 1e-5 * abs_sum +
                                 1e-6 * std::fabs(vf[m * N + n]) + 1e-30;
            const double diff = std::fabs(double(vy[m * N + n]) - vf[m * N + n]);
            EXPECT_LE(diff, bound)
                << "M " << M << " K " << K << " N " << N << " at " << m << "," << n;
            differs = differs || diff > 0;
            if (m != 2 && m != 5 && xmax > 0)  // rows 2 and 5 are not random
              worst_c = std::max(worst_c, diff / (std::sqrt(double(K)) * xmax * wmax / L));
          }
        }
        EXPECT_LE(worst_c, kC) << "M " << M << " K " << K << " N " << N;
        worst_overall = std::max(worst_overall, worst_c);
        if (M * K >= 33 * 17) {
          EXPECT_TRUE(differs) << "int8 gave the f32 product exactly";
        }
      }
  std::printf("largest |y - y_f32| / (sqrt(K) max|x| max|W| / %.0f): %.3f (bound %.1f)\n", L,
              worst_overall, kC);
}

// A row of x holding an infinity or a NaN gives a NaN row (the other rows
// are untouched); a weight holding one is refused, naming the function.
TEST(Int8Linear, NonFiniteValues) {
  Tensor x = rand32({4, 20}, 900).contiguous(), w = rand32({7, 20}, 901);
  const Tensor clean = linear_int8(x, w);
  x.data<float>()[1 * 20 + 3] = std::numeric_limits<float>::infinity();
  x.data<float>()[2 * 20 + 5] = std::nanf("");
  Tensor y = linear_int8(x, w);
  auto vy = to_vector<float>(y), vc = to_vector<float>(clean);
  for (std::int64_t m = 0; m < 4; ++m)
    for (std::int64_t n = 0; n < 7; ++n) {
      if (m == 1 || m == 2)
        EXPECT_TRUE(std::isnan(vy[m * 7 + n])) << m;
      else
        EXPECT_EQ(vy[m * 7 + n], vc[m * 7 + n]) << m;
    }
  EXPECT_TRUE(same_bits(y, linear_int8_reference(x, w)));
  // A weight with an infinity or a NaN is refused, naming its first such row
  // (several bad rows, quantized in parallel).
  auto refusal = [](const Tensor& weight) {
    try {
      linear_int8(rand32({2, weight.size(1)}, 902), weight);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("quantized");
  };
  Tensor bad = w.contiguous().clone();
  bad.data<float>()[3 * 20 + 1] = std::nanf("");
  EXPECT_EQ(refusal(bad),
            "linear_int8: weight [7, 20] holds an infinity or a NaN in row 3: it cannot be "
            "quantized");
  Tensor many = odd_rows(300, 64, 903);
  many.data<float>()[250 * 64 + 5] = INFINITY;
  many.data<float>()[171 * 64 + 63] = -INFINITY;
  many.data<float>()[290 * 64] = std::nanf("");
  EXPECT_EQ(refusal(many),
            "linear_int8: weight [300, 64] holds an infinity or a NaN in row 171: it cannot be "
            "quantized");
}

// A weight whose rows are not contiguous (a transposed view) gives the bits
// of its contiguous copy.
TEST(Int8Linear, StridedWeightsAsTheirCopies) {
  Tensor x = odd_rows(9, 33, 905), wt = odd_rows(33, 300, 906);
  const Tensor w = wt.transpose(0, 1);  // (300, 33), strides (1, 300)
  ASSERT_NE(w.stride(1), 1);
  EXPECT_TRUE(same_bits(linear_int8(x, w), linear_int8(x, w.contiguous())));
  EXPECT_TRUE(same_bits(linear_int8(x, w), linear_int8_reference(x, w.contiguous())));
}

TEST(Int8Linear, BadArgumentsNameTheFunction) {
  Tensor x = rand32({2, 5}, 1), w = rand32({3, 5}, 2);
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] {
              linear_int8(x, rand32({3, 4}, 3));
            }),
            "linear_int8: expected input (..., 4) for weight [3, 4], got [2, 5]");
  EXPECT_EQ(message([&] { linear_int8(x.to(DType::f64), w.to(DType::f64)); }),
            "linear_int8: expected f32 tensors, got x f64, weight f64");
  EXPECT_EQ(message([&] { linear_int8(x, w, rand32({4}, 4)); }),
            "linear_int8: expected a bias (3) for weight [3, 5], got [4]");
  EXPECT_EQ(message([&] {
              linear_int8(rand32({1, 70000}, 5), rand32({1, 70000}, 6));
            }),
            "linear_int8: 70000 inputs per row is more than 65536 (the int32 sums could "
            "overflow)");
  Tensor wg = rand32({3, 5}, 7).requires_grad_(true);
  EXPECT_EQ(message([&] { linear_int8(x, wg); }),
            "linear_int8: not differentiable (inference only): a tensor requires grad while "
            "grad is enabled");
  autograd::NoGradGuard no_grad;
  EXPECT_EQ(message([&] { linear_int8(x, wg); }), "no error");
}

// Inside a scope: linear() with a frozen weight is linear_int8, bit for bit,
// in any thread count; other weights, f64, and products that record
// gradients stay f32; the scope ends cleanly.
TEST_F(Int8, ScopeRunsFrozenLinearsInInt8) {
  Tensor w = rand32({257, 33}, 11), other = rand32({257, 33}, 12), bias = rand32({257}, 13);
  Tensor x = rand32({5, 17, 33}, 14);
  const Tensor f32 = linear(x, w, bias), f32_other = linear(x, other, bias);
  const Tensor int8 = linear_int8(x, w, bias);
  ASSERT_GT(max_abs_diff(int8, f32), 0.0);
  {
    QuantizeScope scope({w, bias});
    EXPECT_TRUE(same_bits(linear(x, w, bias), int8));
    EXPECT_TRUE(same_bits(linear(x, w, bias), int8));  // the kept quantization
    EXPECT_TRUE(same_bits(linear(x, other, bias), f32_other));
    const int threads = get_num_threads();
    set_num_threads(1);
    EXPECT_TRUE(same_bits(linear(x, w, bias), int8));
    set_num_threads(threads);
    // Recording gradients: the f32 product and its gradient.
    Tensor wg = w.detach().clone().requires_grad_(true);
    {
      QuantizeScope inner({wg});
      Tensor y = linear(x, wg, bias);
      EXPECT_TRUE(same_bits(y.detach(), f32));
      sum(y).backward();
      EXPECT_TRUE(wg.grad().defined());
      autograd::NoGradGuard no_grad;
      EXPECT_TRUE(same_bits(linear(x, wg, bias), int8));
    }
    // The outer scope is back: w is frozen there, wg is not.
    EXPECT_TRUE(same_bits(linear(x, w, bias), int8));
    autograd::NoGradGuard no_grad;
    EXPECT_TRUE(same_bits(linear(x, wg, bias), f32));
  }
  EXPECT_TRUE(same_bits(linear(x, w, bias), f32));
  // f64 (gradient checks, references) is never quantized, even when frozen.
  Tensor x64 = x.to(DType::f64), w64 = w.to(DType::f64);
  const Tensor ref64 = linear(x64, w64);
  QuantizeScope scope({w64});
  EXPECT_TRUE(same_bits(linear(x64, w64), ref64));
}

// The FFN's fused linear_relu takes the int8 path too: relu of the int8 product.
TEST_F(Int8, LinearReluRunsInInt8) {
  Tensor w = rand32({37, 45}, 31).contiguous(), b = rand32({37}, 32), x = rand32({9, 45}, 33);
  Tensor expect = relu(linear_int8_reference(x, w, b));
  QuantizeScope scope({w, b});
  EXPECT_TRUE(same_bits(linear_relu(x, w, b), expect));
}

// A weight is quantized once per scope: changing it inside the scope (which
// the scope forbids) does not change the product; a new scope sees it.
TEST_F(Int8, WeightsAreQuantizedOncePerScope) {
  Tensor w = rand32({40, 50}, 21).contiguous(), x = rand32({6, 50}, 22);
  Tensor before, during;
  {
    QuantizeScope scope({w});
    before = linear(x, w);
    w.data<float>()[0] += 1.0f;
    during = linear(x, w);
  }
  EXPECT_TRUE(same_bits(before, during));
  QuantizeScope scope({w});
  EXPECT_FALSE(same_bits(linear(x, w), before));
  EXPECT_TRUE(same_bits(linear(x, w), linear_int8_reference(x, w)));
}

// Other threads join the scope (QuantizeScope::current()): their products
// with the frozen weights run in int8 on the same quantized weights (which
// changing the weight, as the scope forbids, shows); a thread without a
// scope, or joining none, stays f32.
TEST_F(Int8, OtherThreadsJoinTheScope) {
  Tensor w = rand32({300, 70}, 41).contiguous(), b = rand32({300}, 42);
  std::vector<Tensor> xs;
  for (std::int64_t M : {1, 9, 64, 200}) xs.push_back(rand32({M, 70}, 43 + M));
  std::vector<Tensor> expect, got(xs.size());
  for (const Tensor& x : xs) expect.push_back(linear_int8_reference(x, w, b));
  const Tensor f32 = linear(xs[1], w, b);
  QuantizeScope::Shared shared;
  {
    QuantizeScope scope({w, b});
    shared = QuantizeScope::current();
    ASSERT_TRUE(shared.cache != nullptr);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < xs.size(); ++i)
      threads.emplace_back([&, i] {
        QuantizeScope join(shared);
        got[i] = linear(xs[i], w, b);
      });
    for (auto& t : threads) t.join();
    std::thread bare([&] {
      EXPECT_TRUE(QuantizeScope::current().cache == nullptr);
      EXPECT_TRUE(same_bits(linear(xs[1], w, b), f32));
      QuantizeScope none(QuantizeScope::Shared{});
      EXPECT_TRUE(same_bits(linear(xs[1], w, b), f32));
    });
    bare.join();
  }
  for (std::size_t i = 0; i < xs.size(); ++i)
    EXPECT_TRUE(same_bits(got[i], expect[i])) << xs[i].size(0) << " rows";
  // The owner's scope has ended; a thread that joins now uses the kept
  // quantization, made before the weight changed.
  w.data<float>()[0] += 1.0f;
  std::thread late([&] {
    QuantizeScope join(shared);
    EXPECT_TRUE(same_bits(linear(xs[2], w, b), expect[2]));
  });
  late.join();
}

// With a bf16 PrecisionScope open too: the frozen Linear weights run in int8
// (the same bits as int8 alone), the other products in bf16.
TEST_F(Int8, CombinesWithBf16) {
  if (!bf16_supported()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  Tensor w = rand32({64, 48}, 31), a = rand32({9, 48}, 32), b = rand32({48, 20}, 33);
  const Tensor int8 = linear_int8(a, w);
  Tensor bf16_product;
  {
    PrecisionScope bf16(Precision::bf16);
    bf16_product = matmul(a, b);
  }
  ASSERT_GT(max_abs_diff(bf16_product, matmul(a, b)), 0.0);
  for (const bool quantize_first : {true, false}) {
    std::unique_ptr<QuantizeScope> q;
    if (quantize_first) q = std::make_unique<QuantizeScope>(std::vector<Tensor>{w});
    PrecisionScope bf16(Precision::bf16, {w});
    if (!quantize_first) q = std::make_unique<QuantizeScope>(std::vector<Tensor>{w});
    EXPECT_TRUE(same_bits(linear(a, w), int8));
    EXPECT_TRUE(same_bits(matmul(a, b), bf16_product));
    q.reset();
  }
}

// The kernel in force, by name and in words, as the environment asks.
TEST(Int8Names, KernelInForce) {
  const Int8Kernel k = int8_kernel();
  EXPECT_EQ(int8_supported(), k != Int8Kernel::none);
  const std::string name = int8_kernel_name(k), words = int8_description();
  if (forced_off()) {
    EXPECT_EQ(k, Int8Kernel::none);
    EXPECT_EQ(words, "none (ATTN_ISA=" + std::string(std::getenv("ATTN_ISA")) + ")");
  }
  if (k == Int8Kernel::avx512_vnni) {
    EXPECT_EQ(words, "AVX-512 VNNI (vpdpbusd)");
  }
  if (k == Int8Kernel::avx_vnni) {
    EXPECT_EQ(words, "AVX-VNNI (vpdpbusd, 256-bit)");
  }
  if (k == Int8Kernel::avx2) {
    EXPECT_EQ(words, "AVX2 (vpmaddubsw, 7 bits)");
  }
  // The best kernel the CPU has under the environment's caps.
  const char* no_vnni = std::getenv("ATTN_NO_VNNI");
  const char* isa = std::getenv("ATTN_ISA");
  const bool vnni_off = no_vnni && std::string(no_vnni) == "1";
  const bool below_avx512 = isa && std::string(isa) == "avx2";
  if (vnni_off) {
    EXPECT_NE(k, Int8Kernel::avx512_vnni);
    EXPECT_NE(k, Int8Kernel::avx_vnni);
  }
  if (below_avx512) {
    EXPECT_NE(k, Int8Kernel::avx512_vnni);
  }
  if (below_avx512 && !vnni_off && detail::int8_gemm_avx_vnni_cpu()) {
    EXPECT_EQ(k, Int8Kernel::avx_vnni);
  }
  if (!forced_off() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_NE(k, Int8Kernel::none) << "a CPU with AVX2 runs int8";
  }
  EXPECT_STREQ(int8_kernel_name(Int8Kernel::avx2), "avx2");
  EXPECT_STREQ(int8_kernel_name(Int8Kernel::avx_vnni), "avx_vnni");
  EXPECT_STREQ(int8_kernel_name(Int8Kernel::avx512_vnni), "avx512_vnni");
  EXPECT_STREQ(int8_kernel_name(Int8Kernel::none), "none");
  std::printf("int8 kernel: %s (%s)\n", name.c_str(), words.c_str());
}

// Without a kernel (a CPU without AVX2, or forced by ATTN_ISA=portable):
// the scope is refused with the reason; linear_int8 still gives the
// reference's bits on the integer loops.
TEST(Int8Fallback, WithoutAKernelTheScopeIsRefused) {
  if (int8_supported()) {
    EXPECT_FALSE(forced_off());
    GTEST_SKIP() << "this CPU runs int8 on " << int8_description()
                 << " (the fallback runs with ATTN_ISA=portable)";
  }
  try {
    QuantizeScope scope(std::vector<Tensor>{});
    ADD_FAILURE() << "a QuantizeScope opened without a kernel";
  } catch (const ValueError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "QuantizeScope: int8 products need AVX2 or AVX-512 VNNI; here: " + int8_description());
  }
  Tensor x = odd_rows(33, 257, 41), w = odd_rows(17, 257, 42), bias = rand32({17}, 43);
  EXPECT_TRUE(same_bits(linear_int8(x, w, bias), linear_int8_reference(x, w, bias)));
}
