// src/ops/unalias.cpp — operands whose lines lie a multiple of 4 KB apart
// (matmul_internal.h), copied with their lines further apart before a large
// product (matmul.cpp).
#include <algorithm>

#include "attn/core/threads.h"
#include "core/parallel.h"
#include "ops/matmul_internal.h"

namespace attn {

// The lines of an operand (its rows, or the columns of a transposed view)
// that lie a multiple of detail::kAliasedLd floats (4 KB) apart fall on the
// same sets of the L1 and L2 caches. Where the product's sum runs across
// them (op(A) read 'T' or op(B) read 'N': K lines), oneDNN's packing
// conflicts with itself: on one core of a Zen 1, dW = g^T x of the
// Transformer's FFN at hidden 256 and ffn 1024 (g or x 2048 x 1024) ran at
// 26-28 GFLOP/s against 36-37 with the lines 16 floats further apart, with
// the same bits (oneMKL's developer guide gives the same advice for its
// GEMMs: no leading dimension a multiple of 4096 bytes). Such an operand of
// a large f32 product is copied with its lines kLinePad floats further
// apart, where the copy costs a small part of the product: each of its
// elements takes part in kUnaliasMinReuse multiply-adds or more. Operands
// whose lines are the product's rows or columns (A read 'N', B read 'T')
// gained 3-4% where they were measured, about what the copy costs, and are
// read in place.
namespace {
constexpr std::int64_t kUnaliasMinReuse = 256;
constexpr std::int64_t kUnaliasMinLines = 64;
}  // namespace

// `lines` lines of `inner` floats, `ld` apart from p, copied kLinePad floats
// further apart into `copy` where that pays (see above); p and ld then point
// at the copy.
void detail::unalias(const float*& p, std::int64_t& ld, std::int64_t lines, std::int64_t inner,
                     std::int64_t work, Tensor& copy) {
  if (ld % kAliasedLd != 0 || lines < kUnaliasMinLines || work < kUnaliasMinReuse * lines * inner)
    return;
  const std::int64_t to = inner + kLinePad, from = ld;
  copy = Tensor::empty({lines, to}, DType::f32);
  float* dst = copy.data<float>();
  const float* src = p;
  parallel_for(lines, loop_threads(lines * inner >= parallel_grain()), [&](std::int64_t i) {
    std::copy(src + i * from, src + i * from + inner, dst + i * to);
  });
  p = dst;
  ld = to;
}

}  // namespace attn
