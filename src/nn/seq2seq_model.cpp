// The decoder state's row selection (beam search, sentences leaving the batch).
#include <algorithm>
#include <cstring>

#include "attn/nn/seq2seq_model.h"
#include "attn/ops/index.h"
#include "kernels/row_stats/row_stats.h"

namespace attn::nn {

namespace {

// Rows `index` of t (rows along dim 0), of which only the first `keep`
// elements of each row matter (a cache buffer's valid steps). When `own`
// (t's memory is the state's alone), t is contiguous and has at least as many
// rows, they are gathered in t's own memory and its first index.size() rows
// returned: no allocation, no fresh pages. Each row that changes is copied
// once, in an order in which a row is overwritten only after every row that
// copies it has: row i reads row index[i], so the rows nobody reads go first
// (Kahn's order on the graph i -> index[i]); what is left are cycles (a
// permutation among some rows), each done by saving one row aside. Rows that
// stay where they are are not touched. Otherwise the rows go to a new tensor.
Tensor select_leading_rows(const Tensor& t, const std::vector<std::int64_t>& index,
                           std::int64_t keep, bool own) {
  const std::int64_t n = static_cast<std::int64_t>(index.size());
  if (!t.is_contiguous()) return index_select(t, 0, from_vector(index, {n}));
  const std::size_t esize = dtype_size(t.dtype());
  const std::size_t stride =
      static_cast<std::size_t>(t.numel() / std::max<std::int64_t>(t.size(0), 1)) * esize;
  const std::size_t bytes = static_cast<std::size_t>(keep) * esize;
  char* data = static_cast<char*>(t.raw_data());
  auto row = [&](char* base, std::int64_t r) {
    return base + static_cast<std::size_t>(r) * stride;
  };
  if (own && n <= t.size(0)) {
    // readers[j]: the changing rows i that still have to copy row j (j < n
    // changing too; other rows are never overwritten).
    thread_local std::vector<std::int64_t> readers, ready;
    thread_local std::vector<char> aside, written;
    readers.assign(static_cast<std::size_t>(n), 0);
    auto changes = [&](std::int64_t i) { return i < n && index[i] != i; };
    for (std::int64_t i = 0; i < n; ++i)
      if (changes(i) && changes(index[i])) ++readers[static_cast<std::size_t>(index[i])];
    ready.clear();
    for (std::int64_t i = 0; i < n; ++i)
      if (changes(i) && readers[static_cast<std::size_t>(i)] == 0) ready.push_back(i);
    std::int64_t done = 0, changing = 0;
    for (std::int64_t i = 0; i < n; ++i) changing += changes(i) ? 1 : 0;
    written.assign(static_cast<std::size_t>(n), 0);
    while (!ready.empty()) {
      const std::int64_t i = ready.back();
      ready.pop_back();
      std::memcpy(row(data, i), row(data, index[i]), bytes);
      written[static_cast<std::size_t>(i)] = 1;
      ++done;
      const std::int64_t s = index[i];
      if (changes(s) && --readers[static_cast<std::size_t>(s)] == 0) ready.push_back(s);
    }
    if (done < changing) {
      // Cycles: every row left is read by exactly one other row left.
      aside.resize(bytes);
      for (std::int64_t first = 0; first < n; ++first) {
        if (!changes(first) || written[static_cast<std::size_t>(first)]) continue;
        std::memcpy(aside.data(), row(data, first), bytes);
        std::int64_t i = first;
        while (index[i] != first) {
          std::memcpy(row(data, i), row(data, index[i]), bytes);
          written[static_cast<std::size_t>(i)] = 1;
          i = index[i];
        }
        std::memcpy(row(data, i), aside.data(), bytes);
        written[static_cast<std::size_t>(i)] = 1;
      }
    }
    return t.narrow(0, 0, n);
  }
  Shape shape = t.shape();
  shape[0] = n;
  Tensor out = Tensor::empty(shape, t.dtype());
  char* dst = static_cast<char*>(out.raw_data());
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(row(dst, i), row(data, index[i]), bytes);
  return out;
}

std::vector<std::int64_t> row_index(const Tensor& rows, std::int64_t B, const char* what) {
  ATTN_CHECK(rows.defined() && rows.dim() == 1 && !is_floating(rows.dtype()), ValueError,
             "DecoderState::select_rows: expected a 1-D integer index of {}, got {}", what,
             rows.defined()
                 ? fmt::format("{} {}", dtype_name(rows.dtype()), shape_str(rows.shape()))
                 : std::string("an undefined tensor"));
  std::vector<std::int64_t> index = to_vector<std::int64_t>(rows.to(DType::i64));
  for (std::int64_t r : index)
    ATTN_CHECK(r >= 0 && r < B, ValueError,
               "DecoderState::select_rows: {} {} is out of range for a batch of {}", what, r, B);
  return index;
}

}  // namespace

void DecoderState::select_rows(const Tensor& rows, const Tensor& encoder_rows) {
  const std::int64_t B = batch_size();
  const std::vector<std::int64_t> index = row_index(rows, B, "rows");
  const std::vector<std::int64_t> enc_index =
      encoder_rows.defined() ? row_index(encoder_rows, B, "encoder rows") : index;
  ATTN_CHECK(enc_index.size() == index.size(), ValueError,
             "DecoderState::select_rows: {} encoder rows for {} rows", enc_index.size(),
             index.size());
  // The self-attention buffers are the state's own (step() writes them in
  // place); only their valid steps are kept, or only the table's rows picked.
  if (self_rows.defined()) {
    ATTN_CHECK(self_rows.dim() == 2 && self_rows.size(0) == B && self_rows.size(1) == steps,
               ShapeError,
               "DecoderState::select_rows: a table of cache rows of shape {} for {} "
               "rows and {} steps",
               shape_str(self_rows.shape()), B, steps);
    self_rows =
        index_select(self_rows, 0, from_vector(index, {static_cast<std::int64_t>(index.size())}));
  } else {
    for (auto* cache : {&self_k, &self_v})
      for (Tensor& buf : *cache)
        if (buf.defined()) {
          ATTN_CHECK(buf.dim() == 4 && steps <= buf.size(1), ShapeError,
                     "DecoderState::select_rows: a self-attention cache of shape {} for {} steps",
                     shape_str(buf.shape()), steps);
          buf = select_leading_rows(buf, index, steps * buf.size(2) * buf.size(3), true);
        }
  }
  if (hidden.defined())
    hidden = index_select(hidden, 1, from_vector(index, {static_cast<std::int64_t>(index.size())}));
  if (shares_encoder_rows) {  // the encoder side stays; only the index changes
    std::vector<std::int64_t> map(enc_index.size());
    const std::int64_t* old =
        encoder_index.defined() ? encoder_index.data<std::int64_t>() : nullptr;
    for (std::size_t i = 0; i < map.size(); ++i) map[i] = old ? old[enc_index[i]] : enc_index[i];
    encoder_index = from_vector(map, {static_cast<std::int64_t>(map.size())});
    return;
  }
  // The cross-attention keys and values are the state's own; enc_outputs and
  // enc_valid_lens are the caller's until a first selection copies them.
  auto whole_row = [](const Tensor& t) { return t.numel() / std::max<std::int64_t>(t.size(0), 1); };
  for (auto* cache : {&cross_k, &cross_v})
    for (Tensor& t : *cache)
      if (t.defined()) t = select_leading_rows(t, enc_index, whole_row(t), true);
  bool identity = enc_index.size() == static_cast<std::size_t>(B);
  for (std::size_t i = 0; identity && i < enc_index.size(); ++i)
    identity = enc_index[i] == static_cast<std::int64_t>(i);
  if (identity) return;  // the caller's tensors stay as they are
  for (Tensor* t : {&enc_outputs, &enc_valid_lens})
    if (t->defined()) *t = select_leading_rows(*t, enc_index, whole_row(*t), owns_encoder_rows);
  owns_encoder_rows = true;
}

Tensor Seq2SeqModel::step_argmax(const Tensor& X, DecoderState& state) {
  const Tensor logits = step(X, state).contiguous();  // (B, t, V)
  const std::int64_t V = logits.size(-1), rows = logits.numel() / V;
  Tensor out = Tensor::empty({logits.size(0), logits.size(1)}, DType::i64);
  detail::rows_argmax(logits.data<float>(), rows, V, out.data<std::int64_t>());
  return out;
}

}  // namespace attn::nn
