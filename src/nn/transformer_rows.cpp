// The Transformer's decoding rows at their own positions (continuous
// batching; attn/nn/transformer.h, "Rows at different positions").
#include <algorithm>
#include <cmath>
#include <cstring>

#include "attn/autograd/node.h"
#include "attn/nn/transformer.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/index.h"
#include "attn/ops/matmul.h"

namespace attn::nn {

namespace {

std::int64_t buffer_bytes(const std::vector<Tensor>& buffers) {
  std::int64_t n = 0;
  for (const Tensor& t : buffers)
    if (t.defined()) n += t.numel() * static_cast<std::int64_t>(dtype_size(t.dtype()));
  return n;
}

// `buf` (rows, positions, H, d) with room for at least `rows` rows and
// `positions` positions, grown geometrically (at least 16 of each), what it
// held kept in place; new entries are zeros, so that no path that reads a
// whole row ever meets uninitialized floats.
void reserve(Tensor& buf, std::int64_t rows, std::int64_t positions, std::int64_t H, std::int64_t d,
             DType dtype) {
  const std::int64_t old_rows = buf.defined() ? buf.size(0) : 0;
  const std::int64_t old_positions = buf.defined() ? buf.size(1) : 0;
  if (buf.defined() && rows <= old_rows && positions <= old_positions) return;
  const std::int64_t new_rows =
      rows <= old_rows ? old_rows : std::max({rows, 2 * old_rows, std::int64_t{16}});
  const std::int64_t new_positions =
      positions <= old_positions ? old_positions
                                 : std::max({positions, 2 * old_positions, std::int64_t{16}});
  Tensor grown = zeros({new_rows, new_positions, H, d}, dtype);
  if (old_rows > 0 && old_positions > 0)
    copy_(grown.narrow(0, 0, old_rows).narrow(1, 0, old_positions), buf);
  buf = grown;
}

// Writes x (R, 1, H, d), contiguous, at (rows[r], positions[r]) of `buf`.
void write_at(Tensor& buf, const Tensor& x, const std::int64_t* rows,
              const std::int64_t* positions) {
  const Tensor src = x.contiguous();
  const std::int64_t R = src.size(0), width = src.size(2) * src.size(3);
  const std::size_t bytes = static_cast<std::size_t>(width) * dtype_size(src.dtype());
  char* dst = static_cast<char*>(buf.raw_data());
  const char* from = static_cast<const char*>(src.raw_data());
  const std::int64_t row_stride = buf.size(1) * width;
  for (std::int64_t r = 0; r < R; ++r)
    std::memcpy(dst + static_cast<std::size_t>(rows[r] * row_stride + positions[r] * width) *
                          dtype_size(src.dtype()),
                from + static_cast<std::size_t>(r) * bytes, bytes);
}

std::int64_t max_of(const Tensor& t) {
  const std::int64_t* p = t.data<std::int64_t>();
  return t.numel() == 0 ? 0 : *std::max_element(p, p + t.numel());
}

void check_step(const RowStep& s, std::int64_t max_len) {
  auto is_i64 = [](const Tensor& t, std::int64_t dims) {
    return t.defined() && t.dtype() == DType::i64 && t.dim() == dims && t.is_contiguous();
  };
  ATTN_CHECK(is_i64(s.tokens, 2) && s.tokens.size(1) == 1, ShapeError,
             "TransformerDecoder::step_rows: expected tokens (rows, 1) i64, got {}",
             s.tokens.defined() ? shape_str(s.tokens.shape()) : std::string("undefined"));
  const std::int64_t R = s.tokens.size(0);
  for (const Tensor* t : {&s.positions, &s.source_slots, &s.source_lens, &s.write_rows})
    ATTN_CHECK(is_i64(*t, 1) && t->size(0) == R, ShapeError,
               "TransformerDecoder::step_rows: expected contiguous i64 ({}) per-row tensors", R);
  const std::int64_t P = max_of(s.positions) + 1;
  ATTN_CHECK(is_i64(s.key_rows, 2) && s.key_rows.size(0) == R && s.key_rows.size(1) == P,
             ShapeError,
             "TransformerDecoder::step_rows: expected key_rows ({}, {}) i64 (rows, largest "
             "position + 1)",
             R, P);
  const std::int64_t* pos = s.positions.data<std::int64_t>();
  const std::int64_t* lens = s.source_lens.data<std::int64_t>();
  const std::int64_t* keys = s.key_rows.data<std::int64_t>();
  const std::int64_t* write = s.write_rows.data<std::int64_t>();
  for (std::int64_t r = 0; r < R; ++r) {
    ATTN_CHECK(pos[r] >= 0 && pos[r] < max_len, ValueError,
               "TransformerDecoder::step_rows: row {} at position {}, outside [0, {}) (max_len)", r,
               pos[r], max_len);
    ATTN_CHECK(lens[r] >= 1 && write[r] >= 0 && s.source_slots.data<std::int64_t>()[r] >= 0,
               ValueError,
               "TransformerDecoder::step_rows: row {}: a source of {} positions, source slot {}, "
               "cache row {}",
               r, lens[r], s.source_slots.data<std::int64_t>()[r], write[r]);
    ATTN_CHECK(keys[r * P + pos[r]] == write[r], ValueError,
               "TransformerDecoder::step_rows: row {} reads its own key from cache row {}, but "
               "writes it to row {}",
               r, keys[r * P + pos[r]], write[r]);
  }
}

}  // namespace

std::int64_t SlotCache::bytes() const {
  return buffer_bytes(cross_k) + buffer_bytes(cross_v) + buffer_bytes(self_k) +
         buffer_bytes(self_v);
}

Tensor DecoderBlock::forward_rows(const Tensor& X, const RowStep& step, SlotCache& cache,
                                  const RelativePositions& positions) {
  const std::int64_t* pos = step.positions.data<std::int64_t>();
  const std::int64_t* write = step.write_rows.data<std::int64_t>();
  auto [k, v] = attention1->project_kv(X, X, step.positions);  // (R, 1, kv heads, d)
  const std::int64_t H = k.size(2), d = k.size(3);
  const std::int64_t rows = max_of(step.write_rows) + 1, P = step.key_rows.size(1);
  reserve(cache.self_k[static_cast<std::size_t>(i)], rows, P, H, d, k.dtype());
  reserve(cache.self_v[static_cast<std::size_t>(i)], rows, P, H, v.size(3), v.dtype());
  Tensor& K = cache.self_k[static_cast<std::size_t>(i)];
  Tensor& V = cache.self_v[static_cast<std::size_t>(i)];
  write_at(K, k, write, pos);
  write_at(V, v, write, pos);
  // Row r sees its keys at positions 0..pos[r]: a length, where step() has
  // the causal limit of a batch whose rows all sit at one position (the
  // same keys, read by the same kernel).
  Tensor self_lens = Tensor::empty({X.size(0)}, DType::i64);
  for (std::int64_t r = 0; r < X.size(0); ++r) self_lens.data<std::int64_t>()[r] = pos[r] + 1;
  Tensor Y = addnorm1->forward(X, attention1->attend(X, K.narrow(1, 0, P), V.narrow(1, 0, P),
                                                     self_lens, false, step.key_rows, positions));
  const Tensor& ck = cache.cross_k[static_cast<std::size_t>(i)];
  const Tensor& cv = cache.cross_v[static_cast<std::size_t>(i)];
  ATTN_CHECK(ck.defined() && max_of(step.source_slots) < ck.size(0) &&
                 max_of(step.source_lens) <= ck.size(1),
             ValueError,
             "TransformerDecoder::step_rows: a row reads a source slot that encode_sources has "
             "not filled");
  const std::int64_t S = max_of(step.source_lens);
  Tensor Z = addnorm2->forward(Y, attention2->attend(Y, ck.narrow(1, 0, S), cv.narrow(1, 0, S),
                                                     step.source_lens, false, step.source_slots));
  return addnorm3->forward(Z, ffn->forward(Z));
}

Tensor TransformerDecoder::step_rows(const RowStep& step, SlotCache& cache, bool argmax) {
  autograd::NoGradGuard no_grad;  // the cache is written in place: inference only
  ATTN_CHECK(!is_training(), ValueError,
             "TransformerDecoder::step_rows: decoding runs in eval mode (call eval() first)");
  check_step(step, pos_encoding->max_len);
  cache.self_k.resize(static_cast<std::size_t>(num_layers));
  cache.self_v.resize(static_cast<std::size_t>(num_layers));
  // embedding * sqrt(num_hiddens) + P[position], as step() computes it at
  // one position for every row (dropout is off in eval mode).
  Tensor H = mul(embedding->forward(step.tokens), std::sqrt(static_cast<double>(num_hiddens)));
  if (positions == Positions::sinusoidal || positions == Positions::learned) {
    const Tensor& P = positions == Positions::sinusoidal ? pos_encoding->P : learned_pos->P;
    Tensor table = P.select(0, 0);  // (max_len, num_hiddens)
    Tensor pos = index_select(table, 0, step.positions).reshape({step.tokens.size(0), 1, -1});
    if (pos.dtype() != H.dtype()) pos = pos.to(H.dtype());
    H = add(H, pos);
  }
  // Each row's queries at its own position, over the keys of the longest.
  const RelativePositions rel = self_positions(step.key_rows.size(1), H.dtype(), step.positions);
  for (auto& blk : blks->blocks) H = blk->forward_rows(H, step, cache, rel);
  if (argmax) return linear_argmax(H, dense->weight, dense->bias);
  return dense->forward(H);
}

void EncoderDecoder::encode_sources(const Tensor& src, const std::vector<std::int64_t>& slots,
                                    SlotCache& cache) {
  autograd::NoGradGuard no_grad;
  ATTN_CHECK(!is_training(), ValueError,
             "EncoderDecoder::encode_sources: decoding runs in eval mode (call eval() first)");
  ATTN_CHECK(src.defined() && src.dim() == 2 &&
                 src.size(0) == static_cast<std::int64_t>(slots.size()) && src.size(1) >= 1 &&
                 src.size(1) <= config.max_len,
             ShapeError,
             "EncoderDecoder::encode_sources: expected {} sources of 1 to {} ids (n, Ts), got {}",
             slots.size(), config.max_len,
             src.defined() ? shape_str(src.shape()) : std::string("undefined"));
  const std::int64_t n = src.size(0), Ts = src.size(1);
  for (std::int64_t e : slots)
    ATTN_CHECK(e >= 0, ValueError, "EncoderDecoder::encode_sources: source slot {} is negative", e);
  const Tensor lens = full({n}, static_cast<double>(Ts), DType::i64);
  const Tensor enc = encoder->forward(src, lens);  // (n, Ts, num_hiddens)
  const std::int64_t layers = static_cast<std::int64_t>(decoder->blks->blocks.size());
  cache.cross_k.resize(static_cast<std::size_t>(layers));
  cache.cross_v.resize(static_cast<std::size_t>(layers));
  const std::int64_t top = slots.empty() ? 0 : *std::max_element(slots.begin(), slots.end()) + 1;
  for (std::int64_t l = 0; l < layers; ++l) {
    auto [k, v] =
        decoder->blks->blocks[static_cast<std::size_t>(l)]->attention2->project_kv(enc, enc);
    Tensor& K = cache.cross_k[static_cast<std::size_t>(l)];
    Tensor& V = cache.cross_v[static_cast<std::size_t>(l)];
    reserve(K, top, Ts, k.size(2), k.size(3), k.dtype());
    reserve(V, top, Ts, v.size(2), v.size(3), v.dtype());
    for (std::int64_t b = 0; b < n; ++b) {
      const std::int64_t e = slots[static_cast<std::size_t>(b)];
      copy_(K.select(0, e).narrow(0, 0, Ts), k.select(0, b));
      copy_(V.select(0, e).narrow(0, 0, Ts), v.select(0, b));
    }
  }
}

}  // namespace attn::nn
