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
#include "attn/core/threads.h"
#include "core/parallel.h"
#include "ops/row_stats.h"

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

// The attention weights one step recorded for one row, per layer: self
// (heads, t + 1) and cross (heads, Ts); `parent` is the row's earlier steps.
struct AttentionStep {
  std::shared_ptr<const AttentionStep> parent;
  std::vector<Tensor> self, cross;
};

struct Beam {
  std::vector<std::int64_t> ids;
  double log_prob = 0;
  std::shared_ptr<const AttentionStep> attention;  // its steps so far (keep_attention)
};

struct Finished {
  Hypothesis hyp;
  std::shared_ptr<const AttentionStep> attention;
};

struct Sentence {
  std::int64_t limit = 1;  // L_b
  std::vector<Beam> beams;  // live, best first: one batch row each
  std::vector<Finished> finished;  // in the order found
};

// One candidate continuation: beam `beam` (index within its sentence) + token.
struct Candidate {
  double log_prob;
  std::int64_t beam, token;
};

bool ranks_before(const Candidate& a, const Candidate& b) {
  if (a.log_prob != b.log_prob) return a.log_prob > b.log_prob;
  if (a.beam != b.beam) return a.beam < b.beam;
  return a.token < b.token;
}

// The best `m` candidates of one row of logits x (V) whose beam has
// log-probability `log_prob`, ranked by ranks_before, into `top` (as beam
// `b`). A candidate's log-probability is log_prob + log_softmax(x)[v],
// computed as (log_prob - log_sum_exp) + x[v]; greedy decoding (m = 1, one
// beam) takes the first maximal logit, as argmax does, with log_prob +
// (x[v] - log_sum_exp). Beam search ranks only the few positions that
// detail::row_top_candidates finds (one compare per logit, no ranking of
// the others): 12% less time for beam 4 in bf16 and int8 with the tatoeba
// model, the same translations and scores. (Greedy decoding without scores
// takes the model's step_argmax instead, log_prob 0 throughout.)
void row_best(const float* x, std::int64_t V, double log_prob, std::int64_t b, std::int64_t m,
              bool greedy, std::vector<Candidate>& top) {
  top.clear();
  // The largest logit and log(sum_v exp(x_v)) (ops/row_stats.h).
  const detail::RowStats stats = detail::row_stats(x, V);
  if (greedy) {
    // The first maximal logit, as argmax takes it (0 for a NaN first logit).
    const std::int64_t best = detail::first_equal(x, V, stats.max);
    top.push_back({log_prob + (x[best] - stats.log_sum_exp), b, best});
    return;
  }
  const double base = log_prob - stats.log_sum_exp;
  if (V >= 64 && m <= 64 && !std::isnan(stats.log_sum_exp)) {
    // A few positions that include the m largest logits (ops/row_stats.h),
    // ranked. base + x is monotone in x, so they hold the m best candidates.
    thread_local std::vector<std::int64_t> positions;
    if (positions.size() < static_cast<std::size_t>(V))
      positions.resize(static_cast<std::size_t>(V));
    const std::int64_t n = detail::row_top_candidates(x, V, m, positions.data());
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = positions[static_cast<std::size_t>(i)];
      top.push_back({base + x[v], b, v});
    }
    std::partial_sort(top.begin(), top.begin() + m, top.end(), ranks_before);
    top.resize(static_cast<std::size_t>(m));
    return;
  }
  // A NaN logit, or a short row: one pass. Once `top` is full, a logit at most that of its last
  // candidate cannot rank before it (base + x is monotone in x, and a later token loses a tie):
  // blocks whose largest logit is at most that are skipped whole.
  constexpr std::int64_t kBlock = 64;
  bool full = false;
  float threshold = 0;
  for (std::int64_t start = 0; start < V; start += kBlock) {
    const std::int64_t end = std::min(V, start + kBlock);
    if (full) {
      float bm = x[start];
#pragma omp simd reduction(max : bm)
      for (std::int64_t v = start + 1; v < end; ++v) bm = x[v] > bm ? x[v] : bm;
      if (!(bm > threshold)) continue;
    }
    for (std::int64_t v = start; v < end; ++v) {
      if (full && !(x[v] > threshold)) continue;
      const Candidate c{base + x[v], b, v};
      if (static_cast<std::int64_t>(top.size()) == m) {
        if (!ranks_before(c, top.back())) continue;
        top.pop_back();
      }
      top.insert(std::upper_bound(top.begin(), top.end(), c, ranks_before), c);
      if (static_cast<std::int64_t>(top.size()) == m) {
        full = true;
        threshold = x[top.back().token];
      }
    }
  }
}

// The best `m` candidates of a sentence whose live beams are rows [0, n) of
// `row_tops` (each row's best m or more, from row_best), ranked by
// ranks_before. The best m of all n * V candidates are among the best m of
// each row (a candidate with m others of its row ranked before it has m
// before it in all), so only those are ranked together.
void best_candidates(const std::vector<Candidate>* row_tops, std::int64_t n, std::int64_t m,
                     std::vector<Candidate>& buffer, std::vector<Candidate>& out) {
  buffer.clear();
  for (std::int64_t b = 0; b < n; ++b)
    buffer.insert(buffer.end(), row_tops[b].begin(), row_tops[b].end());
  m = std::min<std::int64_t>(m, static_cast<std::int64_t>(buffer.size()));
  std::partial_sort(buffer.begin(), buffer.begin() + m, buffer.end(), ranks_before);
  out.assign(buffer.begin(), buffer.begin() + m);
}

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

// The attention a hypothesis recorded, as HypothesisAttention: per layer of
// each kind the architecture has (a Bahdanau model records no self-attention).
HypothesisAttention assemble_attention(const std::shared_ptr<const AttentionStep>& last) {
  std::vector<const AttentionStep*> steps;
  for (const AttentionStep* s = last.get(); s; s = s->parent.get()) steps.push_back(s);
  std::reverse(steps.begin(), steps.end());
  HypothesisAttention out;
  const std::int64_t T = static_cast<std::int64_t>(steps.size());
  if (T == 0) return out;
  for (std::size_t l = 0; l < steps[0]->self.size(); ++l) {
    const std::int64_t H = steps[0]->self[l].size(0);
    Tensor self = zeros({H, T, T}, steps[0]->self[l].dtype());
    for (std::int64_t t = 0; t < T; ++t)
      copy_(self.select(1, t).narrow(1, 0, t + 1), steps[static_cast<std::size_t>(t)]->self[l]);
    out.self.push_back(self);
  }
  for (std::size_t l = 0; l < steps[0]->cross.size(); ++l) {
    const Tensor& c0 = steps[0]->cross[l];
    Tensor cross = Tensor::empty({c0.size(0), T, c0.size(1)}, c0.dtype());
    for (std::int64_t t = 0; t < T; ++t)
      copy_(cross.select(1, t), steps[static_cast<std::size_t>(t)]->cross[l]);
    out.cross.push_back(cross);
  }
  return out;
}

}  // namespace

std::vector<std::vector<Hypothesis>> decode(nn::Seq2SeqModel& net, const Tensor& src,
                                            const Tensor& src_valid_lens, std::int64_t bos,
                                            std::int64_t eos, const DecodeOptions& options) {
  options.validate();
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
  const std::vector<std::int64_t> lens = to_vector<std::int64_t>(src_valid_lens.to(DType::i64));
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t n = lens[static_cast<std::size_t>(b)];
    ATTN_CHECK(n >= 0 && n <= Ts, ValueError,
               "decode: source {} has valid length {}, outside [0, {}] (its row's width)", b, n,
               Ts);
    ATTN_CHECK(n <= max_len, ValueError,
               "decode: source {} has {} ids, more than the model's {} positions (max_len)", b, n,
               max_len);
  }
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

  std::vector<Candidate> buffer, ranked;
  std::vector<std::vector<Candidate>> row_tops;
  std::vector<std::int64_t> parents, encoder_rows;
  for (std::int64_t t = 0; !active.empty(); ++t) {
    const std::int64_t R = static_cast<std::int64_t>(tokens.size());
    const Tensor input = from_vector(tokens, {R, 1});
    // Greedy decoding without scores needs each row's argmax alone, which
    // the model may find without computing every logit (step_argmax).
    const bool argmax_only = K == 1 && !options.scores;
    // logits (R, 1, V), or with argmax_only each row's token (R, 1)
    const Tensor out = argmax_only ? net.step_argmax(input, state).contiguous()
                                   : net.step(input, state).contiguous();
    nn::AttentionWeights weights;
    if (options.keep_attention) weights = net.attention_weights();

    // Each row's best candidates (its log-sum-exp and one pass over its
    // logits), the rows in parallel: a sentence with n live beams needs the
    // best K + n <= 2K of each of its rows (greedy: the argmax).
    std::vector<double> row_log_prob(static_cast<std::size_t>(R));
    {
      std::int64_t r = 0;
      for (std::int64_t id : active)
        for (const Beam& beam : sentences[static_cast<std::size_t>(id)].beams)
          row_log_prob[static_cast<std::size_t>(r++)] = beam.log_prob;
    }
    row_tops.resize(static_cast<std::size_t>(R));
    if (argmax_only) {
      const std::int64_t* best = out.data<std::int64_t>();
      for (std::int64_t r = 0; r < R; ++r)
        row_tops[static_cast<std::size_t>(r)].assign(1, Candidate{0.0, 0, best[r]});
    } else {
      const float* x = out.data<float>();
      detail::parallel_for(
          R, detail::loop_threads(R > 1 && R * V >= parallel_grain()), [&](std::int64_t r) {
            row_best(x + r * V, V, row_log_prob[static_cast<std::size_t>(r)], 0, K == 1 ? 1 : 2 * K,
                     K == 1, row_tops[static_cast<std::size_t>(r)]);
          });
    }

    std::vector<std::int64_t> next_active, next_tokens;
    parents.clear();
    encoder_rows.clear();
    std::int64_t row = 0;
    for (std::int64_t id : active) {
      Sentence& s = sentences[static_cast<std::size_t>(id)];
      const std::int64_t n = static_cast<std::int64_t>(s.beams.size());
      // The history of each row, this step included.
      std::vector<std::shared_ptr<const AttentionStep>> history(static_cast<std::size_t>(n));
      if (options.keep_attention) {
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
      }
      const bool at_limit = t + 1 >= s.limit;
      for (std::int64_t b = 0; b < n; ++b)
        for (Candidate& c : row_tops[static_cast<std::size_t>(row + b)]) c.beam = b;
      best_candidates(row_tops.data() + row, n, K == 1 ? 1 : K + n, buffer, ranked);
      std::vector<Beam> live;
      std::vector<std::int64_t> live_rows;
      for (std::int64_t j = 0; j < static_cast<std::int64_t>(ranked.size()); ++j) {
        const Candidate& c = ranked[static_cast<std::size_t>(j)];
        const Beam& parent = s.beams[static_cast<std::size_t>(c.beam)];
        if (c.token == eos || at_limit) {
          if (j >= K) {
            if (at_limit) break;
            continue;  // an <eos> ranked below the beam: dropped
          }
          Finished f;
          f.hyp.ids = parent.ids;
          if (c.token != eos) f.hyp.ids.push_back(c.token);
          f.hyp.eos = c.token == eos;
          if (K == 1 && !options.scores) {  // not computed
            f.hyp.log_prob = f.hyp.score = std::numeric_limits<double>::quiet_NaN();
          } else {
            f.hyp.log_prob = c.log_prob;
            f.hyp.score = c.log_prob / length_penalty(t + 1, options.length_penalty);
          }
          f.attention = history[static_cast<std::size_t>(c.beam)];
          s.finished.push_back(std::move(f));
          continue;
        }
        Beam next;
        next.ids = parent.ids;
        next.ids.push_back(c.token);
        next.log_prob = c.log_prob;
        next.attention = history[static_cast<std::size_t>(c.beam)];
        live.push_back(std::move(next));
        live_rows.push_back(row + c.beam);
        if (static_cast<std::int64_t>(live.size()) == K) break;
      }
      const std::int64_t found = static_cast<std::int64_t>(s.finished.size());
      bool done = live.empty() || found >= K;
      if (!done && found >= options.n_best) {
        // The n_best-th best score so far against the best any live beam can reach.
        std::vector<double> scores;
        for (const Finished& f : s.finished) scores.push_back(f.hyp.score);
        std::nth_element(scores.begin(), scores.begin() + (options.n_best - 1), scores.end(),
                         std::greater<>());
        const double bound =
            live.front().log_prob / length_penalty(s.limit, options.length_penalty);
        done = bound < scores[static_cast<std::size_t>(options.n_best - 1)];
      }
      if (done) {
        s.beams.clear();
      } else {
        next_active.push_back(id);
        for (std::size_t b = 0; b < live.size(); ++b) {
          parents.push_back(live_rows[b]);
          // Any row of the sentence has its source: the one at the same place
          // keeps that side where it is, or closes the gaps of sentences that left.
          encoder_rows.push_back(row + std::min(static_cast<std::int64_t>(b), n - 1));
          next_tokens.push_back(live[b].ids.back());
        }
        s.beams = std::move(live);
      }
      row += n;
    }
    if (R == K * static_cast<std::int64_t>(active.size()) &&
        static_cast<std::int64_t>(parents.size()) ==
            K * static_cast<std::int64_t>(next_active.size()))
      fill_holes(K, next_active, next_tokens, parents, encoder_rows);
    active = std::move(next_active);
    tokens = std::move(next_tokens);
    if (active.empty()) break;
    bool identity = static_cast<std::int64_t>(parents.size()) == R;
    for (std::size_t r = 0; identity && r < parents.size(); ++r)
      identity = parents[r] == static_cast<std::int64_t>(r);
    if (!identity) {
      const std::int64_t n = static_cast<std::int64_t>(parents.size());
      state.select_rows(from_vector(parents, {n}), from_vector(encoder_rows, {n}));
    }
  }

  for (std::int64_t b = 0; b < B; ++b) {
    std::vector<Finished>& found = sentences[static_cast<std::size_t>(b)].finished;
    std::stable_sort(found.begin(), found.end(), [](const Finished& a, const Finished& c) {
      if (a.hyp.score != c.hyp.score) return a.hyp.score > c.hyp.score;
      return a.hyp.log_prob > c.hyp.log_prob;
    });
    const std::size_t n = std::min(found.size(), static_cast<std::size_t>(options.n_best));
    for (std::size_t i = 0; i < n; ++i) {
      if (options.keep_attention) found[i].hyp.attention = assemble_attention(found[i].attention);
      result[static_cast<std::size_t>(b)].push_back(std::move(found[i].hyp));
    }
  }
  return result;
}

}  // namespace attn::seq2seq
