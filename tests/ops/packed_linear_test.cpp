// Frozen Linear weights on their packed copies (ops/packed_linear.cpp): the
// product against the plain reference in double, in f32 and in bf16 (on the
// bf16-rounded operands), with the bias and ReLU, over row counts that cut
// into every kind of run; the shapes of x; one packing per scope; threads
// that join a scope; and every case that must keep the unpacked path.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/core/threads.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/ops/precision.h"
#include "attn/ops/reduce.h"
#include "ops/precision_internal.h"
#include "testing.h"

using namespace attn;
using attn::testing::rand32;
using attn::testing::same_bits;

namespace {

// K x N = 131 x 257: above the packing threshold (2^14 weights), odd sizes.
constexpr std::int64_t kK = 131, kN = 257;
// Fewer than 16 rows (unpacked); then runs of multiples of 16; 16 and a
// tail of 1; multiples of 128 from 1024 and tails; 4096 and a tail.
const std::int64_t kRows[] = {1, 15, 16, 17, 130, 1100, 4100};

// |y - ref| <= rtol * (|x| |W|^T + |b|) elementwise, where ref is the product
// in double of x and W (rounded to bf16 first when `bf16`), plus b, then the
// ReLU: what is left is the f32 accumulation's order.
void expect_linear(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, bool relu,
                   bool bf16, double rtol) {
  const Tensor xr = bf16 ? round_to_bf16(x) : x, wr = bf16 ? round_to_bf16(w) : w;
  const Tensor x64 = xr.to(DType::f64).reshape({-1, w.size(1)}),
               w64 = wr.to(DType::f64).transpose(0, 1);
  Tensor ref = matmul_reference(x64, w64), scale = matmul_reference(abs(x64), abs(w64));
  if (b.defined()) {
    ref = add(ref, b.to(DType::f64));
    scale = add(scale, abs(b.to(DType::f64)));
  }
  if (relu) ref = attn::relu(ref);
  ASSERT_EQ(y.numel(), ref.numel());
  const std::vector<float> vy = to_vector<float>(y.contiguous());
  const std::vector<double> vr = to_vector<double>(ref), vs = to_vector<double>(scale);
  double worst = 0;
  for (std::size_t i = 0; i < vy.size(); ++i) {
    const double off = std::fabs(double(vy[i]) - vr[i]);
    ASSERT_LE(off, rtol * vs[i] + 1e-30) << "element " << i << " of " << shape_str(y.shape());
    if (vs[i] > 0) worst = std::max(worst, off / vs[i]);
  }
  std::printf("  %s rows %lld%s%s: largest error %.2e of |x||W|+|b| (bound %.0e)\n",
              bf16 ? "bf16" : "f32", static_cast<long long>(ref.size(0)),
              b.defined() ? " bias" : "", relu ? " relu" : "", worst, rtol);
}

}  // namespace

class Bf16Packed : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!bf16_supported()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  }
};

// f32: every run kind, with and without bias and ReLU, against the reference;
// the copies really are made.
TEST(PackedLinear, F32MatchesTheReference) {
  Tensor w = rand32({kN, kK}, 1), b = rand32({kN}, 2);
  autograd::NoGradGuard no_grad;
  PrecisionScope scope(Precision::f32, {w, b});
  for (std::int64_t M : kRows) {
    Tensor x = rand32({M, kK}, 10 + static_cast<std::uint64_t>(M), -2.0, 2.0);
    expect_linear(linear(x, w, b), x, w, b, false, false, 2e-6);
    expect_linear(linear(x, w), x, w, Tensor(), false, false, 2e-6);
    expect_linear(linear_relu(x, w, b), x, w, b, true, false, 2e-6);
    expect_linear(linear_relu(x, w), x, w, Tensor(), true, false, 2e-6);
    // Fewer than 16 rows do not pack a weight; from 16 on it is packed.
    if (M < 16) {
      EXPECT_EQ(detail::packed_copies(), 0) << M;
    } else {
      EXPECT_GT(detail::packed_copies(), 0) << M;
    }
  }
  // Once packed, fewer rows use the copy too: changing the weight (which
  // the scope forbids) does not change their product.
  const Tensor before = w.detach().clone();
  w.data<float>()[0] += 1.0f;
  for (std::int64_t M : {1, 7}) {
    Tensor x = rand32({M, kK}, 40 + static_cast<std::uint64_t>(M), -2.0, 2.0);
    expect_linear(linear_relu(x, w, b), x, before, b, true, false, 2e-6);
  }
}

// bf16: the product of the bf16-rounded operands (the bias stays f32).
TEST_F(Bf16Packed, Bf16MatchesTheRoundedReference) {
  Tensor w = rand32({kN, kK}, 3), b = rand32({kN}, 4);
  autograd::NoGradGuard no_grad;
  PrecisionScope scope(Precision::bf16, {w, b});
  for (std::int64_t M : kRows) {
    Tensor x = rand32({M, kK}, 20 + static_cast<std::uint64_t>(M), -2.0, 2.0);
    const Tensor y = linear(x, w, b);
    expect_linear(y, x, w, b, false, true, 2e-6);
    expect_linear(linear_relu(x, w), x, w, Tensor(), true, true, 2e-6);
    // bf16 really ran: the f32 product is further away than its sums' order.
    PrecisionScope f32(Precision::f32);
    EXPECT_GT(max_abs_diff(y, linear(x, w, b)), 1e-3);
  }
  EXPECT_GT(detail::packed_copies(), 0);
}

// x as (B, T, K), as a transposed view and as a vector (one row: unpacked):
// the same bits as the same rows given as a contiguous matrix.
TEST(PackedLinear, ShapesOfX) {
  Tensor w = rand32({kN, kK}, 5), b = rand32({kN}, 6);
  autograd::NoGradGuard no_grad;
  PrecisionScope scope(Precision::f32, {w, b});
  Tensor x3 = rand32({5, 26, kK}, 7);
  Tensor y3 = linear(x3, w, b);
  EXPECT_EQ(y3.shape(), (Shape{5, 26, kN}));
  EXPECT_TRUE(same_bits(y3.reshape({130, kN}), linear(x3.reshape({130, kK}).contiguous(), w, b)));
  Tensor x1 = rand32({kK}, 8);
  Tensor y1 = linear(x1, w, b);
  EXPECT_EQ(y1.shape(), (Shape{kN}));
  EXPECT_TRUE(same_bits(y1, linear(x1.unsqueeze(0), w, b).squeeze(0)));
  Tensor xt = rand32({kK, 37}, 9).transpose(0, 1);
  EXPECT_TRUE(same_bits(linear(xt, w, b), linear(xt.contiguous(), w, b)));
  expect_linear(linear(xt, w, b), xt, w, b, false, false, 2e-6);
}

// A weight is packed once per scope (per layout): more calls add no copy;
// changing it inside the scope (which the scope forbids) does not change the
// product; a new scope starts empty and sees the change.
TEST(PackedLinear, PackedOncePerScope) {
  Tensor w = rand32({kN, kK}, 11).contiguous(), x = rand32({40, kK}, 12);
  autograd::NoGradGuard no_grad;
  Tensor before, during;
  {
    PrecisionScope scope(Precision::f32, {w});
    EXPECT_EQ(detail::packed_copies(), 0);
    before = linear(x, w);
    const std::int64_t copies = detail::packed_copies();
    EXPECT_GT(copies, 0);
    w.data<float>()[0] += 1.0f;
    during = linear(x, w);
    EXPECT_EQ(detail::packed_copies(), copies);
  }
  EXPECT_TRUE(same_bits(before, during));
  EXPECT_EQ(detail::packed_copies(), 0);
  PrecisionScope scope(Precision::f32, {w});
  EXPECT_EQ(detail::packed_copies(), 0);
  const Tensor after = linear(x, w);
  EXPECT_FALSE(same_bits(after, before));
  expect_linear(after, x, w, Tensor(), false, false, 2e-6);
}

// The same bits on one thread as on two (oneDNN splits rows and columns, not
// the sums): a translation does not depend on the thread count.
TEST(PackedLinear, SameBitsOnOneThreadAsOnTwo) {
  Tensor w = rand32({kN, kK}, 13), b = rand32({kN}, 14), x = rand32({300, kK}, 15);
  autograd::NoGradGuard no_grad;
  PrecisionScope scope(Precision::f32, {w, b});
  const int threads = get_num_threads();
  set_num_threads(2);
  const Tensor two = linear_relu(x, w, b);
  set_num_threads(1);
  const Tensor one = linear_relu(x, w, b);
  set_num_threads(threads);
  EXPECT_TRUE(same_bits(one, two));
}

// What keeps the unpacked path (the same bits as outside any scope, and no
// copy made): a weight not frozen; a product that records gradients (whose
// gradients still flow); a weight under 2^14 elements (d2l's toy model's);
// f64; a scope given no parameters.
TEST(PackedLinear, UnpackedWhereItMust) {
  Tensor w = rand32({kN, kK}, 16), other = rand32({kN, kK}, 17), x = rand32({33, kK}, 18);
  Tensor small = rand32({201, 32}, 19), xs = rand32({33, 32}, 20);
  const Tensor plain = linear(x, w), plain_other = linear(x, other),
               plain_small = linear(xs, small);
  {
    PrecisionScope scope(Precision::f32);
    autograd::NoGradGuard no_grad;
    EXPECT_TRUE(same_bits(linear(x, w), plain));
    EXPECT_EQ(detail::packed_copies(), 0);
  }
  {
    Tensor x64 = x.to(DType::f64), w64 = w.to(DType::f64);
    const Tensor ref64 = linear(x64, w64);
    PrecisionScope scope(Precision::f32, {w64});
    autograd::NoGradGuard no_grad;
    EXPECT_TRUE(same_bits(linear(x64, w64), ref64));
    EXPECT_EQ(detail::packed_copies(), 0);
  }
  PrecisionScope scope(Precision::f32, {w, small});
  {
    autograd::NoGradGuard no_grad;
    EXPECT_TRUE(same_bits(linear(x, other), plain_other));
    EXPECT_TRUE(same_bits(linear(xs, small), plain_small));
    EXPECT_EQ(detail::packed_copies(), 0);
  }
  Tensor xg = x.detach().clone().requires_grad_(true);
  Tensor y = linear(xg, w);
  EXPECT_TRUE(same_bits(y.detach(), plain));
  EXPECT_EQ(detail::packed_copies(), 0);
  sum(y).backward();
  ASSERT_TRUE(xg.grad().defined());
  EXPECT_LT(max_abs_diff(xg.grad(), sum(w, {0}).unsqueeze(0).expand({33, kK})), 1e-4);
  // The same weight without gradients: packed.
  autograd::NoGradGuard no_grad;
  expect_linear(linear(x, w), x, w, Tensor(), false, false, 2e-6);
  EXPECT_GT(detail::packed_copies(), 0);
}

// PackAllRows: fewer than 16 rows pack the weight too, and give the bits the
// same rows give once a larger product packed it, whatever ran before.
TEST(PackedLinear, PackAllRowsPacksSmallProductsOnFirstUse) {
  Tensor w = rand32({kN, kK}, 13), b = rand32({kN}, 14);
  Tensor x = rand32({7, kK}, 15), big = rand32({40, kK}, 16);
  autograd::NoGradGuard no_grad;
  Tensor after_big;
  {
    PrecisionScope scope(Precision::f32, {w, b});
    (void)linear(big, w, b);
    after_big = linear(x, w, b);  // the copy the 40 rows made
  }
  PrecisionScope scope(Precision::f32, {w, b});
  {
    PackAllRows pack;
    EXPECT_EQ(detail::packed_copies(), 0);
    const Tensor first = linear(x, w, b);
    EXPECT_GT(detail::packed_copies(), 0);
    EXPECT_TRUE(same_bits(first, after_big));
    expect_linear(first, x, w, b, false, false, 2e-6);
  }
}

// Another thread joins the scope (PrecisionScope::current()): its products
// run in the scope's precision on the same packed copies, which it may be
// the first to make; threads without a scope stay f32 and unpacked; the
// copies live while a joined scope does, after the owner's scope ended.
TEST(PackedLinear, OtherThreadsJoinTheScopeAndShareItsCopies) {
  const Precision p = bf16_supported() ? Precision::bf16 : Precision::f32;
  Tensor w = rand32({kN, kK}, 17), b = rand32({kN}, 18);
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> xs;
  for (std::int64_t M : {16, 40, 130, 7}) xs.push_back(rand32({M, kK}, 19 + M));
  std::vector<Tensor> expect;
  std::int64_t copies = 0;  // the layouts one thread packs for these rows
  {
    PackAllRows pack;
    PrecisionScope scope(p, {w, b});
    for (const Tensor& x : xs) expect.push_back(linear(x, w, b));
    copies = detail::packed_copies();
  }
  // oneDNN capped below AVX-512 (DNNL_MAX_CPU_ISA) may take bf16 weights
  // as they lie, with no packed copy; on its own it packs them.
  if (std::getenv("DNNL_MAX_CPU_ISA") == nullptr) {
    EXPECT_GT(copies, 0);
  }
  PrecisionScope::Shared shared;
  std::vector<Tensor> got(xs.size());
  {
    auto scope = std::make_unique<PrecisionScope>(p, std::vector<Tensor>{w, b});
    shared = PrecisionScope::current();
    ASSERT_TRUE(shared.frozen != nullptr);
    EXPECT_EQ(shared.precision, p);
    // Four threads at once, each packing what it needs first.
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < xs.size(); ++i)
      threads.emplace_back([&, i] {
        PackAllRows pack;  // the 7 rows pack too
        PrecisionScope join(shared);
        EXPECT_EQ(matmul_precision(), p);
        got[i] = linear(xs[i], w, b);
      });
    for (auto& t : threads) t.join();
    // The copies the threads made are the scope's, one per layout.
    EXPECT_EQ(detail::packed_copies(), copies);
    std::thread bare([&] {
      EXPECT_EQ(matmul_precision(), Precision::f32);
      EXPECT_EQ(detail::packed_copies(), 0);
      EXPECT_TRUE(PrecisionScope::current().frozen == nullptr);
    });
    bare.join();
  }
  for (std::size_t i = 0; i < xs.size(); ++i)
    EXPECT_TRUE(same_bits(got[i], expect[i])) << xs[i].size(0) << " rows";
  // The owner's scope has ended; a thread that joins later still finds the copies.
  std::thread late([&] {
    PrecisionScope join(shared);
    EXPECT_EQ(detail::packed_copies(), copies);
    EXPECT_TRUE(same_bits(linear(xs[1], w, b), expect[1]));
  });
  late.join();
}
