#include "attn/seq2seq/translate.h"

#include <algorithm>
#include <cstring>

#include "attn/autograd/node.h"
#include "attn/data/nmt.h"

namespace attn::seq2seq {

namespace {
data::Tokens preprocess_sentence(const std::string& s) {
  return data::split_spaces(data::preprocess_nmt(s));
}
}  // namespace

std::pair<Tensor, Tensor> encode_source(const data::Vocab& src_vocab, const data::Tokens& tokens,
                                        std::int64_t num_steps) {
  std::vector<std::int64_t> ids = src_vocab.indices(tokens);
  ids.push_back(src_vocab["<eos>"]);
  // d2l passes len(tokens) even when it exceeds num_steps; the cut sentence has num_steps.
  std::int64_t valid = std::min<std::int64_t>(static_cast<std::int64_t>(ids.size()), num_steps);
  ids = data::truncate_pad(std::move(ids), num_steps, src_vocab["<pad>"]);
  return {from_vector(ids, {1, num_steps}), from_vector(std::vector<std::int64_t>{valid})};
}

std::vector<std::vector<Translation>> translate(nn::Seq2SeqModel& net, const data::Vocab& src_vocab,
                                                const data::Vocab& tgt_vocab,
                                                const std::vector<std::string>& sentences,
                                                std::int64_t num_steps,
                                                const DecodeOptions& options) {
  ATTN_CHECK(num_steps > 0, ValueError, "translate: num_steps must be positive, got {}", num_steps);
  options.validate();
  std::vector<std::vector<Translation>> out(sentences.size());
  std::vector<Translation> given(sentences.size());
  std::vector<std::size_t> rows;  // the sentences to decode: those with a token
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    given[i].source = sentences[i];
    given[i].source_tokens = preprocess_sentence(sentences[i]);
    const bool blank = std::all_of(given[i].source_tokens.begin(), given[i].source_tokens.end(),
                                   [](const std::string& t) { return t.empty(); });
    if (blank) {
      out[i].push_back(given[i]);  // nothing to translate: the empty text
    } else {
      given[i].source_cut =
          static_cast<std::int64_t>(given[i].source_tokens.size()) + 1 > num_steps;
      rows.push_back(i);
    }
  }
  if (rows.empty()) return out;
  const std::int64_t B = static_cast<std::int64_t>(rows.size());
  Tensor src = Tensor::empty({B, num_steps}, DType::i64), lens = Tensor::empty({B}, DType::i64);
  for (std::int64_t b = 0; b < B; ++b) {
    auto [ids, len] = encode_source(src_vocab, given[rows[b]].source_tokens, num_steps);
    std::memcpy(src.data<std::int64_t>() + b * num_steps, ids.data<std::int64_t>(),
                num_steps * sizeof(std::int64_t));
    lens.data<std::int64_t>()[b] = len.item<std::int64_t>();
  }
  DecodeOptions o = options;
  if (o.max_length == 0) o.max_length = num_steps;
  const auto hypotheses = decode(net, src, lens, tgt_vocab["<bos>"], tgt_vocab["<eos>"], o);
  for (std::int64_t b = 0; b < B; ++b) {
    for (const Hypothesis& h : hypotheses[static_cast<std::size_t>(b)]) {
      Translation t = given[rows[b]];
      for (std::int64_t id : h.ids) t.tokens.push_back(tgt_vocab.token(id));
      for (std::size_t i = 0; i < t.tokens.size(); ++i) t.text += (i ? " " : "") + t.tokens[i];
      t.log_prob = h.log_prob;
      t.score = h.score;
      t.eos = h.eos;
      out[rows[b]].push_back(std::move(t));
    }
  }
  return out;
}

std::vector<Translation> translate_greedy(nn::Seq2SeqModel& net, const data::Vocab& src_vocab,
                                          const data::Vocab& tgt_vocab,
                                          const std::vector<std::string>& sentences,
                                          std::int64_t num_steps) {
  std::vector<Translation> out;
  for (auto& n_best : translate(net, src_vocab, tgt_vocab, sentences, num_steps))
    out.push_back(std::move(n_best.front()));
  return out;
}

AttentionMaps attention_maps(nn::Seq2SeqModel& net, const data::Vocab& src_vocab,
                             const data::Vocab& tgt_vocab, const Translation& tr,
                             std::int64_t num_steps) {
  net.eval();
  autograd::NoGradGuard no_grad;
  nn::KeepAttentionWeights keep;  // the materialized path, which records the weights
  AttentionMaps maps;
  auto [src, len] = encode_source(src_vocab, tr.source_tokens, num_steps);
  std::int64_t valid = len.item<std::int64_t>();
  maps.source_tokens = tr.source_tokens;
  maps.source_tokens.push_back("<eos>");
  maps.source_tokens.resize(static_cast<std::size_t>(valid));
  maps.target_tokens = {"<bos>"};
  for (const auto& t : tr.tokens) maps.target_tokens.push_back(t);
  if (!tr.eos && !tr.tokens.empty()) maps.target_tokens.pop_back();  // never fed
  if (static_cast<std::int64_t>(maps.target_tokens.size()) > net.max_len())
    maps.target_tokens.resize(static_cast<std::size_t>(net.max_len()));
  std::vector<std::int64_t> tgt_ids = tgt_vocab.indices(maps.target_tokens);
  const std::int64_t Tt = static_cast<std::int64_t>(tgt_ids.size());
  // The encoder's weights are those of begin(), the decoder's of decode().
  nn::DecoderState state = net.begin(src, len);
  nn::AttentionWeights enc = net.attention_weights();
  net.decode(from_vector(tgt_ids, {1, Tt}), state);
  nn::AttentionWeights dec = net.attention_weights();
  // Keep the valid keys only: (heads, Tq, Tk).
  for (auto& w : enc.encoder)
    maps.encoder.push_back(w.narrow(1, 0, valid).narrow(2, 0, valid).contiguous());
  for (auto& w : dec.decoder_self) maps.decoder_self.push_back(w.contiguous());
  for (auto& w : dec.decoder_cross)
    maps.decoder_cross.push_back(w.narrow(2, 0, valid).contiguous());
  return maps;
}

}  // namespace attn::seq2seq
