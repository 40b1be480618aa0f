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

// ---- products on packed weights: frozen Linear weights
// (ops/packed_linear.cpp) ----
//
// c (M x N, type `ct`, dense) = a (M x K, type `at`, dense) @ b (K x N, type
// `bt`, packed once in the layout the primitive asks for: `weights`), then
// + bias (N, f32; when `bias`) and max(c, 0) (when `relu`), applied by the
// kernel as it stores c. One per geometry, types and thread count, kept per
// thread like the ones above.
struct PackedPrimitive {
  std::string impl;  // oneDNN's implementation name
  dnnl::matmul prim;
  dnnl::memory::desc weights;  // the layout b must be packed in
  dnnl::memory a, bias, c;
};

// The cached primitive; null when oneDNN offers only its reference kernel
// for it, or refuses it.
PackedPrimitive* packed_primitive(dnnl::memory::data_type at, dnnl::memory::data_type bt,
                                  dnnl::memory::data_type ct, std::int64_t M, std::int64_t K,
                                  std::int64_t N, bool bias = false, bool relu = false);

// A weight w (K x N, of type `t`, element (k, n) at k * strides[0] + n *
// strides[1]) packed into a new memory of `layout`; an empty memory when
// oneDNN refuses. The memory is `buffer` (layout.get_size() bytes) when
// given, else oneDNN's own.
dnnl::memory pack_weights(dnnl::memory::data_type t, const void* w, std::int64_t K, std::int64_t N,
                          const dnnl::memory::dims& strides, const dnnl::memory::desc& layout,
                          void* buffer = nullptr);

// Runs p (bias null when p has none); false when oneDNN fails.
bool run_packed_primitive(PackedPrimitive& p, const void* a, const dnnl::memory& b,
                          const float* bias, void* c);

}  // namespace attn::detail
