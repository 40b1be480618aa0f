// src/seq2seq/search.h — internal: the search of greedy decoding and beam
// search, one step of one sentence at a time, shared by decode() (a batch
// that steps together) and DecodingBatch (sentences that join and leave at
// any step). The rules are at the top of attn/seq2seq/decode.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/seq2seq/decode.h"

namespace attn::seq2seq::search {

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

// What the steps reuse from one to the next.
struct SearchBuffers {
  std::vector<Candidate> buffer, ranked;
  std::vector<std::vector<Candidate>> row_tops;
};

// Each row's best candidates into buffers.row_tops[r]: rows [0, R) of `out`,
// logits (R, 1, V) f32, or with argmax_only each row's token (R, 1) i64
// (log-probability 0). Row r continues a beam of log-probability
// row_log_prob[r] in a search of row_beam_size[r] beams: greedy (1) takes the
// first largest logit, beam search the best 2K. Rows in parallel.
void rank_rows(const Tensor& out, bool argmax_only, const std::vector<double>& row_log_prob,
               const std::vector<std::int64_t>& row_beam_size, SearchBuffers& buffers);

// One step of one sentence decoded with `options`, its n live beams at rows
// [row, row + n) of buffers.row_tops: t is the step (its decoder inputs sat
// at position t; its first step is 0), history[b] beam b's attention up to
// this step (keep_attention; else empty). Returns true when the sentence is
// done (every live beam dropped); otherwise s.beams are its new live beams
// and parents[b] is the beam (in [0, n)) that new beam b continues.
bool advance_sentence(Sentence& s, std::int64_t t, const DecodeOptions& options, std::int64_t eos,
                      std::int64_t row, std::int64_t n,
                      const std::vector<std::shared_ptr<const AttentionStep>>& history,
                      SearchBuffers& buffers, std::vector<std::int64_t>& parents);

// The n_best best hypotheses a done sentence found, best score first (ties:
// higher log_prob, then found earlier), with their attention assembled when
// `keep_attention`.
std::vector<Hypothesis> best_hypotheses(Sentence& s, std::int64_t n_best, bool keep_attention);

}  // namespace attn::seq2seq::search
