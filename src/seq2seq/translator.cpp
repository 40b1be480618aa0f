#include "attn/seq2seq/translator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "attn/autograd/node.h"
#include "attn/core/error.h"
#include "attn/core/threads.h"
#include "attn/data/text.h"
#include "attn/nn/attention.h"
#include "attn/ops/precision.h"
#include "attn/ops/quantize.h"
#include "attn/ops/reduce.h"
#include "attn/seq2seq/bleu.h"
#include "ops/thread_limit.h"

namespace attn::seq2seq {

DecodeOptions defaults_for(const ModelConfig& model) {
  DecodeOptions o;
  if (model.tokenizer == TokenizerKind::word) {
    o.max_length = model.num_steps;
    return o;
  }
  o.beam_size = 4;
  o.length_penalty = 0.6;
  return o;
}

Quantization default_quantization(const ModelConfig& model) {
  return model.tokenizer != TokenizerKind::word && int8_supported() ? Quantization::int8
                                                                    : Quantization::none;
}

std::size_t automatic_batch_size(std::int64_t beam_size) {
  constexpr std::size_t kSentences = 32, kReducedRows = 64;
  const bool reduced =
      matmul_precision() == Precision::bf16 || QuantizeScope::current().cache != nullptr;
  if (!reduced) return kSentences;
  const std::size_t beams = static_cast<std::size_t>(std::max<std::int64_t>(beam_size, 1));
  return std::min(kSentences, std::max<std::size_t>(1, kReducedRows / beams));
}

std::vector<std::int64_t> sentence_ids(const data::Tokenizer& tokenizer,
                                       const std::string& sentence, std::int64_t max_len,
                                       std::size_t index) {
  if (sentence.find_first_not_of(" \t\r\n\f\v") == std::string::npos) return {};
  std::vector<std::int64_t> ids = tokenizer.encode(sentence, data::Side::source);
  ids.push_back(tokenizer.vocab(data::Side::source)["<eos>"]);
  ATTN_CHECK(static_cast<std::int64_t>(ids.size()) <= max_len, ValueError,
             "translate: sentence {} is {} tokens long (with <eos>), more than the model's {} "
             "positions",
             index + 1, ids.size(), max_len);
  return ids;
}

DecodeOptions text_decode_options(DecodeOptions options) {
  if (options.max_length == 0 && options.max_length_factor == 0)
    options.max_length_factor = kSubwordLengthFactor;
  return options;
}

TextTranslation text_translation(const data::Tokenizer& tokenizer, const std::string& source,
                                 const std::vector<std::int64_t>& source_ids, const Hypothesis& h) {
  TextTranslation t;
  t.source = source;
  t.source_ids = source_ids;
  t.ids = h.ids;
  t.text = tokenizer.decode(h.ids, data::Side::target);
  t.log_prob = h.log_prob;
  t.score = h.score;
  t.eos = h.eos;
  return t;
}

namespace {

// Decodes the sentences `rows` of `ids` (non-empty sources) and writes
// their n-best translations into `out`: a Transformer's through the
// thread's DecodingBatch `kept` (made at its first batch; every sentence
// joins at the first step, and its bits do not depend on the others nor on
// the rows and slots it is given), other models' (and keep_attention's)
// through decode() on sources padded to the longest. The kept batch keeps
// its caches from batch to batch: rebuilt for each batch, their geometric
// growth (a zero fill and a copy each time, and fresh pages) took 8-10% of
// beam 4's time.
void decode_batch(nn::Seq2SeqModel& net, const data::Tokenizer& tokenizer,
                  const std::vector<std::string>& sentences,
                  const std::vector<std::vector<std::int64_t>>& ids,
                  const std::vector<std::size_t>& rows, const DecodeOptions& opts,
                  std::unique_ptr<DecodingBatch>& kept,
                  std::vector<std::vector<TextTranslation>>& out) {
  const data::Vocab& tv = tokenizer.vocab(data::Side::target);
  const std::int64_t pad = tv["<pad>"], bos = tv["<bos>"], eos = tv["<eos>"];
  auto fill = [&](std::size_t i, const std::vector<Hypothesis>& hyps) {
    out[i].clear();
    for (const Hypothesis& h : hyps)
      out[i].push_back(text_translation(tokenizer, sentences[i], ids[i], h));
  };
  if (dynamic_cast<nn::EncoderDecoder*>(&net) != nullptr && !opts.keep_attention) {
    if (!kept) {
      kept = std::make_unique<DecodingBatch>(net, bos, eos);
      kept->keep_caches(true);
    }
    DecodingBatch& batch = *kept;
    std::map<DecodingBatch::Handle, std::size_t> sentence_of;
    for (std::size_t i : rows) sentence_of[batch.add(ids[i], opts)] = i;
    while (batch.sentences() > 0)
      for (DecodingBatch::Done& d : batch.step()) fill(sentence_of.at(d.handle), d.hypotheses);
    return;
  }
  std::int64_t T = 1;
  for (std::size_t i : rows)
    T = std::max<std::int64_t>(T, static_cast<std::int64_t>(ids[i].size()));
  const auto B = static_cast<std::int64_t>(rows.size());
  Tensor src = full({B, T}, static_cast<double>(pad), DType::i64);
  Tensor lens = Tensor::empty({B}, DType::i64);
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& row = ids[rows[static_cast<std::size_t>(b)]];
    std::copy(row.begin(), row.end(), src.data<std::int64_t>() + b * T);
    lens.data<std::int64_t>()[b] = static_cast<std::int64_t>(row.size());
  }
  const auto hyps = decode(net, src, lens, bos, eos, opts);
  for (std::int64_t b = 0; b < B; ++b)
    fill(rows[static_cast<std::size_t>(b)], hyps[static_cast<std::size_t>(b)]);
}

}  // namespace

std::vector<std::vector<TextTranslation>> translate_texts(nn::Seq2SeqModel& net,
                                                          const data::Tokenizer& tokenizer,
                                                          const std::vector<std::string>& sentences,
                                                          const DecodeOptions& options,
                                                          const BatchOptions& batching) {
  ATTN_CHECK(batching.workers >= 0, ValueError,
             "translate: workers must be 0 (one per thread) or more, got {}", batching.workers);
  options.validate();
  const std::size_t batch_size =
      batching.batch_size > 0 ? batching.batch_size : automatic_batch_size(options.beam_size);
  const DecodeOptions opts = text_decode_options(options);
  const std::int64_t max_len = net.max_len();
  std::vector<std::vector<std::int64_t>> ids(sentences.size());
  std::vector<std::size_t> work;
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    ids[i] = sentence_ids(tokenizer, sentences[i], max_len, i);
    if (!ids[i].empty()) work.push_back(i);
  }
  // Similar lengths together: less padding in each batch.
  std::stable_sort(work.begin(), work.end(),
                   [&](std::size_t a, std::size_t b) { return ids[a].size() < ids[b].size(); });
  std::vector<std::vector<TextTranslation>> out(sentences.size());
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    TextTranslation empty;
    empty.source = sentences[i];
    empty.source_ids = ids[i];
    out[i] = {empty};
  }
  // Batch k holds work[k * batch_size, ...): the longest sources last.
  const std::size_t batches = (work.size() + batch_size - 1) / batch_size;
  auto run_batch = [&](std::size_t s, std::unique_ptr<DecodingBatch>& kept) {
    if (batching.before_batch) batching.before_batch();
    const std::size_t n = std::min(work.size() - s, batch_size);
    const std::vector<std::size_t> rows(work.begin() + static_cast<std::ptrdiff_t>(s),
                                        work.begin() + static_cast<std::ptrdiff_t>(s + n));
    decode_batch(net, tokenizer, sentences, ids, rows, opts, kept, out);
  };
  const int workers = net.concurrent_decoding() && !options.keep_attention
                          ? static_cast<int>(std::min<std::size_t>(
                                static_cast<std::size_t>(batching.workers > 0 ? batching.workers
                                                                              : get_num_threads()),
                                batches))
                          : 1;
  // With several batches every product packs its frozen weight whatever its
  // rows (attn/ops/precision.h), so a batch's bits do not depend on the
  // batches its thread decoded before.
  if (workers <= 1) {
    std::optional<PackAllRows> pack;
    if (batches > 1) pack.emplace();
    std::unique_ptr<DecodingBatch> kept;
    for (std::size_t k = 0; k < batches; ++k) run_batch(k * batch_size, kept);
    return out;
  }
  // Side by side: the longest batches first (they take the longest), handed
  // out one at a time; each thread's ops stay on it (a one-thread limit, and
  // ops inside a parallel region do not fork). The first exception stops
  // the others at their next batch and is rethrown here.
  net.eval();  // decode() sets it too, but then writes nothing (Module::train)
  // Every thread decodes in the caller's precision and quantization, with
  // the same kept copies of the weights (made once for all of them).
  const PrecisionScope::Shared precision = PrecisionScope::current();
  const QuantizeScope::Shared quantize = QuantizeScope::current();
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
#pragma omp parallel num_threads(workers)
  {
    try {
      detail::ThreadLimit one(1);
      PackAllRows pack;
      PrecisionScope thread_precision(precision);
      QuantizeScope thread_quantize(quantize);
      std::unique_ptr<DecodingBatch> kept;
      for (;;) {
        const std::size_t k = next.fetch_add(1, std::memory_order_relaxed);
        if (k >= batches || failed.load(std::memory_order_relaxed)) break;
        run_batch((batches - 1 - k) * batch_size, kept);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
      failed.store(true, std::memory_order_relaxed);
    }
  }
  if (error) std::rethrow_exception(error);
  return out;
}

AttentionMaps attention_maps(nn::Seq2SeqModel& net, const data::Tokenizer& tokenizer,
                             const TextTranslation& tr) {
  net.eval();
  autograd::NoGradGuard no_grad;
  nn::KeepAttentionWeights keep;  // the materialized path, which records the weights
  AttentionMaps maps;
  const std::int64_t Ts = static_cast<std::int64_t>(tr.source_ids.size());
  ATTN_CHECK(Ts > 0, ValueError, "attention_maps: an empty source");
  maps.source_tokens =
      tokenizer.pieces(std::vector<std::int64_t>(tr.source_ids.begin(), tr.source_ids.end() - 1),
                       data::Side::source);
  maps.source_tokens.push_back("<eos>");
  std::vector<std::int64_t> tgt = {tokenizer.vocab(data::Side::target)["<bos>"]};
  tgt.insert(tgt.end(), tr.ids.begin(), tr.ids.end());
  if (static_cast<std::int64_t>(tgt.size()) > net.max_len())
    tgt.resize(static_cast<std::size_t>(net.max_len()));
  maps.target_tokens = {"<bos>"};
  for (const auto& p :
       tokenizer.pieces(std::vector<std::int64_t>(tgt.begin() + 1, tgt.end()), data::Side::target))
    maps.target_tokens.push_back(p);
  const std::int64_t Tt = static_cast<std::int64_t>(tgt.size());
  Tensor src = from_vector(tr.source_ids, {1, Ts});
  Tensor len = from_vector(std::vector<std::int64_t>{Ts});
  nn::DecoderState state = net.begin(src, len);
  nn::AttentionWeights enc = net.attention_weights();
  net.decode(from_vector(tgt, {1, Tt}), state);
  nn::AttentionWeights dec = net.attention_weights();
  for (auto& w : enc.encoder) maps.encoder.push_back(w.contiguous());
  for (auto& w : dec.decoder_self) maps.decoder_self.push_back(w.contiguous());
  for (auto& w : dec.decoder_cross) maps.decoder_cross.push_back(w.contiguous());
  return maps;
}

namespace {
// Options for translations whose text alone is used: greedy decoding skips
// the log-probabilities (DecodeOptions::scores).
DecodeOptions text_only(DecodeOptions options) {
  options.scores = false;
  return options;
}
}  // namespace

Validation validate_translator(nn::Seq2SeqModel& net, const data::Tokenizer& tokenizer,
                               const std::vector<data::SentencePair>& text,
                               const data::TokenizedPairs& pairs, const DecodeOptions& options,
                               optim::Communicator* comm) {
  const data::Vocab& tv = tokenizer.vocab(data::Side::target);
  const bool split = comm && comm->size() > 1;
  // This process's share of the pairs (all of them without a communicator).
  const optim::RowRange text_rows =
      split ? optim::shard_rows(static_cast<std::int64_t>(text.size()), comm->rank(), comm->size())
            : optim::RowRange{0, static_cast<std::int64_t>(text.size())};
  const optim::RowRange pair_rows =
      split ? optim::shard_rows(static_cast<std::int64_t>(pairs.size()), comm->rank(), comm->size())
            : optim::RowRange{0, static_cast<std::int64_t>(pairs.size())};
  data::TokenizedPairs part;  // copied only when split
  if (split) {
    for (std::int64_t i = pair_rows.first; i < pair_rows.first + pair_rows.count; ++i) {
      part.src.push_back(pairs.src[static_cast<std::size_t>(i)]);
      part.tgt.push_back(pairs.tgt[static_cast<std::size_t>(i)]);
    }
  }
  auto [loss_sum, tokens] =
      evaluate_loss(net, split ? part : pairs, tv["<pad>"], tv["<bos>"], tv["<eos>"]);
  std::vector<std::string> sources, refs, hyps;
  for (std::int64_t i = text_rows.first; i < text_rows.first + text_rows.count; ++i) {
    sources.push_back(text[static_cast<std::size_t>(i)].source);
    refs.push_back(text[static_cast<std::size_t>(i)].target);
  }
  if (!sources.empty())
    for (auto& t : translate_texts(net, tokenizer, sources, text_only(options)))
      hyps.push_back(t.front().text);
  BleuScore counts = corpus_bleu_13a(hyps, refs);
  if (split) {
    std::array<double, 12> sums = {loss_sum, tokens, static_cast<double>(counts.sys_len),
                                   static_cast<double>(counts.ref_len)};
    for (std::size_t n = 0; n < 4; ++n) {
      sums[4 + n] = static_cast<double>(counts.counts[n]);
      sums[8 + n] = static_cast<double>(counts.totals[n]);
    }
    comm->allreduce_sum(sums);
    loss_sum = sums[0];
    tokens = sums[1];
    counts.sys_len = static_cast<std::int64_t>(sums[2]);
    counts.ref_len = static_cast<std::int64_t>(sums[3]);
    for (std::size_t n = 0; n < 4; ++n) {
      counts.counts[n] = static_cast<std::int64_t>(sums[4 + n]);
      counts.totals[n] = static_cast<std::int64_t>(sums[8 + n]);
    }
  }
  Validation v;
  v.loss = tokens > 0 ? loss_sum / tokens : 0.0;
  v.perplexity = std::exp(v.loss);
  v.bleu = bleu_from_counts(counts).score;
  return v;
}

}  // namespace attn::seq2seq
