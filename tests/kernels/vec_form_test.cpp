// The forms the kernels chosen at run time take (src/kernels/vec/vec_form.h):
// the best each kernel's forms the CPU has, capped by ATTN_ISA, which the
// portable build's test passes set to avx2 and portable, so that each pass
// runs what a CPU without AVX-512 (or without AVX2) would.
#include "kernels/vec/vec_form.h"

#include <cstdlib>
#include <string>

#include "kernels/philox/philox.h"
#include "kernels/row_stats/row_stats.h"
#include "testing.h"

using namespace attn::detail;

namespace {

VecForm cap_from_env() {
  const char* env = std::getenv("ATTN_ISA");
  const std::string isa = env ? env : "";
  if (isa == "avx2") return VecForm::avx2;
  if (isa == "portable") return VecForm::reference;
  return VecForm::avx512;
}

// The best form of a kernel that the CPU has and `cap` allows, written out.
VecForm want_form(bool (*cpu_has)(VecForm), VecForm cap) {
  if (cap == VecForm::avx512 && cpu_has(VecForm::avx512)) return VecForm::avx512;
  if (cap != VecForm::reference && cpu_has(VecForm::avx2)) return VecForm::avx2;
  return VecForm::reference;
}

TEST(VecForm, CapFollowsAttnIsa) { EXPECT_EQ(form_cap(), cap_from_env()); }

TEST(VecForm, ChosenFormIsTheBestTheCpuHasUnderTheCap) {
  const VecForm cap = cap_from_env();
  // Kernels whose forms a CPU has in any combination: the choice never
  // passes the cap, and falls to the next form the CPU has.
  const auto all = [](VecForm) { return true; };
  const auto no_avx512 = [](VecForm f) { return f != VecForm::avx512; };
  const auto avx512_only = [](VecForm f) { return f == VecForm::avx512; };
  const auto none = [](VecForm) { return false; };
  EXPECT_EQ(chosen_form(all), cap);
  EXPECT_EQ(chosen_form(no_avx512), cap == VecForm::reference ? cap : VecForm::avx2);
  EXPECT_EQ(chosen_form(avx512_only),
            cap == VecForm::avx512 ? VecForm::avx512 : VecForm::reference);
  EXPECT_EQ(chosen_form(none), VecForm::reference);
}

TEST(VecForm, KernelsRunTheirChosenForm) {
  const VecForm cap = cap_from_env();
  EXPECT_EQ(row_stats_form(), want_form(row_stats_cpu_has, cap));
  EXPECT_EQ(philox_form(), want_form(philox_cpu_has, cap));
}

}  // namespace
