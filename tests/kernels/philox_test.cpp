// The Philox words of every dropout mask (src/kernels/philox/philox.h): the 16-lane
// AVX-512 and 8-lane AVX2 kernels (those this CPU has) against the plain
// loop and against core's philox4x32, on runs of every length around 8 and
// 16, counters whose low word carries into the high one inside a run, and
// several keys.
#include "kernels/philox/philox.h"

#include <cstdint>
#include <vector>

#include "attn/core/rng.h"
#include "testing.h"

using namespace attn;
using namespace attn::detail;

namespace {

TEST(Philox, WordsEqualTheReferenceAndCore) {
  const std::uint64_t keys[] = {0, 42, 0x1234567890ABCDEFull, ~0ull};
  const std::uint64_t starts[] = {0, 5, 0xFFFFFFF0ull, 0xFFFFFFFFull, 0x1FFFFFFF7ull, ~0ull - 40};
  for (std::uint64_t key : keys)
    for (std::uint64_t ctr0 : starts)
      for (std::int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 257}) {
        SCOPED_TRACE(::testing::Message() << "key " << key << " ctr0 " << ctr0 << " n " << n);
        std::vector<std::uint32_t> want(static_cast<std::size_t>(4 * n + 4), 7u);
        philox_words_reference(ctr0, key, n, want.data());
        for (VecForm form : {VecForm::avx2, VecForm::avx512}) {
          if (!philox_cpu_has(form)) continue;
          std::vector<std::uint32_t> words(want.size(), 7u);
          philox_words_on(form, ctr0, key, n, words.data());
          ASSERT_EQ(words, want) << (form == VecForm::avx2 ? "avx2" : "avx512");
        }
        std::vector<std::uint32_t> got(want.size(), 7u);
        philox_words(ctr0, key, n, got.data());
        ASSERT_EQ(got, want);  // the 4 words past the run untouched too
        for (std::int64_t j = 0; j < n; j += 7) {
          const auto core = philox4x32(ctr0 + static_cast<std::uint64_t>(j), 0, key);
          for (int w = 0; w < 4; ++w)
            ASSERT_EQ(got[static_cast<std::size_t>(4 * j + w)], core[static_cast<std::size_t>(w)])
                << "counter " << j << " word " << w;
        }
      }
}

}  // namespace
