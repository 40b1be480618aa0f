#include "attn/data/batching.h"

#include <algorithm>
#include <numeric>

#include "attn/core/error.h"

namespace attn::data {

TokenizedPairs tokenize_pairs(const std::vector<SentencePair>& pairs, const Tokenizer& tok,
                              std::int64_t max_length, std::size_t* dropped) {
  ATTN_CHECK(max_length >= 2, ValueError, "tokenize_pairs: max_length must be >= 2, got {}",
             max_length);
  TokenizedPairs out;
  std::size_t n_dropped = 0;
  for (const auto& p : pairs) {
    auto s = tok.encode(p.source, Side::source), t = tok.encode(p.target, Side::target);
    if (static_cast<std::int64_t>(s.size()) + 1 > max_length ||
        static_cast<std::int64_t>(t.size()) + 1 > max_length) {
      ++n_dropped;
      continue;
    }
    out.src.push_back(std::move(s));
    out.tgt.push_back(std::move(t));
  }
  if (dropped) *dropped = n_dropped;
  return out;
}

std::vector<std::int64_t> epoch_order(std::int64_t n, Generator& gen) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const std::uint64_t seed = gen.seed(), off = gen.reserve(static_cast<std::uint64_t>(n));
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::int64_t j = static_cast<std::int64_t>(
        philox_uniform(seed, off, static_cast<std::uint64_t>(i)) * static_cast<float>(i + 1));
    if (j > i) j = i;
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

std::vector<std::vector<std::int64_t>> token_batches(const TokenizedPairs& pairs,
                                                     std::int64_t max_tokens, std::uint64_t seed) {
  ATTN_CHECK(max_tokens >= 1, ValueError, "token_batches: max_tokens must be positive, got {}",
             max_tokens);
  const std::int64_t n = static_cast<std::int64_t>(pairs.size());
  Generator gen(seed ^ 0xba7c4e5ULL);
  std::vector<std::int64_t> order = epoch_order(n, gen);  // the tie order
  std::vector<std::int64_t> rank(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) rank[static_cast<std::size_t>(order[i])] = i;
  auto len = [&](const std::vector<std::int64_t>& v) {
    return static_cast<std::int64_t>(v.size());
  };
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
    const auto ta = len(pairs.tgt[a]), tb = len(pairs.tgt[b]);
    if (ta != tb) return ta < tb;
    const auto sa = len(pairs.src[a]), sb = len(pairs.src[b]);
    if (sa != sb) return sa < sb;
    return rank[a] < rank[b];
  });
  std::vector<std::vector<std::int64_t>> batches;
  std::vector<std::int64_t> cur;
  std::int64_t longest = 0;
  for (std::int64_t i : idx) {
    // Tokens of the pair's longer side: the target with <bos> or <eos>
    // (one more position each), the source with <eos>.
    const std::int64_t l = std::max(len(pairs.src[i]), len(pairs.tgt[i])) + 1;
    const std::int64_t m = std::max(longest, l);
    if (!cur.empty() && m * static_cast<std::int64_t>(cur.size() + 1) > max_tokens) {
      batches.push_back(std::move(cur));
      cur.clear();
      longest = 0;
    }
    cur.push_back(i);
    longest = std::max(longest, l);
  }
  if (!cur.empty()) batches.push_back(std::move(cur));
  return batches;
}

PairBatch make_batch(const TokenizedPairs& pairs, const std::vector<std::int64_t>& index,
                     std::int64_t pad, std::int64_t eos) {
  const std::int64_t B = static_cast<std::int64_t>(index.size());
  auto side = [&](const std::vector<std::vector<std::int64_t>>& seqs, Tensor& ids, Tensor& lens) {
    std::int64_t T = 1;
    for (std::int64_t i : index)
      T = std::max<std::int64_t>(T, static_cast<std::int64_t>(seqs[i].size()) + 1);
    ids = full({B, T}, static_cast<double>(pad), DType::i64);
    lens = Tensor::empty({B}, DType::i64);
    std::int64_t* p = ids.data<std::int64_t>();
    std::int64_t* l = lens.data<std::int64_t>();
    for (std::int64_t b = 0; b < B; ++b) {
      const auto& s = seqs[index[b]];
      std::copy(s.begin(), s.end(), p + b * T);
      p[b * T + static_cast<std::int64_t>(s.size())] = eos;
      l[b] = static_cast<std::int64_t>(s.size()) + 1;
    }
  };
  PairBatch batch;
  side(pairs.src, batch.src, batch.src_len);
  side(pairs.tgt, batch.tgt, batch.tgt_len);
  return batch;
}

}  // namespace attn::data
