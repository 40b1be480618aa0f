// src/ops/matmul_primitive.h — internal: one product on oneDNN's matmul
// primitive, for matmul.cpp.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <string>

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

// ---- int8 (ops/quantize.h) ----
//
// c (M x N, s32, dense) = a (M x K, u8, dense) @ b (K x N, s8), b packed once
// in the layout the primitive asks for (weights). One per geometry and
// thread count, kept per thread like the f32 ones.
struct Int8Primitive {
  std::string impl;  // oneDNN's implementation name
  dnnl::matmul prim;
  dnnl::memory::desc weights;  // the layout b must be packed in
  dnnl::memory a, c;
};

// The cached primitive for (M, K, N) at this thread count; null when oneDNN
// offers no AVX-512 VNNI (or AMX) kernel for it.
Int8Primitive* int8_primitive(std::int64_t M, std::int64_t K, std::int64_t N);

// q (N x K, s8, row-major: b transposed) packed into a new memory of
// `layout`; an empty memory when oneDNN refuses.
dnnl::memory pack_int8_weights(const std::int8_t* q, std::int64_t K, std::int64_t N,
                               const dnnl::memory::desc& layout);

// Runs p; false when oneDNN fails.
bool run_int8_primitive(Int8Primitive& p, const std::uint8_t* a, const dnnl::memory& b,
                        std::int32_t* c);

}  // namespace attn::detail
