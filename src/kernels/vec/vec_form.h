// src/kernels/vec/vec_form.h — internal: the forms of a kernel written more than
// once: its plain loops (the reference), and kernels for AVX2 + FMA and for
// AVX-512, each compiled for its instruction set whatever the build targets
// and chosen at run time (row_stats.h, philox.h, and the matrix products'
// tiles). Each kernel says which CPU features a form needs (its *_cpu_has)
// and offers a *_on function that runs a named form, for tests on every form
// the CPU has.
#pragma once

namespace attn::detail {

// Ordered: a higher form runs where the CPU has its features.
enum class VecForm { reference, avx2, avx512 };

// The highest form ATTN_ISA (attn/core/env.h) lets a kernel run: avx512 when
// unset or "avx512", avx2 for "avx2", the reference for "portable". ATTN_ISA
// stands for a CPU without AVX-512 (avx2) or without AVX2 (portable), so that
// one machine runs, times and tests what such a CPU would: every kernel
// chosen at run time takes the best of its forms that the CPU has and this
// allows (chosen_form). Read once; an unknown name throws isa_cap()'s
// ValueError. The attention kernels apply the same names more strictly: a
// set the CPU cannot run is an error there (ops/attention.cpp).
VecForm form_cap();

// That choice for a kernel whose forms need what `cpu_has` says.
VecForm chosen_form(bool (*cpu_has)(VecForm));

}  // namespace attn::detail
