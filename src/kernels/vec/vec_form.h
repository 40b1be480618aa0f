// src/kernels/vec/vec_form.h — internal: the forms of a kernel written more than
// once: its plain loops (the reference), and kernels for AVX2 + FMA and for
// AVX-512, each compiled for its instruction set whatever the build targets
// and chosen at run time by what the CPU has (row_stats.h, philox.h). Each
// kernel says which CPU features a form needs (its *_cpu_has) and offers a
// *_on function that runs a named form, for tests on every form the CPU has.
#pragma once

namespace attn::detail {

enum class VecForm { reference, avx2, avx512 };

}  // namespace attn::detail
