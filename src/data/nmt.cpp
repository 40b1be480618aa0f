#include "attn/data/nmt.h"

#include <cmath>
#include <cstring>

#include "attn/core/error.h"

namespace attn::data {

std::vector<std::int64_t> truncate_pad(std::vector<std::int64_t> line, std::int64_t num_steps,
                                       std::int64_t pad) {
  ATTN_CHECK(num_steps >= 0, ValueError, "truncate_pad: num_steps must not be negative, got {}",
             num_steps);
  line.resize(static_cast<std::size_t>(num_steps), pad);
  return line;
}

TokenArray build_array_nmt(const std::vector<Tokens>& lines, const Vocab& vocab,
                           std::int64_t num_steps) {
  ATTN_CHECK(num_steps > 0, ValueError, "build_array_nmt: num_steps must be positive, got {}",
             num_steps);
  const std::int64_t n = static_cast<std::int64_t>(lines.size());
  const std::int64_t pad = vocab["<pad>"], eos = vocab["<eos>"];
  TokenArray out{Tensor::empty({n, num_steps}, DType::i64), Tensor::empty({n}, DType::i64)};
  std::int64_t* pa = out.array.data<std::int64_t>();
  std::int64_t* pv = out.valid_len.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    std::vector<std::int64_t> ids = vocab.indices(lines[i]);
    ids.push_back(eos);
    ids = truncate_pad(std::move(ids), num_steps, pad);
    std::int64_t valid = 0;
    for (std::int64_t j = 0; j < num_steps; ++j) {
      pa[i * num_steps + j] = ids[j];
      valid += ids[j] != pad;
    }
    pv[i] = valid;
  }
  return out;
}

namespace {

// Lines 0..num_examples of `text` (all when num_examples <= 0): d2l's loop reads
// no further, and preprocessing and checks are line by line.
std::string_view first_lines(std::string_view text, long num_examples) {
  if (num_examples <= 0) return text;
  std::size_t pos = 0;
  for (long i = 0; i <= num_examples && pos != std::string_view::npos; ++i) {
    pos = text.find('\n', pos);
    if (pos != std::string_view::npos) ++pos;
  }
  return pos == std::string_view::npos ? text : text.substr(0, pos);
}

ParallelCorpus tokenize_checked(std::string_view text, long num_examples, std::string_view what) {
  std::string_view used = first_lines(text, num_examples);
  check_utf8(used, what);
  ParallelCorpus corpus = tokenize_nmt(preprocess_nmt(used), num_examples, what);
  ATTN_CHECK(!corpus.source.empty(), IOError, "{} holds no sentence pairs", what);
  return corpus;
}

}  // namespace

ParallelCorpus read_parallel_corpus(const std::string& path, long num_examples) {
  return tokenize_checked(read_corpus_text(path, num_examples), num_examples, quote_path(path));
}

NmtData load_data_nmt(const std::string& path, const NmtOptions& o) {
  ATTN_CHECK(o.valid_fraction >= 0 && o.valid_fraction < 1, ValueError,
             "load_data_nmt: valid_fraction must be in [0, 1), got {}", o.valid_fraction);
  return make_data_nmt(read_corpus_text(path, o.num_examples), quote_path(path), o);
}

NmtData make_data_nmt(std::string_view text, std::string_view what, const NmtOptions& o) {
  ATTN_CHECK(o.valid_fraction >= 0 && o.valid_fraction < 1, ValueError,
             "load_data_nmt: valid_fraction must be in [0, 1), got {}", o.valid_fraction);
  ATTN_CHECK(o.num_steps > 0, ValueError, "load_data_nmt: num_steps must be positive, got {}",
             o.num_steps);
  ParallelCorpus all = tokenize_checked(text, o.num_examples, what);
  if (o.reverse) std::swap(all.source, all.target);  // the second column is the source
  std::size_t n = all.source.size();
  std::size_t n_valid =
      static_cast<std::size_t>(std::floor(static_cast<double>(n) * o.valid_fraction));
  ATTN_CHECK(n_valid < n, ValueError, "load_data_nmt: no training pairs left after the split");
  ParallelCorpus train;
  NmtData data;
  train.source.assign(all.source.begin(), all.source.end() - n_valid);
  train.target.assign(all.target.begin(), all.target.end() - n_valid);
  data.valid_text.source.assign(all.source.end() - n_valid, all.source.end());
  data.valid_text.target.assign(all.target.end() - n_valid, all.target.end());
  data.src_vocab = Vocab(train.source, o.min_freq, kReservedTokens);
  data.tgt_vocab = Vocab(train.target, o.min_freq, kReservedTokens);
  data.src = build_array_nmt(train.source, data.src_vocab, o.num_steps);
  data.tgt = build_array_nmt(train.target, data.tgt_vocab, o.num_steps);
  data.valid_src = build_array_nmt(data.valid_text.source, data.src_vocab, o.num_steps);
  data.valid_tgt = build_array_nmt(data.valid_text.target, data.tgt_vocab, o.num_steps);
  return data;
}

std::vector<std::vector<std::int64_t>> shuffled_batches(std::int64_t n, std::int64_t batch_size,
                                                        Generator& gen) {
  ATTN_CHECK(batch_size > 0, ValueError, "shuffled_batches: batch_size must be positive, got {}",
             batch_size);
  std::vector<std::int64_t> order(n);
  for (std::int64_t i = 0; i < n; ++i) order[i] = i;
  std::uint64_t seed = gen.seed(), off = gen.reserve(static_cast<std::uint64_t>(n));
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::int64_t j = static_cast<std::int64_t>(
        philox_uniform(seed, off, static_cast<std::uint64_t>(i)) * static_cast<float>(i + 1));
    if (j > i) j = i;
    std::swap(order[i], order[j]);
  }
  std::vector<std::vector<std::int64_t>> batches;
  for (std::int64_t s = 0; s < n; s += batch_size)
    batches.emplace_back(order.begin() + s, order.begin() + std::min(n, s + batch_size));
  return batches;
}

Tensor take_rows(const Tensor& t, const std::vector<std::int64_t>& index) {
  ATTN_CHECK(t.dim() >= 1, ShapeError, "take_rows: expected a tensor with rows, got shape {}",
             shape_str(t.shape()));
  Tensor c = t.contiguous();
  Shape shape = c.shape();
  std::int64_t row = c.numel() / std::max<std::int64_t>(shape[0], 1);
  shape[0] = static_cast<std::int64_t>(index.size());
  Tensor out = Tensor::empty(shape, c.dtype());
  std::size_t bytes = static_cast<std::size_t>(row) * dtype_size(c.dtype());
  const char* src = static_cast<const char*>(c.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (std::size_t i = 0; i < index.size(); ++i) {
    ATTN_CHECK(index[i] >= 0 && index[i] < c.size(0), ValueError,
               "take_rows: row {} is out of range for {} rows", index[i], c.size(0));
    std::memcpy(dst + i * bytes, src + index[i] * bytes, bytes);
  }
  return out;
}

}  // namespace attn::data
