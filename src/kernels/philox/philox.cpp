// The Philox words of kernels/philox/philox.h: the plain loop and the choice
// of form (the AVX-512 and AVX2 ones: philox_avx512.cpp, philox_avx2.cpp).
#include "kernels/philox/philox.h"

#include "kernels/philox/philox_inline.h"

namespace attn::detail {

void philox_words_reference(std::uint64_t ctr0, std::uint64_t key, std::int64_t n,
                            std::uint32_t* out) {
#pragma omp simd
  for (std::int64_t j = 0; j < n; ++j)
    philox_inline(ctr0 + static_cast<std::uint64_t>(j), key, out + 4 * j);
}

bool philox_cpu_has(VecForm form) {
  switch (form) {
    case VecForm::reference: return true;
    case VecForm::avx2: return __builtin_cpu_supports("avx2") != 0;
    case VecForm::avx512: return __builtin_cpu_supports("avx512f") != 0;
  }
  return false;
}

void philox_words_on(VecForm form, std::uint64_t ctr0, std::uint64_t key, std::int64_t n,
                     std::uint32_t* out) {
  switch (form) {
    case VecForm::avx512: return philox_words_avx512(ctr0, key, n, out);
    case VecForm::avx2: return philox_words_avx2(ctr0, key, n, out);
    case VecForm::reference: break;
  }
  philox_words_reference(ctr0, key, n, out);
}

// Every form gives the same words (each has a test of its own); the best the
// CPU has runs, capped by ATTN_ISA (vec_form.h).
VecForm philox_form() {
  static const VecForm form = chosen_form(philox_cpu_has);
  return form;
}

void philox_words(std::uint64_t ctr0, std::uint64_t key, std::int64_t n, std::uint32_t* out) {
  philox_words_on(philox_form(), ctr0, key, n, out);
}

}  // namespace attn::detail
