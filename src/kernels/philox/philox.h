// src/kernels/philox/philox.h — internal: the Philox4x32-10 words of a run of
// counters, the random bits of every dropout mask (ops dropout, add + layer
// norm, the fused attention kernels).
//
// philox_words(ctr0, key, n, out): out[4 j + w] = word w of
// philox_inline(ctr0 + j, key) (kernels/philox/philox_inline.h, the same function as
// core's attn::philox4x32 for counter (ctr, 0)) for j < n. Where the CPU
// has AVX-512 F it runs 16 counters at a time in 32-bit lanes, each round's
// two 32 x 32 -> 64-bit products as even and odd lanes (vpmuludq), then
// reorders the four words of each counter; the same bits as the plain
// loop (tests/kernels/philox_test.cpp), which GCC vectorized with 64-bit lanes
// and their slower products: about 2x faster on an Intel Xeon (model
// 207; 2.6-2.7 against 5.0-5.8 ns a counter, 400 counters a call).
// Where it has AVX2 and no AVX-512, the same in 8 lanes: 7.5 against 10.7
// ns a counter on an AMD EPYC Zen 1 (GCC's loop in 128-bit registers there).
#pragma once

#include <cstdint>

#include "kernels/vec/vec_form.h"

namespace attn::detail {

void philox_words(std::uint64_t ctr0, std::uint64_t key, std::int64_t n, std::uint32_t* out);

// The forms (kernels/vec/vec_form.h): AVX2 needs AVX2, AVX-512 needs AVX-512 F.
// philox_words runs philox_form(): the best this CPU has, capped by
// ATTN_ISA; philox_words_on the one named, which this CPU must have.
bool philox_cpu_has(VecForm form);
VecForm philox_form();
void philox_words_on(VecForm form, std::uint64_t ctr0, std::uint64_t key, std::int64_t n,
                     std::uint32_t* out);

// The forms in their own translation units (philox_avx512.cpp,
// philox_avx2.cpp), called by philox_words_on.
void philox_words_avx512(std::uint64_t ctr0, std::uint64_t key, std::int64_t n, std::uint32_t* out);
void philox_words_avx2(std::uint64_t ctr0, std::uint64_t key, std::int64_t n, std::uint32_t* out);

// The plain loop over philox_inline, for tests.
void philox_words_reference(std::uint64_t ctr0, std::uint64_t key, std::int64_t n,
                            std::uint32_t* out);

}  // namespace attn::detail
