// src/ops/attention_kv_rows.h — internal: AttentionOptions::kv_rows
// (attn/ops/attention.h) checked, and the rows gathered for the paths that do
// not read them in place, for attention.cpp.
#pragma once

#include <cstdint>

#include "attn/core/tensor.h"

namespace attn::detail {

// kv_rows as a contiguous i64 tensor, checked: 4-D operands, one entry per
// batch row of q (B) or per batch row and key (B, K), each a row of k and v
// (in [0, Bk)). Errors name `op`.
Tensor checked_kv_rows(const Tensor& kv_rows, bool four_d, std::int64_t B, std::int64_t K,
                       std::int64_t Bk, const char* op);

// t (Bk, K, H, d) read through checked kv_rows: row b of the result is row
// rows[b] of t, or (per key) its key c is key c of row rows[b, c];
// differentiable (index_select).
Tensor gather_kv(const Tensor& t, const Tensor& rows);

}  // namespace attn::detail
