// attn/version.h — the version of these headers, and of the library linked in.
//
// The numbers below are the one place the version is written: CMake reads
// them for project(VERSION), attnConfigVersion.cmake and attn.pc.
#pragma once

#define ATTN_VERSION_MAJOR 0
#define ATTN_VERSION_MINOR 1
#define ATTN_VERSION_PATCH 0

// One number that grows with every release: major * 10000 + minor * 100 +
// patch (0.1.0 is 100), for `#if ATTN_VERSION >= 100`.
#define ATTN_VERSION (ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH)

#define ATTN_VERSION_STR_(x) #x
#define ATTN_VERSION_STR(x) ATTN_VERSION_STR_(x)
// "major.minor.patch", e.g. "0.1.0".
#define ATTN_VERSION_STRING            \
  ATTN_VERSION_STR(ATTN_VERSION_MAJOR) \
  "." ATTN_VERSION_STR(ATTN_VERSION_MINOR) "." ATTN_VERSION_STR(ATTN_VERSION_PATCH)

namespace attn {

// The version of the library linked in, "major.minor.patch". A program can
// compare it with ATTN_VERSION_STRING, the version of the headers it was
// compiled with.
const char* version();

// The CPUs the library's own code was compiled for (the attention kernels
// choose their instruction set at run time whatever this says; see
// attention_kernel_config() in attn/ops/attention.h): "x86-64 with AVX-512",
// "x86-64 with AVX2", "any x86-64" (a portable build), or the architecture's
// name elsewhere.
const char* compiled_for();

}  // namespace attn
