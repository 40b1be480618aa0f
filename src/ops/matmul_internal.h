// src/ops/matmul_internal.h — internal: switches for testing matmul's kernel paths.
#pragma once

namespace attn::detail {

// Batched f32 products that do not fold into one GEMM run on oneDNN's matmul
// primitive (on, the default) or, off, on one dnnl_sgemm per batch item
// (parallel over items when they are small). Tests compare the two.
void set_matmul_batched_primitive(bool on);

}  // namespace attn::detail
