// The op-case table (op_cases.h) run as tests: each case's f32 path against
// its reference within the stated tolerance, and its f64 gradient check.
// `ops_cases_test --perf [FILTER] [--reps N]` times the cases instead.
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "op_cases.h"
#include "testing.h"

using namespace attn;
using namespace attn::cases;

namespace {

class OpCases : public ::testing::TestWithParam<std::size_t> {};

std::string param_name(const ::testing::TestParamInfo<std::size_t>& info) {
  std::string name = case_name(op_cases()[info.param]);
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return std::to_string(info.param) + "_" + name;
}

std::vector<std::size_t> all_indices() {
  std::vector<std::size_t> v(op_cases().size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

}  // namespace

TEST_P(OpCases, MatchesItsReference) {
  const OpCase& c = op_cases()[GetParam()];
  EXPECT_EQ(check_against_reference(c), "") << case_shapes(c, false);
  // The perf shapes too, where they are small enough to compare quickly.
  std::int64_t elements = 0;
  for (const Tensor& t : make_inputs(c, DType::f32, 1, true)) elements += t.numel();
  if (elements <= (1 << 22)) {
    OpCase big = c;
    for (Input& in : big.inputs)
      if (!in.perf_shape.empty()) in.shape = in.perf_shape;
    EXPECT_EQ(check_against_reference(big, 5), "") << case_shapes(c, true);
  }
}

TEST_P(OpCases, GradientsMatchCentralDifferences) {
  EXPECT_EQ(check_gradients(op_cases()[GetParam()]), "");
}

INSTANTIATE_TEST_SUITE_P(Table, OpCases, ::testing::ValuesIn(all_indices()), param_name);

// The table names every case once, and each has inputs and a function.
TEST(OpCaseTable, NamesAreUniqueAndCasesComplete) {
  std::set<std::string> names;
  for (const OpCase& c : op_cases()) {
    EXPECT_TRUE(names.insert(case_name(c)).second) << case_name(c);
    EXPECT_FALSE(c.inputs.empty()) << case_name(c);
    EXPECT_TRUE(static_cast<bool>(c.fn)) << case_name(c);
    EXPECT_GT(c.tol, 0.0) << case_name(c);
  }
}

// A wrong result is caught: the table's check is not vacuous. (A case
// with a reference: one without compares the op with itself in f64, where a
// wrong op is wrong in both.)
TEST(OpCaseTable, ACheckFailsWhenTheOpIsWrong) {
  for (const OpCase& right : op_cases()) {
    if (!right.reference) continue;
    OpCase wrong = right;
    wrong.fn = [f = right.fn](const std::vector<Tensor>& x) { return mul(f(x), 1.001); };
    EXPECT_NE(check_against_reference(wrong), "") << case_name(right);
  }
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--perf") != 0) continue;
    std::string filter;
    int reps = 21;
    for (int j = 1; j < argc; ++j) {
      if (j == i) continue;
      if (std::strcmp(argv[j], "--reps") == 0 && j + 1 < argc) {
        reps = std::max(1, std::atoi(argv[++j]));
      } else {
        filter = argv[j];
      }
    }
    return run_perf(filter, reps);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
