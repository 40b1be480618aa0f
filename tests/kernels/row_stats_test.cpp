// The row statistics of decoding's log-softmax (src/kernels/row_stats/row_stats.h): every
// vector form this CPU has (AVX2, AVX-512) against the plain reference, and
// both against f64.
#include "kernels/row_stats/row_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "testing.h"

using namespace attn::detail;

namespace {

struct Form {
  VecForm form;
  const char* name;
};

// The vector forms this CPU runs; none on a CPU without AVX2 (then only the
// default row_stats, the reference there, is checked, in RowMax below).
std::vector<Form> cpu_forms() {
  std::vector<Form> out;
  for (Form f : {Form{VecForm::avx2, "avx2"}, Form{VecForm::avx512, "avx512"}})
    if (row_stats_cpu_has(f.form)) out.push_back(f);
  return out;
}

// log(sum exp(x)) in f64 throughout.
double exact_log_sum_exp(const std::vector<float>& x) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : x) m = std::max(m, static_cast<double>(v));
  double s = 0;
  for (float v : x) s += std::exp(static_cast<double>(v) - m);
  return m + std::log(s);
}

TEST(RowStats, KernelEqualsReferenceOnRandomRowsOfOddSizes) {
  std::mt19937 gen(7);
  for (double spread : {0.5, 3.0, 12.0, 40.0}) {
    std::normal_distribution<float> dist(1.0f, static_cast<float>(spread));
    for (std::int64_t V : {1, 2, 31, 32, 33, 47, 63, 64, 65, 95, 127, 1001, 8000, 8003, 32003}) {
      std::vector<float> x(static_cast<std::size_t>(V));
      for (float& v : x) v = dist(gen);
      const RowStats ref = row_stats_reference(x.data(), V);
      for (const Form& f : cpu_forms()) {
        const RowStats fast = row_stats_on(f.form, x.data(), V);
        // The maximum is exact; log-sum-exp within 4e-9 relative (measured:
        // 5e-10 at most for AVX-512; 2e-16 for AVX2, whose exponentials are
        // the reference's where both are built with FMA, and 1.6e-9 against
        // the reference of the portable build, which has none; the logits'
        // own f32 rounding is about 6e-8 relative).
        EXPECT_EQ(fast.max, ref.max) << f.name << ", V " << V << ", spread " << spread;
        const double tol = 4e-9 * std::max(1.0, std::fabs(ref.log_sum_exp));
        EXPECT_NEAR(fast.log_sum_exp, ref.log_sum_exp, tol)
            << f.name << ", V " << V << ", spread " << spread;
        // Both sum f32 exponentials (about 2 ulp, 1.2e-7 relative, each).
        EXPECT_NEAR(fast.log_sum_exp, exact_log_sum_exp(x), 2.5e-7)
            << f.name << ", V " << V << ", spread " << spread;
      }
    }
  }
}

TEST(RowStats, ExtremeLogitsAsTheReference) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t V : {5, 40, 100, 1000}) {
    const auto n = static_cast<std::size_t>(V);
    auto check = [&](const std::vector<float>& x, const char* what) {
      const RowStats ref = row_stats_reference(x.data(), V);
      for (const Form& f : cpu_forms()) {
        const RowStats fast = row_stats_on(f.form, x.data(), V);
        if (std::isnan(ref.max)) {
          EXPECT_TRUE(std::isnan(fast.max)) << f.name << ", " << what << ", V " << V;
        } else {
          EXPECT_EQ(fast.max, ref.max) << f.name << ", " << what << ", V " << V;
        }
        if (std::isnan(ref.log_sum_exp)) {
          EXPECT_TRUE(std::isnan(fast.log_sum_exp)) << f.name << ", " << what << ", V " << V;
        } else {
          EXPECT_NEAR(fast.log_sum_exp, ref.log_sum_exp, 1e-9 * std::fabs(ref.log_sum_exp) + 1e-12)
              << f.name << ", " << what << ", V " << V;
        }
      }
    };
    // Most logits far below the maximum (their exponentials flush to 0) and
    // -inf ones (a masked token): they add nothing.
    std::vector<float> far(n, -200.0f);
    far[n / 2] = 3.0f;
    far[1] = -inf;
    check(far, "far below");
    // A NaN after the first: ignored by the maximum, NaN log-sum-exp.
    std::vector<float> with_nan(n, 0.5f);
    with_nan[n - 1] = nan;
    check(with_nan, "NaN inside");
    // A NaN first: NaN maximum.
    std::vector<float> nan_first(n, 0.5f);
    nan_first[0] = nan;
    check(nan_first, "NaN first");
    // A +inf logit: NaN log-sum-exp (inf - inf), as the reference.
    std::vector<float> with_inf(n, 0.5f);
    with_inf[n / 3] = inf;
    check(with_inf, "+inf");
    // All equal: log V.
    std::vector<float> equal(n, -1.25f);
    check(equal, "equal");
    EXPECT_NEAR(row_stats(equal.data(), V).log_sum_exp, -1.25 + std::log(static_cast<double>(V)),
                1e-12);
  }
}

// row_max is row_stats' maximum, NaN rule included, on rows of odd sizes.
TEST(RowMax, EqualsTheMaximumOfRowStats) {
  std::mt19937 gen(11);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t V : {1, 2, 15, 17, 63, 64, 65, 1001, 8000, 8003}) {
    const auto n = static_cast<std::size_t>(V);
    std::vector<float> x(n);
    for (float& v : x) v = dist(gen);
    EXPECT_EQ(row_max(x.data(), V), row_stats(x.data(), V).max) << "V " << V;
    EXPECT_EQ(row_max(x.data(), V), *std::max_element(x.begin(), x.end())) << "V " << V;
    x[n - 1] = nan;  // ignored unless it is the first
    if (V > 1) {
      EXPECT_EQ(row_max(x.data(), V), row_stats(x.data(), V).max) << "V " << V;
    }
    x[0] = nan;
    EXPECT_TRUE(std::isnan(row_max(x.data(), V))) << "V " << V;
  }
}

}  // namespace

// row_top_candidates: every vector form gives the reference's positions;
// they include the m largest values (ties to the lower position, as beam
// search ranks them), and are few on logits of a decoding step's kind.
TEST(RowTopCandidates, KernelEqualsReferenceAndHoldsTheLargest) {
  std::mt19937 gen(11);
  const float inf = std::numeric_limits<float>::infinity();
  std::size_t most = 0;
  for (int kind = 0; kind < 4; ++kind) {
    for (std::int64_t V : {64, 65, 71, 127, 128, 135, 1001, 8000, 8003}) {
      std::vector<float> x(static_cast<std::size_t>(V));
      std::normal_distribution<float> normal(0.0f, 4.0f);
      std::uniform_int_distribution<int> small(0, 5);
      for (float& v : x) {
        switch (kind) {
          case 0: v = normal(gen); break;  // logits
          case 1: v = static_cast<float>(small(gen)); break;  // many ties
          case 2: v = small(gen) == 0 ? -inf : normal(gen); break;  // masked tokens
          default: v = -inf;  // all masked
        }
      }
      if (kind == 0) x[static_cast<std::size_t>(V) - 1] = 50.0f;  // the largest in the tail
      std::vector<std::int64_t> order(x.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        return x[static_cast<std::size_t>(a)] > x[static_cast<std::size_t>(b)];
      });
      for (std::int64_t m : {1, 2, 8, 9, 64}) {
        const std::string what = fmt::format("kind {}, V {}, m {}", kind, V, m);
        std::vector<std::int64_t> ref(x.size(), -1);
        ref.resize(
            static_cast<std::size_t>(row_top_candidates_reference(x.data(), V, m, ref.data())));
        EXPECT_TRUE(std::is_sorted(ref.begin(), ref.end())) << what;
        ASSERT_GE(static_cast<std::int64_t>(ref.size()), m) << what;
        for (std::int64_t k = 0; k < m; ++k)
          EXPECT_TRUE(
              std::binary_search(ref.begin(), ref.end(), order[static_cast<std::size_t>(k)]))
              << what << ": the " << k + 1 << "-th largest is missing";
        for (const Form& f : cpu_forms()) {
          std::vector<std::int64_t> fast(x.size(), -1);
          fast.resize(
              static_cast<std::size_t>(row_top_candidates_on(f.form, x.data(), V, m, fast.data())));
          EXPECT_EQ(fast, ref) << f.name << ", " << what;
        }
        std::vector<std::int64_t> chosen(x.size(), -1);
        chosen.resize(static_cast<std::size_t>(row_top_candidates(x.data(), V, m, chosen.data())));
        EXPECT_EQ(chosen, ref) << what;
        if (kind == 0 && V == 8000 && m == 8) most = ref.size();
      }
    }
  }
  // Normal logits, 8 of 8,000: a few candidates, not hundreds.
  std::printf("8 largest of 8000 normal logits: %zu candidates\n", most);
  EXPECT_LE(most, 40u);
}
