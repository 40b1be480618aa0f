// src/kernels/target.h — internal: the one way a kernel is compiled for an
// instruction set whatever the build targets (-march=native or the portable
// baseline), to be called only where the CPU has it.
//
//   #include <immintrin.h>                 // headers first, for the baseline
//   #include "kernels/target.h"
//   ATTN_TARGET_BEGIN("avx2,fma")          // GCC's target names
//   namespace { ... the kernel ... }        // internal linkage, see below
//   ATTN_TARGET_END
//   void f32_gemm_avx2(...) { ... }         // the entry, for the baseline
//
// Each instruction set's kernels are a translation unit of their own,
// named after it (f32_gemm_avx512.cpp, f32_gemm_avx2.cpp, ...).
//
// GCC: `#pragma GCC push_options` + `target`, popped at the end; clang (the
// fuzz build), which ignores that pragma: an attribute pushed onto every
// function. Inside a region, no inline or template function with external
// linkage may be instantiated (the standard library's, or gemm_tiles'
// run_tiles): its copy compiled here could be the one the linker keeps for
// every caller, and run AVX-512 on a CPU without it. So the kernels have
// internal linkage, and what other translation units call is declared in a
// header before the region (GCC takes a function declared inside two
// regions for two versions of one: multiversioning) and defined after it,
// for the baseline, calling the kernel (the attention tables, whose
// templates all have internal linkage, are defined inside).
//
// ATTN_TARGET_BEGIN_AVX512 / ATTN_TARGET_END_AVX512 also silence GCC 12's
// -Wmaybe-uninitialized inside its own AVX-512 intrinsics (GCC bug 105593).
#pragma once

#define ATTN_TARGET_PRAGMA(x) _Pragma(#x)

#if defined(__clang__)
#define ATTN_TARGET_BEGIN(isa) \
  ATTN_TARGET_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define ATTN_TARGET_END ATTN_TARGET_PRAGMA(clang attribute pop)
#else
#define ATTN_TARGET_BEGIN(isa) \
  ATTN_TARGET_PRAGMA(GCC push_options) ATTN_TARGET_PRAGMA(GCC target(isa))
#define ATTN_TARGET_END ATTN_TARGET_PRAGMA(GCC pop_options)
#endif

#define ATTN_TARGET_BEGIN_AVX512(isa)                                \
  ATTN_TARGET_BEGIN(isa)                                             \
  ATTN_TARGET_PRAGMA(GCC diagnostic push)                            \
  ATTN_TARGET_PRAGMA(GCC diagnostic ignored "-Wmaybe-uninitialized") \
  ATTN_TARGET_PRAGMA(GCC diagnostic ignored "-Wuninitialized")
#define ATTN_TARGET_END_AVX512 ATTN_TARGET_PRAGMA(GCC diagnostic pop) ATTN_TARGET_END
