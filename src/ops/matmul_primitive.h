// src/ops/matmul_primitive.h — internal: one product on oneDNN's matmul
// primitive, for matmul.cpp.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace attn::detail {

// c (dense, f32, dims cd) = a @ b in one primitive call; a and b of type `ab`
// (f32 or bf16) with the given dims and strides (in elements; batch dims of
// size 1 or stride 0 broadcast). False when oneDNN offers only its reference
// kernel for the geometry, or refuses it: the caller computes another way.
// Each thread keeps the primitives it built (about 0.5 ms each), keyed by the
// geometry, the type and the thread count oneDNN planned for.
bool primitive_product(dnnl::memory::data_type ab, const void* pa, const dnnl::memory::dims& ad,
                       const dnnl::memory::dims& as, const void* pb, const dnnl::memory::dims& bd,
                       const dnnl::memory::dims& bs, float* pc, const dnnl::memory::dims& cd);

}  // namespace attn::detail
