// AttentionOptions::kv_rows checked and gathered (ops/attention_kv_rows.h).
#include "ops/attention_kv_rows.h"

#include <fmt/format.h>

#include "attn/core/error.h"
#include "attn/ops/index.h"

namespace attn::detail {

Tensor checked_kv_rows(const Tensor& kv_rows, bool four_d, std::int64_t B, std::int64_t K,
                       std::int64_t Bk, const char* op) {
  ATTN_CHECK(four_d, ShapeError,
             "{}: kv_rows needs the 4-D layout (B, T, H, D); the operands are 3-D", op);
  const bool per_row = kv_rows.dim() == 1 && kv_rows.size(0) == B;
  const bool per_key = kv_rows.dim() == 2 && kv_rows.size(0) == B && kv_rows.size(1) == K;
  ATTN_CHECK((per_row || per_key) && !is_floating(kv_rows.dtype()), ShapeError,
             "{}: kv_rows must be integers of shape [{}] (one per batch row) or [{}, {}] (one "
             "per batch row and key), got {} {}",
             op, B, B, K, dtype_name(kv_rows.dtype()), shape_str(kv_rows.shape()));
  Tensor r = kv_rows.detach().to(DType::i64).contiguous();
  const std::int64_t* pr = r.data<std::int64_t>();
  for (std::int64_t i = 0; i < r.numel(); ++i)
    ATTN_CHECK(pr[i] >= 0 && pr[i] < Bk, ValueError,
               "{}: kv_rows[{}] = {} is outside [0, {}) (the rows of the keys and values)", op,
               per_row ? fmt::format("{}", i) : fmt::format("{}, {}", i / K, i % K), pr[i], Bk);
  return r;
}

Tensor gather_kv(const Tensor& t, const Tensor& rows) {
  if (rows.dim() == 1) return index_select(t, 0, rows);
  const std::int64_t B = rows.size(0), K = rows.size(1);
  Tensor flat = Tensor::empty({B * K}, DType::i64);
  const std::int64_t* r = rows.data<std::int64_t>();
  std::int64_t* f = flat.data<std::int64_t>();
  for (std::int64_t i = 0; i < B * K; ++i) f[i] = r[i] * K + i % K;
  Tensor all = t.reshape({t.size(0) * K, t.size(2), t.size(3)});
  return index_select(all, 0, flat).reshape({B, K, t.size(2), t.size(3)});
}

}  // namespace attn::detail
