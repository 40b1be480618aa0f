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

// A weight w (K x N, of type `t`, element (k, n) at k * strides[0] + n *
// strides[1]) packed into a new memory of `layout`; an empty memory when
// oneDNN refuses. The memory is `buffer` (layout.get_size() bytes) when
// given, else oneDNN's own. The int8 weights and the frozen Linear weights
// (ops/packed_linear.cpp) are packed this way.
dnnl::memory pack_weights(dnnl::memory::data_type t, const void* w, std::int64_t K, std::int64_t N,
                          const dnnl::memory::dims& strides, const dnnl::memory::desc& layout,
                          void* buffer = nullptr);

// Runs p; false when oneDNN fails.
bool run_int8_primitive(Int8Primitive& p, const std::uint8_t* a, const dnnl::memory& b,
                        std::int32_t* c);

// ---- frozen Linear weights (ops/packed_linear.cpp) ----
//
// c (M x N, f32, dense) = a (M x K, type `ab`, rows `lda` apart) @ b (K x N,
// `ab`, packed in `weights`) + bias (N, f32; when `bias`), then max(c, 0)
// when `relu`: the bias and the ReLU applied by the kernel as it stores c.
// One per geometry and thread count, kept per thread like the others.
struct LinearPrimitive {
  std::string impl;  // oneDNN's implementation name
  dnnl::matmul prim;
  dnnl::memory::desc weights;  // the layout b must be packed in
  dnnl::memory a, bias, c;
};

// The cached primitive; null when oneDNN offers only its reference kernel.
LinearPrimitive* linear_primitive(dnnl::memory::data_type ab, std::int64_t M, std::int64_t K,
                                  std::int64_t N, std::int64_t lda, bool bias, bool relu);

// Runs p (bias null when p has none); false when oneDNN fails.
bool run_linear_primitive(LinearPrimitive& p, const void* a, const dnnl::memory& b,
                          const float* bias, float* c);

}  // namespace attn::detail
