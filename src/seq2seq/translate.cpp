#include "attn/seq2seq/translate.h"

#include <cstring>

#include "attn/autograd/node.h"
#include "attn/data/nmt.h"
#include "attn/ops/reduce.h"

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

std::vector<Translation> translate_greedy(nn::EncoderDecoder& net, const data::Vocab& src_vocab,
                                          const data::Vocab& tgt_vocab,
                                          const std::vector<std::string>& sentences,
                                          std::int64_t num_steps) {
  ATTN_CHECK(num_steps > 0, ValueError, "translate: num_steps must be positive, got {}", num_steps);
  std::vector<Translation> out(sentences.size());
  if (sentences.empty()) return out;
  net.eval();
  autograd::NoGradGuard no_grad;
  const std::int64_t B = static_cast<std::int64_t>(sentences.size());
  Tensor src = Tensor::empty({B, num_steps}, DType::i64), lens = Tensor::empty({B}, DType::i64);
  for (std::int64_t b = 0; b < B; ++b) {
    out[b].source = sentences[b];
    out[b].source_tokens = preprocess_sentence(sentences[b]);
    auto [ids, len] = encode_source(src_vocab, out[b].source_tokens, num_steps);
    std::memcpy(src.data<std::int64_t>() + b * num_steps, ids.data<std::int64_t>(),
                num_steps * sizeof(std::int64_t));
    lens.data<std::int64_t>()[b] = len.item<std::int64_t>();
  }
  Tensor enc = net.encoder->forward(src, lens);
  nn::DecoderState state = net.decoder->init_state(enc, lens);
  const std::int64_t bos = tgt_vocab["<bos>"], eos = tgt_vocab["<eos>"];
  Tensor dec_X = full({B, 1}, static_cast<double>(bos), DType::i64);
  std::vector<bool> done(B, false);
  std::int64_t remaining = B;
  for (std::int64_t t = 0; t < num_steps && remaining > 0; ++t) {
    Tensor logits = net.decoder->step(dec_X, state);  // (B, 1, V)
    dec_X = argmax(logits, 2);  // (B, 1)
    const std::int64_t* pred = dec_X.data<std::int64_t>();
    for (std::int64_t b = 0; b < B; ++b) {
      if (done[b]) continue;
      if (pred[b] == eos) {
        done[b] = true;
        --remaining;
      } else {
        out[b].tokens.push_back(tgt_vocab.token(pred[b]));
      }
    }
  }
  for (auto& tr : out) {
    for (std::size_t i = 0; i < tr.tokens.size(); ++i) tr.text += (i ? " " : "") + tr.tokens[i];
  }
  return out;
}

AttentionMaps attention_maps(nn::EncoderDecoder& net, const data::Vocab& src_vocab,
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
  if (static_cast<std::int64_t>(maps.target_tokens.size()) > num_steps)
    maps.target_tokens.resize(num_steps);
  std::vector<std::int64_t> tgt_ids = tgt_vocab.indices(maps.target_tokens);
  const std::int64_t Tt = static_cast<std::int64_t>(tgt_ids.size());
  Tensor enc = net.encoder->forward(src, len);
  net.decoder->forward(from_vector(tgt_ids, {1, Tt}), net.decoder->init_state(enc, len));
  // Keep the valid keys only: (heads, Tq, Tk).
  for (auto& w : net.encoder->attention_weights())
    maps.encoder.push_back(w.narrow(1, 0, valid).narrow(2, 0, valid).contiguous());
  auto dec = net.decoder->attention_weights();
  for (auto& w : dec[0]) maps.decoder_self.push_back(w.contiguous());
  for (auto& w : dec[1]) maps.decoder_cross.push_back(w.narrow(2, 0, valid).contiguous());
  return maps;
}

}  // namespace attn::seq2seq
