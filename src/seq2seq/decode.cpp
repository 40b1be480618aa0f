// Greedy and beam-search decoding in one batched loop over the KV cache
// (the rules are at the top of attn/seq2seq/decode.h).
#include "attn/seq2seq/decode.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>

#include "attn/autograd/node.h"
#include "seq2seq/search.h"

namespace attn::seq2seq {

void DecodeOptions::validate() const {
  ATTN_CHECK(beam_size >= 1, ValueError, "decode: beam_size must be at least 1, got {}", beam_size);
  ATTN_CHECK(n_best >= 1 && n_best <= beam_size, ValueError,
             "decode: n_best must be in [1, beam_size {}], got {}", beam_size, n_best);
  ATTN_CHECK(std::isfinite(length_penalty) && length_penalty >= 0, ValueError,
             "decode: length_penalty must be a number >= 0, got {}", length_penalty);
  ATTN_CHECK(max_length >= 0, ValueError,
             "decode: max_length must be >= 0 (0: the model's), got {}", max_length);
  ATTN_CHECK(std::isfinite(max_length_factor) && max_length_factor >= 0, ValueError,
             "decode: max_length_factor must be a number >= 0 (0: off), got {}", max_length_factor);
}

double length_penalty(std::int64_t length, double alpha) {
  return alpha == 0 ? 1.0 : std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

std::int64_t max_decode_length(std::int64_t source_length, std::int64_t max_len,
                               const DecodeOptions& options) {
  std::int64_t limit = max_len;
  if (options.max_length > 0) limit = std::min(limit, options.max_length);
  if (options.max_length_factor > 0) {
    // ceil, with a margin for products such as 1.1 * 10 = 11.000000000000002.
    const double relative =
        std::ceil(options.max_length_factor * static_cast<double>(source_length) - 1e-9);
    limit = std::min(limit, static_cast<std::int64_t>(std::min(relative, 1e15)));
  }
  return std::max<std::int64_t>(limit, 1);
}

namespace {

using search::AttentionStep;
using search::Sentence;

// Every sentence on K rows before and after the step (greedy decoding: one
// row each): rather than closing the gaps of sentences that left by moving
// every later block of K rows down, a sentence that goes on keeps its block
// where it lies inside the new batch, and the last sentences' blocks move
// into the gaps, so a step copies only the caches of as many blocks as
// sentences left. `ids` are the sentences that go on, in their old order,
// each with K entries of `tokens`, `parents` and `encoder_rows` (whose first
// is the sentence's first old row); afterwards all are in the new block order.
void fill_holes(std::int64_t K, std::vector<std::int64_t>& ids, std::vector<std::int64_t>& tokens,
                std::vector<std::int64_t>& parents, std::vector<std::int64_t>& encoder_rows) {
  const std::size_t n = ids.size(), k = static_cast<std::size_t>(K);
  std::vector<std::size_t> block(n), movers;
  std::vector<char> taken(n, 0);
  for (std::size_t j = 0; j < n; ++j) {
    const auto q = static_cast<std::size_t>(encoder_rows[j * k] / K);
    if (q < n) {
      block[j] = q;
      taken[q] = 1;
    } else {
      movers.push_back(j);
    }
  }
  if (movers.empty()) return;
  std::size_t next = 0;
  for (std::size_t q = 0; q < n; ++q)
    if (!taken[q]) block[movers[next++]] = q;
  std::vector<std::int64_t> ids2(n), tokens2(n * k), parents2(n * k), encoder_rows2(n * k);
  for (std::size_t j = 0; j < n; ++j) {
    ids2[block[j]] = ids[j];
    for (std::size_t b = 0; b < k; ++b) {
      tokens2[block[j] * k + b] = tokens[j * k + b];
      parents2[block[j] * k + b] = parents[j * k + b];
      encoder_rows2[block[j] * k + b] = encoder_rows[j * k + b];
    }
  }
  ids = std::move(ids2);
  tokens = std::move(tokens2);
  parents = std::move(parents2);
  encoder_rows = std::move(encoder_rows2);
}

// decode()'s checks of its arguments; returns each source's valid length.
std::vector<std::int64_t> check_sources(const nn::Seq2SeqModel& net, const Tensor& src,
                                        const Tensor& src_valid_lens, std::int64_t bos,
                                        std::int64_t eos) {
  ATTN_CHECK(src.defined() && src.dim() == 2 && !is_floating(src.dtype()), ValueError,
             "decode: expected source ids (batch, steps) of an integer dtype, got {}",
             src.defined() ? fmt::format("{} {}", dtype_name(src.dtype()), shape_str(src.shape()))
                           : std::string("an undefined tensor"));
  const std::int64_t B = src.size(0), Ts = src.size(1);
  ATTN_CHECK(src_valid_lens.defined() && src_valid_lens.dim() == 1 && src_valid_lens.size(0) == B &&
                 !is_floating(src_valid_lens.dtype()),
             ValueError, "decode: expected integer valid lengths ({}) for {} sources, got {}", B, B,
             src_valid_lens.defined() ? fmt::format("{} {}", dtype_name(src_valid_lens.dtype()),
                                                    shape_str(src_valid_lens.shape()))
                                      : std::string("an undefined tensor"));
  const std::int64_t V = net.tgt_vocab_size(), max_len = net.max_len();
  ATTN_CHECK(bos >= 0 && bos < V && eos >= 0 && eos < V, ValueError,
             "decode: bos {} and eos {} must be target ids in [0, {})", bos, eos, V);
  std::vector<std::int64_t> lens = to_vector<std::int64_t>(src_valid_lens.to(DType::i64));
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t n = lens[static_cast<std::size_t>(b)];
    ATTN_CHECK(n >= 0 && n <= Ts, ValueError,
               "decode: source {} has valid length {}, outside [0, {}] (its row's width)", b, n,
               Ts);
    ATTN_CHECK(n <= max_len, ValueError,
               "decode: source {} has {} ids, more than the model's {} positions (max_len)", b, n,
               max_len);
  }
  return lens;
}

// The attention weights this step recorded for the n beams of a sentence at
// rows [row, row + n), each appended to its beam's history.
std::vector<std::shared_ptr<const AttentionStep>> record_attention(
    const Sentence& s, const nn::AttentionWeights& weights, std::int64_t row, std::int64_t H) {
  const std::int64_t n = static_cast<std::int64_t>(s.beams.size());
  std::vector<std::shared_ptr<const AttentionStep>> history(static_cast<std::size_t>(n));
  for (std::int64_t b = 0; b < n; ++b) {
    auto step = std::make_shared<AttentionStep>();
    step->parent = s.beams[static_cast<std::size_t>(b)].attention;
    // (R * H, 1, keys): the heads of row r are rows r * H .. r * H + H - 1.
    for (const Tensor& w : weights.decoder_self)
      step->self.push_back(w.narrow(0, (row + b) * H, H).select(1, 0).clone());
    for (const Tensor& w : weights.decoder_cross)
      step->cross.push_back(w.narrow(0, (row + b) * H, H).select(1, 0).clone());
    history[static_cast<std::size_t>(b)] = std::move(step);
  }
  return history;
}

// The rows of the next step: `parents` (the old row each new row continues)
// and `encoder_rows` (an old row with its source), from R rows before the
// step; every sentence on K rows before and after moves as fill_holes says.
// Picks the state's rows unless they stay as they were.
void regroup_rows(nn::DecoderState& state, std::int64_t R, std::int64_t K,
                  std::int64_t sentences_before, std::vector<std::int64_t>& active,
                  std::vector<std::int64_t>& tokens, std::vector<std::int64_t>& parents,
                  std::vector<std::int64_t>& encoder_rows) {
  if (R == K * sentences_before &&
      static_cast<std::int64_t>(parents.size()) == K * static_cast<std::int64_t>(active.size()))
    fill_holes(K, active, tokens, parents, encoder_rows);
  if (active.empty()) return;
  bool identity = static_cast<std::int64_t>(parents.size()) == R;
  for (std::size_t r = 0; identity && r < parents.size(); ++r)
    identity = parents[r] == static_cast<std::int64_t>(r);
  if (identity) return;
  const std::int64_t n = static_cast<std::int64_t>(parents.size());
  state.select_rows(from_vector(parents, {n}), from_vector(encoder_rows, {n}));
}

}  // namespace

std::vector<std::vector<Hypothesis>> decode(nn::Seq2SeqModel& net, const Tensor& src,
                                            const Tensor& src_valid_lens, std::int64_t bos,
                                            std::int64_t eos, const DecodeOptions& options) {
  options.validate();
  const std::vector<std::int64_t> lens = check_sources(net, src, src_valid_lens, bos, eos);
  const std::int64_t B = src.size(0), Ts = src.size(1), max_len = net.max_len();
  std::vector<std::vector<Hypothesis>> result(static_cast<std::size_t>(B));
  if (B == 0) return result;

  net.eval();
  autograd::NoGradGuard no_grad;
  std::unique_ptr<nn::KeepAttentionWeights> keep;
  if (options.keep_attention) keep = std::make_unique<nn::KeepAttentionWeights>();
  // Columns past max_len are padding of every row (checked above).
  Tensor source = Ts > max_len ? src.narrow(1, 0, max_len).contiguous() : src;
  Tensor valid = src_valid_lens.to(DType::i64).contiguous();
  nn::DecoderState state = net.begin(source, valid);

  const std::int64_t K = options.beam_size, H = net.num_heads();
  std::vector<Sentence> sentences(static_cast<std::size_t>(B));
  std::vector<std::int64_t> active;  // sentences in row order
  std::vector<std::int64_t> tokens;  // the next input of every row
  for (std::int64_t b = 0; b < B; ++b) {
    Sentence& s = sentences[static_cast<std::size_t>(b)];
    s.limit = max_decode_length(lens[static_cast<std::size_t>(b)], max_len, options);
    s.beams.emplace_back();
    active.push_back(b);
    tokens.push_back(bos);
  }
  // Greedy decoding without scores needs each row's argmax alone, which the
  // model may find without computing every logit (step_argmax).
  const bool argmax_only = K == 1 && !options.scores;
  search::SearchBuffers buffers;
  std::vector<std::int64_t> parents, encoder_rows, beam_parents;
  for (std::int64_t t = 0; !active.empty(); ++t) {
    const std::int64_t R = static_cast<std::int64_t>(tokens.size());
    const Tensor input = from_vector(tokens, {R, 1});
    // logits (R, 1, V), or with argmax_only each row's token (R, 1)
    const Tensor out = argmax_only ? net.step_argmax(input, state).contiguous()
                                   : net.step(input, state).contiguous();
    nn::AttentionWeights weights;
    if (options.keep_attention) weights = net.attention_weights();
    std::vector<double> row_log_prob;
    for (std::int64_t id : active)
      for (const search::Beam& beam : sentences[static_cast<std::size_t>(id)].beams)
        row_log_prob.push_back(beam.log_prob);
    search::rank_rows(out, argmax_only, row_log_prob, std::vector<std::int64_t>(R, K), buffers);

    std::vector<std::int64_t> next_active, next_tokens;
    parents.clear();
    encoder_rows.clear();
    std::int64_t row = 0;
    for (std::int64_t id : active) {
      Sentence& s = sentences[static_cast<std::size_t>(id)];
      const std::int64_t n = static_cast<std::int64_t>(s.beams.size());
      const auto history = options.keep_attention
                               ? record_attention(s, weights, row, H)
                               : std::vector<std::shared_ptr<const AttentionStep>>{};
      if (!search::advance_sentence(s, t, options, eos, row, n, history, buffers, beam_parents)) {
        next_active.push_back(id);
        for (std::size_t b = 0; b < s.beams.size(); ++b) {
          parents.push_back(row + beam_parents[b]);
          // Any row of the sentence has its source: the one at the same place
          // keeps that side where it is, or closes the gaps of sentences that left.
          encoder_rows.push_back(row + std::min(static_cast<std::int64_t>(b), n - 1));
          next_tokens.push_back(s.beams[b].ids.back());
        }
      }
      row += n;
    }
    const std::int64_t before = static_cast<std::int64_t>(active.size());
    active = std::move(next_active);
    tokens = std::move(next_tokens);
    regroup_rows(state, R, K, before, active, tokens, parents, encoder_rows);
  }

  for (std::int64_t b = 0; b < B; ++b)
    result[static_cast<std::size_t>(b)] = search::best_hypotheses(
        sentences[static_cast<std::size_t>(b)], options.n_best, options.keep_attention);
  return result;
}

}  // namespace attn::seq2seq
