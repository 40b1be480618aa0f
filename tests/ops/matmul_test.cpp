#include "attn/ops/matmul.h"

#include <cstring>
#include <random>

#include "attn/core/threads.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/precision.h"
#include "ops/matmul_internal.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;
using attn::testing::rand32;
using attn::testing::same_bits;

namespace {

// |c - a@b| <= rtol * (|a| @ |b|) elementwise: a relative bound that holds
// however much cancellation the sum has.
void expect_matches_reference(const Tensor& c, const Tensor& a, const Tensor& b,
                              double rtol = 1e-5) {
  Tensor ref = matmul_reference(a, b);
  Tensor scale = matmul_reference(abs(a), abs(b));
  ASSERT_EQ(c.shape(), ref.shape());
  auto vc = to_vector<double>(c), vr = to_vector<double>(ref), vs = to_vector<double>(scale);
  for (std::size_t i = 0; i < vc.size(); ++i) {
    ASSERT_LE(std::fabs(vc[i] - vr[i]), rtol * vs[i] + 1e-30)
        << "element " << i << " of " << shape_str(c.shape()) << ": a " << shape_str(a.shape())
        << ", b " << shape_str(b.shape());
  }
}

// Runs `check` on both kernel paths for batches that do not fold into one
// GEMM: oneDNN's matmul primitive, and one dnnl_sgemm per item.
void on_both_batched_paths(const std::function<void()>& check) {
  for (bool primitive : {true, false}) {
    SCOPED_TRACE(primitive ? "oneDNN matmul primitive" : "dnnl_sgemm per item");
    detail::set_matmul_batched_primitive(primitive);
    check();
  }
  detail::set_matmul_batched_primitive(true);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no throw";
}

}  // namespace

TEST(Matmul, SmallValues) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector<float>({7, 8, 9, 10, 11, 12}, {3, 2});
  EXPECT_EQ(to_vector<float>(matmul(a, b)), (std::vector<float>{58, 64, 139, 154}));
  EXPECT_EQ(to_vector<float>(matmul_reference(a, b)), (std::vector<float>{58, 64, 139, 154}));
  Tensor a64 = a.to(DType::f64), b64 = b.to(DType::f64);
  EXPECT_EQ(to_vector<double>(matmul(a64, b64)), (std::vector<double>{58, 64, 139, 154}));
}

TEST(Matmul, OneDnnMatchesReferenceOnOddSizes) {
  const std::vector<std::int64_t> sizes = {1, 3, 7, 33, 65, 129};
  std::uint64_t seed = 1;
  for (std::int64_t m : sizes)
    for (std::int64_t k : sizes)
      for (std::int64_t n :
           {std::int64_t{1}, std::int64_t{7}, std::int64_t{65}, std::int64_t{129}}) {
        Tensor a = rand32({m, k}, seed++), b = rand32({k, n}, seed++);
        expect_matches_reference(matmul(a, b), a, b);
      }
}

// Products of 2^23 multiply-adds and more run on oneDNN's matmul primitive
// (smaller ones on dnnl_sgemm); odd sizes, every transposition, the Linear
// fold, and a row stride wider than the rows; the same with the primitive
// switched off (dnnl_sgemm) for comparison.
TEST(Matmul, LargeProductsOnThePrimitiveAndOnSgemm) {
  on_both_batched_paths([] {
    const std::int64_t m = 301, k = 203, n = 157;  // 9.6M multiply-adds
    Tensor a = rand32({m, k}, 1), b = rand32({k, n}, 2);
    Tensor at = rand32({k, m}, 3).transpose(0, 1), bt = rand32({n, k}, 4).transpose(0, 1);
    expect_matches_reference(matmul(a, b), a, b);
    expect_matches_reference(matmul(at, b), at, b);
    expect_matches_reference(matmul(a, bt), a, bt);
    expect_matches_reference(matmul(at, bt), at, bt);
    Tensor x = rand32({7, 43, k}, 5), w = rand32({n, k}, 6);  // Linear: 301 rows folded
    expect_matches_reference(linear(x, w), x, w.transpose(0, 1));
    Tensor wide = rand32({m, k + 9}, 7).narrow(1, 3, k);  // rows 212 apart
    expect_matches_reference(matmul(wide, b), wide, b);
  });
}

// An operand whose K lines lie a multiple of 4 KB apart (detail::kAliasedLd
// floats) is copied with its lines further apart before a large product
// (matmul.cpp): dW = g^T x with g's rows 1024 floats long (op(A) read 'T'),
// and x @ w with w's rows 1024 floats long (op(B) read 'N'). The results
// match the reference and have the bits of the same values laid out with
// their lines already apart (read in place), on both of oneDNN's paths.
TEST(Matmul, OperandsWithLinesFourKilobytesApart) {
  on_both_batched_paths([] {
    const std::int64_t n = detail::kAliasedLd, rows = 131, k = 259;
    auto spaced = [](const Tensor& t) {
      Tensor wide = zeros({t.size(0), t.size(1) + detail::kLinePad});
      Tensor v = wide.narrow(1, 0, t.size(1));
      copy_(v, t);
      return v;
    };
    Tensor g = rand32({rows, n}, 11), x = rand32({rows, k}, 12);  // 35M multiply-adds
    Tensor dw = matmul(g.transpose(0, 1), x);
    expect_matches_reference(dw, g.transpose(0, 1), x);
    EXPECT_TRUE(same_bits(dw, matmul(spaced(g).transpose(0, 1), x)));
    Tensor a = rand32({rows, k}, 13), w = rand32({k, n}, 14);
    Tensor y = matmul(a, w);
    expect_matches_reference(y, a, w);
    EXPECT_TRUE(same_bits(y, matmul(a, spaced(w))));
    // The Linear fold's rows, 3-D, through linear(): dW's and dx's products.
    Tensor x3 = rand32({3, 30, k}, 15).requires_grad_(), w3 = rand32({n, k}, 16).requires_grad_();
    Tensor r = rand32({3, 30, n}, 17);
    sum(mul(linear(x3, w3), r)).backward();
    expect_matches_reference(w3.grad(), r.reshape({-1, n}).transpose(0, 1),
                             x3.detach().reshape({-1, k}));
    expect_matches_reference(x3.grad().reshape({-1, k}), r.reshape({-1, n}), w3.detach());
  });
}

TEST(Matmul, AllFourTransposeCombinations) {
  on_both_batched_paths([] {
    for (auto [m, k, n] : {std::array<std::int64_t, 3>{7, 33, 65},
                           {65, 1, 3},
                           {1, 129, 7},
                           {33, 7, 1},
                           {129, 65, 33}}) {
      Tensor a = rand32({m, k}, 10), b = rand32({k, n}, 11);
      Tensor at = rand32({k, m}, 12).transpose(0, 1), bt = rand32({n, k}, 13).transpose(0, 1);
      expect_matches_reference(matmul(a, b), a, b);
      expect_matches_reference(matmul(at, b), at, b);
      expect_matches_reference(matmul(a, bt), a, bt);
      expect_matches_reference(matmul(at, bt), at, bt);
      // Batched, transposed in the last two dims.
      Tensor ab = rand32({3, k, m}, 14).transpose(1, 2),
             bb = rand32({3, n, k}, 15).transpose(-1, -2);
      expect_matches_reference(matmul(ab, bb), ab, bb);
    }
  });
}

TEST(Matmul, BroadcastBatchShapes) {
  on_both_batched_paths([] {
    struct Case {
      Shape a, b, out;
    };
    std::vector<Case> cases = {
        {{2, 1, 7, 5}, {3, 5, 9}, {2, 3, 7, 9}},
        {{4, 7, 5}, {5, 3}, {4, 7, 3}},  // Linear: folded into one GEMM
        {{2, 3, 7, 5}, {1, 5, 3}, {2, 3, 7, 3}},  // folded through size-1 batch dims of b
        {{7, 5}, {4, 5, 3}, {4, 7, 3}},  // a shared by every item
        {{1, 7, 5}, {4, 5, 3}, {4, 7, 3}},
        {{3, 1, 33, 7}, {1, 4, 7, 65}, {3, 4, 33, 65}},
        {{5, 1, 3}, {5, 3, 1}, {5, 1, 1}},
    };
    std::uint64_t seed = 100;
    for (const auto& c : cases) {
      Tensor a = rand32(c.a, seed++), b = rand32(c.b, seed++);
      Tensor out = matmul(a, b);
      EXPECT_EQ(out.shape(), c.out);
      expect_matches_reference(out, a, b);
    }
    // An expanded (stride 0) operand is read in place, folded or not.
    Tensor a = rand32({4, 7, 5}, 1), w = rand32({5, 3}, 2);
    expect_matches_reference(matmul(a, w.expand({4, 5, 3})), a, w.expand({4, 5, 3}));
    Tensor w2 = rand32({7, 5}, 3);
    expect_matches_reference(matmul(w2.expand({4, 7, 5}), rand32({4, 5, 3}, 4)),
                             w2.expand({4, 7, 5}), rand32({4, 5, 3}, 4));
  });
}

TEST(Matmul, PermutedAndStridedInputs) {
  on_both_batched_paths([] {
    // Attention layout: (B, T, H, D) viewed as (B, H, T, D); rows read in place.
    Tensor q = rand32({2, 7, 3, 5}, 1).permute({0, 2, 1, 3});
    Tensor k = rand32({2, 9, 3, 5}, 2).permute({0, 2, 3, 1});  // (B, H, D, T)
    expect_matches_reference(matmul(q, k), q, k);
    // (T, B, D) viewed as (B, T, D): rows not evenly spaced, so not folded.
    Tensor x = rand32({7, 4, 5}, 3).transpose(0, 1), w = rand32({5, 3}, 4);
    expect_matches_reference(matmul(x, w), x, w);
    // Rows with a padded stride (a narrowed view), evenly spaced: folded in place.
    Tensor xp = rand32({4, 7, 10}, 5).narrow(-1, 0, 5);
    expect_matches_reference(matmul(xp, w), xp, w);
    // Batch strides that are not dense (a strided slice of the batch).
    Tensor t = rand32({3, 5, 9}, 6).permute({1, 0, 2}).slice(1, 0, 3, 2);  // (5, 2, 9)
    expect_matches_reference(matmul(t.transpose(0, 1), rand32({9, 3}, 8)), t.transpose(0, 1),
                             rand32({9, 3}, 8));
    expect_matches_reference(matmul(rand32({2, 7, 5}, 9), t.permute({1, 0, 2})),
                             rand32({2, 7, 5}, 9), t.permute({1, 0, 2}));
    // Neither rows nor columns unit-stride: copied once.
    Tensor s = rand32({7, 10}, 10).slice(1, 0, 10, 2);  // (7, 5), strides (10, 2)
    Tensor u = rand32({3, 5, 18}, 11).slice(2, 0, 18, 2);  // (3, 5, 9), strides (90, 18, 2)
    expect_matches_reference(matmul(s, rand32({5, 4}, 12)), s, rand32({5, 4}, 12));
    expect_matches_reference(matmul(rand32({3, 7, 5}, 13), u), rand32({3, 7, 5}, 13), u);
  });
}

TEST(Matmul, BatchedPathsMatchReferenceAndEachOther) {
  // (B*h, Q, d) @ (B*h, d, K) with tiny sizes, K read transposed: attention scores.
  Tensor q = rand32({64, 10, 8}, 1), k = rand32({64, 10, 8}, 2);
  Tensor v = rand32({65, 7, 3}, 3), w = rand32({65, 3, 9}, 4);
  Tensor a = rand32({3, 129, 65}, 5), b = rand32({3, 65, 129}, 6);  // big items
  Tensor scores = bmm(q, k.transpose(1, 2)), vw = matmul(v, w), ab = matmul(a, b);
  expect_matches_reference(scores, q, k.transpose(1, 2));
  expect_matches_reference(vw, v, w);
  expect_matches_reference(ab, a, b);

  // One dnnl_sgemm per item: in parallel over small items, or serially on one
  // thread. Each call is single-threaded either way, so the bits agree.
  detail::set_matmul_batched_primitive(false);
  Tensor par_scores = bmm(q, k.transpose(1, 2)), par_vw = matmul(v, w);
  expect_matches_reference(par_scores, q, k.transpose(1, 2));
  expect_matches_reference(par_vw, v, w);
  expect_matches_reference(matmul(a, b), a, b);
  int threads = get_num_threads();
  set_num_threads(1);
  Tensor serial_scores = bmm(q, k.transpose(1, 2)), serial_vw = matmul(v, w);
  set_num_threads(threads);
  detail::set_matmul_batched_primitive(true);
  EXPECT_EQ(max_abs_diff(par_scores, serial_scores), 0.0);
  EXPECT_EQ(max_abs_diff(par_vw, serial_vw), 0.0);
  // The primitive and the per-item GEMMs agree to rounding.
  EXPECT_LT(max_abs_diff(scores, par_scores), 1e-5);
  EXPECT_LT(max_abs_diff(vw, par_vw), 1e-5);
}

TEST(Matmul, BatchedUnderChangingThreadCountsAndInsideParallelRegions) {
  Tensor q = rand32({16, 10, 8}, 1), k = rand32({16, 10, 8}, 2);
  Tensor ref = matmul_reference(q, k.transpose(1, 2));
  int threads = get_num_threads();
  for (int n : {threads, 1, threads}) {
    set_num_threads(n);
    EXPECT_LT(max_abs_diff(bmm(q, k.transpose(1, 2)), ref), 1e-5) << n << " threads";
  }
  set_num_threads(threads);
  // Called from every thread of a parallel region (each with its own cache).
  std::vector<double> diffs(64, 1.0);
#pragma omp parallel for
  for (int i = 0; i < 64; ++i) {
    Tensor a = q.narrow(0, i % 4, 12), b = k.narrow(0, i % 4, 12).transpose(1, 2);
    Tensor c = matmul(a, b);
    diffs[i] = max_abs_diff(c, ref.narrow(0, i % 4, 12));
  }
  for (double d : diffs) EXPECT_LT(d, 1e-5);
}

// Below kSerialGemmWork multiply-adds, a batch of products (attention's)
// runs on one thread whatever the thread count, or item by item, each item
// on one thread (the per-item path, in parallel or not as the load says):
// the same bits on one thread as on two. The toy model's attention products,
// a decoding step's, odd ones, and sums of up to 300 keys, on both batched
// paths. (Before 2026-11-27 the primitive ran such batches on the team, and
// with 3 threads the toy's shapes differed from 1.)
TEST(Matmul, SmallBatchesSameBitsOnOneThreadAsOnTwo) {
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases = {
      {{64, 8, 10, 32}, {64, 8, 32, 10}},  {{64, 8, 10, 10}, {64, 8, 10, 32}},
      {{256, 4, 1, 16}, {256, 4, 16, 12}}, {{3, 5, 7, 33}, {3, 5, 33, 9}},
      {{4, 2, 24, 300}, {4, 2, 300, 16}},  {{64, 10, 32}, {32, 200}}};
  const int threads = get_num_threads();
  on_both_batched_paths([&] {
    for (bool bf16 : {false, true}) {
      if (bf16 && !bf16_supported()) continue;
      PrecisionScope precision(bf16 ? Precision::bf16 : Precision::f32);
      std::uint64_t seed = 40;
      for (const Case& c : cases) {
        Tensor a = rand32(c.a, seed++), b = rand32(c.b, seed++);
        ASSERT_LT(shape_numel(c.a) * c.b.back(), detail::kSerialGemmWork);
        set_num_threads(1);
        const Tensor one = matmul(a, b);
        set_num_threads(std::max(2, threads));
        const Tensor two = matmul(a, b);
        EXPECT_TRUE(same_bits(one, two))
            << shape_str(c.a) << " @ " << shape_str(c.b) << (bf16 ? " bf16" : " f32");
      }
    }
  });
  set_num_threads(threads);
}

// Single f32 products from row_block_work() multiply-adds on are cut into
// row blocks that the team computes (ops/row_blocks.h). Random odd shapes
// below kSerialGemmWork give the same bits on one thread as on two on every
// ISA (on AVX2 they would not, were they cut: oneDNN's rows there depend on
// the block's height), and where the line sits below it (oneDNN on AVX-512)
// so do shapes up to 4 times past it; all four transposes.
TEST(Matmul, SingleProductsSameBitsOnOneThreadAsOnTwo) {
  const std::int64_t line = detail::row_block_work();
  ASSERT_LE(line, detail::kSerialGemmWork);
  const std::int64_t top =
      line < detail::kSerialGemmWork ? 4 * detail::kSerialGemmWork : detail::kSerialGemmWork;
  const int threads = get_num_threads();
  std::uint64_t seed = 500;
  std::mt19937_64 rng(12345);
  const auto draw = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  int tried = 0, past_serial = 0;
  while (tried < 40) {
    const std::int64_t m = draw(33, 1500), k = draw(1, 300), n = draw(1, 300);
    const std::int64_t work = m * k * n;
    if (work < detail::kSerialGemmWork / 16 || work >= top) continue;
    ++tried;
    past_serial += work >= detail::kSerialGemmWork;
    const bool ta = draw(0, 1) == 1, tb = draw(0, 1) == 1;
    Tensor a = ta ? rand32({k, m}, seed).transpose(0, 1) : rand32({m, k}, seed);
    Tensor b = tb ? rand32({n, k}, seed + 1).transpose(0, 1) : rand32({k, n}, seed + 1);
    seed += 2;
    set_num_threads(1);
    const Tensor one = matmul(a, b);
    set_num_threads(std::max(2, threads));
    const Tensor two = matmul(a, b);
    EXPECT_TRUE(same_bits(one, two))
        << m << " x " << k << " x " << n << (ta ? " (a transposed)" : "")
        << (tb ? " (b transposed)" : "");
  }
  if (line < detail::kSerialGemmWork) {
    EXPECT_GT(past_serial, 0);
  }
  set_num_threads(threads);
}

TEST(Matmul, F64MatchesReference) {
  Generator gen(5);
  Tensor a = uniform(-1, 1, {3, 33, 17}, gen, DType::f64);
  Tensor b = uniform(-1, 1, {65, 17}, gen, DType::f64).transpose(0, 1);
  expect_matches_reference(matmul(a, b), a, b, 1e-13);
  Tensor big_a = uniform(-1, 1, {129, 129}, gen, DType::f64);
  Tensor big_b = uniform(-1, 1, {129, 65}, gen, DType::f64);
  expect_matches_reference(matmul(big_a, big_b), big_a, big_b, 1e-13);
}

TEST(Matmul, EmptyAndZeroInner) {
  Tensor c = matmul(zeros({3, 0}), zeros({0, 4}));
  EXPECT_EQ(c.shape(), (Shape{3, 4}));
  EXPECT_EQ(to_vector<float>(c), std::vector<float>(12, 0.0f));
  EXPECT_EQ(matmul(zeros({0, 3}), zeros({3, 4})).shape(), (Shape{0, 4}));
  EXPECT_EQ(matmul(zeros({2, 0, 3, 5}), zeros({5, 4})).shape(), (Shape{2, 0, 3, 4}));
}

TEST(Matmul, Gradcheck2D) {
  Tensor a = leaf64({3, 5}, 1), b = leaf64({5, 4}, 2);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, {a, b});
  Tensor row = leaf64({1, 7}, 3), col = leaf64({7, 1}, 4);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, {row, col});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return matmul(v[1], v[0]); }, {row, col});
}

TEST(Matmul, GradcheckBatchedAndBroadcast) {
  std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 5}, {2, 5, 4}},  // bmm-like
      {{2, 3, 5}, {5, 4}},  // Linear: folded forward and dB
      {{3, 5}, {2, 5, 4}},  // a shared by the batch
      {{2, 1, 3, 5}, {3, 5, 4}},  // both broadcast
      {{2, 3, 3, 5}, {1, 5, 1}},  // b (1, 5, 1) shared
  };
  std::uint64_t seed = 10;
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE(shape_str(sa) + " @ " + shape_str(sb));
    Tensor a = leaf64(sa, seed++), b = leaf64(sb, seed++);
    EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, {a, b});
  }
}

TEST(Matmul, GradcheckTransposedAndPermuted) {
  Tensor a = leaf64({5, 3}, 1), b = leaf64({4, 5}, 2);
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& v) {
        return matmul(v[0].transpose(0, 1), v[1].transpose(0, 1));
      },
      {a, b});
  Tensor x = leaf64({3, 2, 5}, 3), w = leaf64({7, 5}, 4);
  // (T, B, D) -> (B, T, D) @ W^T: the nn::Linear call on a permuted input.
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& v) {
        return matmul(v[0].transpose(0, 1), v[1].transpose(0, 1));
      },
      {x, w});
  Tensor q = leaf64({2, 3, 2, 5}, 5), k = leaf64({2, 4, 2, 5}, 6);
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& v) {
        return matmul(v[0].permute({0, 2, 1, 3}), v[1].permute({0, 2, 3, 1}));
      },
      {q, k});
  Tensor s = leaf64({3, 10}, 7), t = leaf64({3, 4}, 8);
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& v) {
        return matmul(v[0].slice(1, 0, 10, 2).transpose(0, 1), v[1]);
      },
      {s, t});
}

TEST(Matmul, GradcheckBmm) {
  Tensor a = leaf64({3, 4, 5}, 1), b = leaf64({3, 4, 5}, 2);
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return bmm(v[0], v[1].transpose(1, 2)); },
                   {a, b});
}

TEST(Matmul, GradOfSharedWeightSumsOverBatch) {
  // dW of (B, T, D) @ (D, N) equals the sum of the per-item gradients.
  Tensor x = leaf64({4, 3, 5}, 1), w = leaf64({5, 2}, 2);
  sum(matmul(x, w)).backward();
  Tensor x2 = x.detach(), w2 = w.detach().expand({4, 5, 2}).contiguous();
  w2.requires_grad_();
  sum(matmul(x2, w2)).backward();
  EXPECT_LT(max_abs_diff(w.grad(), sum(w2.grad(), {0})), 1e-12);
}

TEST(Matmul, ErrorsNameOpAndShapes) {
  EXPECT_EQ(error_of([] {
              matmul(zeros({3}), zeros({3, 4}));
            }),
            "matmul: expected tensors with at least 2 dims, got a [3] and b [3, 4]");
  EXPECT_EQ(error_of([] {
              matmul(zeros({2, 3}), zeros({4, 5}));
            }),
            "matmul: inner dimensions differ: a is [2, 3], b is [4, 5]");
  EXPECT_EQ(error_of([] {
              matmul(zeros({2, 3, 4}), zeros({5, 4, 6}));
            }),
            "matmul: batch dims do not broadcast: a is [2, 3, 4], b is [5, 4, 6]");
  EXPECT_EQ(error_of([] {
              matmul(zeros({2, 3}), zeros({3, 4}, DType::f64));
            }),
            "matmul: dtypes differ: a is f32 [2, 3], b is f64 [3, 4]");
  EXPECT_EQ(error_of([] {
              matmul(zeros({2, 3}, DType::i64), zeros({3, 4}, DType::i64));
            }),
            "matmul: expected a floating dtype (f32 or f64), got i64: a is [2, 3], b is [3, 4]");
  EXPECT_EQ(error_of([] {
              bmm(zeros({2, 3}), zeros({3, 4}));
            }),
            "bmm: expected 3-D tensors, got a [2, 3] and b [3, 4]");
  EXPECT_EQ(error_of([] {
              bmm(zeros({2, 3, 4}), zeros({1, 4, 5}));
            }),
            "bmm: batch sizes differ: a is [2, 3, 4], b is [1, 4, 5]");
  EXPECT_EQ(error_of([] {
              bmm(zeros({2, 3, 4}), zeros({2, 5, 5}));
            }),
            "bmm: inner dimensions differ: a is [2, 3, 4], b is [2, 5, 5]");
  EXPECT_THROW(matmul(zeros({2, 3}), zeros({4, 5})), ShapeError);
  EXPECT_THROW(matmul(zeros({2, 3}, DType::i32), zeros({3, 4}, DType::i32)), DTypeError);
}

// linear(x, W, b) against the unfused definition, on both sides of the tiny
// threshold (plain loops below it, oneDNN above) and for 1-, 2- and 3-D inputs.
TEST(Linear, MatchesMatmulPlusBiasOnOddSizes) {
  std::uint64_t seed = 100;
  for (const Shape& xs : std::vector<Shape>{{7}, {1, 3}, {5, 33}, {3, 11, 65}, {2, 129, 33}})
    for (std::int64_t n : {1, 7, 65, 201}) {
      const std::int64_t k = xs.back();
      Tensor x = rand32(xs, seed++), w = rand32({n, k}, seed++), b = rand32({n}, seed++);
      Tensor x2 = x.dim() == 1 ? x.unsqueeze(0) : x;
      Tensor ref = add(matmul_reference(x2, w.transpose(0, 1)), b);
      Tensor y = linear(x, w, b);
      Shape expect = xs;
      expect.back() = n;
      ASSERT_EQ(y.shape(), expect);
      auto vy = to_vector<float>(y), vr = to_vector<float>(ref);
      for (std::size_t i = 0; i < vy.size(); ++i)
        ASSERT_NEAR(vy[i], vr[i], 1e-4 * (1 + std::fabs(vr[i]))) << shape_str(xs) << " n " << n;
      auto vn = to_vector<float>(linear(x, w));
      auto vm = to_vector<float>(matmul_reference(x2, w.transpose(0, 1)));
      for (std::size_t i = 0; i < vn.size(); ++i)
        ASSERT_NEAR(vn[i], vm[i], 1e-4 * (1 + std::fabs(vm[i])));
    }
}

// The backward of a small layer runs dx and dW side by side on two threads
// (linear.cpp): the same bits as on one thread, for d2l's toy shapes (rows
// 64 x 10, width 32; the output layer's 214) and odd ones, with and without
// the ReLU.
TEST(Linear, BackwardSameBitsOnOneThreadAsOnTwo) {
  struct Case {
    Shape x;
    std::int64_t n;
  };
  const int threads = get_num_threads();
  std::uint64_t seed = 300;
  for (const Case& c : {Case{{64, 10, 32}, 32}, Case{{64, 10, 32}, 214}, Case{{64, 10, 64}, 32},
                        Case{{37, 29}, 131}, Case{{3, 301, 17}, 45}})
    for (bool relu : {false, true}) {
      const std::int64_t k = c.x.back();
      Tensor x = rand32(c.x, seed++), w = rand32({c.n, k}, seed++), b = rand32({c.n}, seed++);
      Shape ys = c.x;
      ys.back() = c.n;
      Tensor g = rand32(ys, seed++);
      std::vector<Tensor> grads[2];
      for (int t : {1, 2}) {
        set_num_threads(t == 1 ? 1 : std::max(2, threads));
        Tensor xv = x.detach(), wv = w.detach(), bv = b.detach();
        for (Tensor* p : {&xv, &wv, &bv}) p->requires_grad_();
        Tensor y = relu ? linear_relu(xv, wv, bv) : linear(xv, wv, bv);
        y.backward(g);
        grads[t - 1] = {xv.grad(), wv.grad(), bv.grad()};
      }
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(std::memcmp(grads[0][i].contiguous().data<float>(),
                              grads[1][i].contiguous().data<float>(),
                              grads[0][i].numel() * sizeof(float)),
                  0)
            << shape_str(c.x) << " n " << c.n << (relu ? " relu" : "") << " grad " << i;
    }
  set_num_threads(threads);
}

TEST(Linear, Gradcheck) {
  auto with_bias = [](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); };
  auto without = [](const std::vector<Tensor>& v) { return linear(v[0], v[1]); };
  for (const Shape& xs : std::vector<Shape>{{5}, {3, 5}, {2, 3, 5}}) {
    Tensor x = leaf64(xs, 1), w = leaf64({4, 5}, 2), b = leaf64({4}, 3);
    EXPECT_GRADCHECK(with_bias, {x, w, b});
    EXPECT_GRADCHECK(without, {x, w});
  }
  // A transposed (non-contiguous) input.
  Tensor xt = leaf64({5, 3}, 4), w = leaf64({2, 3}, 5), b = leaf64({2}, 6);
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& v) {
        return linear(v[0].transpose(0, 1).transpose(0, 1), v[1], v[2]);
      },
      {xt, w, b});
}

TEST(Linear, Errors) {
  EXPECT_EQ(error_of([] {
              linear(zeros({2, 3}), zeros({4, 5}));
            }),
            "linear: expected input (..., 5) for weight [4, 5], got [2, 3]");
  EXPECT_EQ(error_of([] {
              linear(zeros({2, 5}), zeros({4, 5}), zeros({3}));
            }),
            "linear: expected a bias (4) for weight [4, 5], got [3]");
  EXPECT_EQ(error_of([] {
              linear(zeros({2, 5}), zeros({5}));
            }),
            "linear: expected a weight (out, in), got [5]");
}

namespace {

// y, dx and dW (and db where b0 is defined) of linear_relu (fused) or of
// relu(linear) on copies of x0, w0 and b0, through the loss sum(y r).
std::vector<Tensor> relu_layer(bool fused, const Tensor& x0, const Tensor& w0, const Tensor& b0,
                               const Tensor& r) {
  Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(),
         b = b0.defined() ? b0.clone().requires_grad_() : Tensor();
  Tensor y = fused ? linear_relu(x, w, b) : relu(linear(x, w, b));
  sum(mul(y, r)).backward();
  std::vector<Tensor> out = {y.detach(), x.grad(), w.grad()};
  if (b0.defined()) out.push_back(b.grad());
  return out;
}

}  // namespace

// linear_relu against relu(linear(...)): the same bits forward and in every
// gradient, on odd sizes on both sides of the tiny threshold, with and
// without a bias, 1- to 3-D inputs; about half the pre-activations are
// negative.
TEST(LinearRelu, SameBitsAsReluOfLinear) {
  std::uint64_t seed = 300;
  std::int64_t positive = 0, clamped = 0;
  for (const Shape& xs : std::vector<Shape>{{7}, {1, 3}, {5, 33}, {3, 11, 65}, {2, 129, 33}})
    for (std::int64_t n : {1, 7, 65, 201})
      for (bool with_bias : {true, false}) {
        const std::int64_t k = xs.back();
        Tensor x0 = rand32(xs, seed++), w0 = rand32({n, k}, seed++), b0 = rand32({n}, seed++);
        Shape ys = xs;
        ys.back() = n;
        Tensor r = rand32(ys, seed++);
        const Tensor b = with_bias ? b0 : Tensor();
        auto fused = relu_layer(true, x0, w0, b, r), composite = relu_layer(false, x0, w0, b, r);
        for (std::size_t i = 0; i < fused.size(); ++i) {
          auto vf = to_vector<float>(fused[i]), vc = to_vector<float>(composite[i]);
          ASSERT_EQ(vf.size(), vc.size());
          ASSERT_EQ(std::memcmp(vf.data(), vc.data(), vf.size() * sizeof(float)), 0)
              << "tensor " << i << " (y, dx, dw, db) for x " << shape_str(xs) << ", n " << n
              << (with_bias ? ", bias" : ", no bias");
        }
        for (float v : to_vector<float>(fused[0])) (v > 0 ? positive : clamped) += 1;
      }
  // Both sides of the kink were exercised.
  EXPECT_GT(positive, 1000);
  EXPECT_GT(clamped, 1000);
}

// Where the hidden width is a multiple of 1024 floats and the products are
// large, linear_relu's backward writes its masked gradient with the rows
// further apart (linear.cpp); the composite's relu writes them contiguous,
// and matmul copies them apart for dW. The same bits, with and without a
// bias (whose gradient sums the spaced rows), and the reference's values.
TEST(LinearRelu, WideHiddenLayerSameBitsAsReluOfLinear) {
  const std::int64_t n = detail::kAliasedLd, k = 256;
  for (bool with_bias : {true, false}) {
    Tensor x0 = rand32({2, 37, k}, 400), w0 = rand32({n, k}, 401), b0 = rand32({n}, 402);
    Tensor r = rand32({2, 37, n}, 403);
    const Tensor b = with_bias ? b0 : Tensor();
    auto fused = relu_layer(true, x0, w0, b, r), composite = relu_layer(false, x0, w0, b, r);
    for (std::size_t i = 0; i < fused.size(); ++i)
      EXPECT_TRUE(same_bits(fused[i], composite[i]))
          << "tensor " << i << " (y, dx, dw, db)" << (with_bias ? ", bias" : ", no bias");
    Tensor masked = mul(r, gt(fused[0], 0.0)).reshape({-1, n});
    expect_matches_reference(fused[2], masked.transpose(0, 1), x0.reshape({-1, k}));
    expect_matches_reference(fused[1].reshape({-1, k}), masked, w0);
  }
}

TEST(LinearRelu, Gradcheck) {
  auto with_bias = [](const std::vector<Tensor>& v) { return linear_relu(v[0], v[1], v[2]); };
  auto without = [](const std::vector<Tensor>& v) { return linear_relu(v[0], v[1]); };
  for (const Shape& xs : std::vector<Shape>{{5}, {3, 5}, {2, 3, 5}}) {
    Tensor x = leaf64(xs, 11), w = leaf64({4, 5}, 12), b = leaf64({4}, 13);
    EXPECT_GRADCHECK(with_bias, {x, w, b});
    EXPECT_GRADCHECK(without, {x, w});
  }
}

TEST(LinearRelu, Errors) {
  EXPECT_EQ(error_of([] {
              linear_relu(zeros({2, 3}), zeros({4, 5}));
            }),
            "linear_relu: expected input (..., 5) for weight [4, 5], got [2, 3]");
  EXPECT_EQ(error_of([] {
              linear_relu(zeros({2, 5}), zeros({4, 5}), zeros({3}));
            }),
            "linear_relu: expected a bias (4) for weight [4, 5], got [3]");
}
