#include "attn/seq2seq/report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "attn/seq2seq/bleu.h"
#include "attn/viz/heatmap.h"
#include "attn/viz/line_plot.h"

namespace attn::seq2seq {

const std::vector<std::pair<std::string, std::string>>& d2l_test_pairs() {
  static const std::vector<std::pair<std::string, std::string>> pairs = {
      {"go .", "va !"},
      {"i lost .", "j'ai perdu ."},
      {"he's calm .", "il est calme ."},
      {"i'm home .", "je suis chez moi ."}};
  return pairs;
}

std::vector<ScoredTranslation> translate_and_score(
    nn::Seq2SeqModel& net, const data::Vocab& src_vocab, const data::Vocab& tgt_vocab,
    const std::vector<std::pair<std::string, std::string>>& pairs, std::int64_t num_steps) {
  std::vector<std::string> sources;
  for (const auto& [src, _] : pairs) sources.push_back(src);
  auto translations = translate_greedy(net, src_vocab, tgt_vocab, sources, num_steps);
  std::vector<ScoredTranslation> out;
  for (std::size_t i = 0; i < pairs.size(); ++i)
    out.push_back({pairs[i].first, translations[i].text, pairs[i].second,
                   bleu(translations[i].text, pairs[i].second, 2)});
  return out;
}

double median_ms(const std::function<void()>& fn, int runs) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + runs / 2, ms.end());
  return ms[static_cast<std::size_t>(runs / 2)];
}

namespace {

// The first n rows and columns of every (heads, Q, K) map.
std::vector<Tensor> first_of(const std::vector<Tensor>& maps, std::size_t n) {
  std::vector<Tensor> out;
  for (const Tensor& w : maps) {
    const std::int64_t q = std::min<std::int64_t>(w.size(1), static_cast<std::int64_t>(n));
    const std::int64_t k = std::min<std::int64_t>(w.size(2), static_cast<std::int64_t>(n));
    out.push_back(w.slice(1, 0, q).slice(2, 0, k));
  }
  return out;
}

data::Tokens first_of(const data::Tokens& t, std::size_t n) {
  return data::Tokens(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(std::min(n, t.size())));
}

}  // namespace

AttentionMaps first_tokens(const AttentionMaps& maps, std::size_t n) {
  AttentionMaps out;
  out.source_tokens = first_of(maps.source_tokens, n);
  out.target_tokens = first_of(maps.target_tokens, n);
  out.encoder = first_of(maps.encoder, n);
  out.decoder_self = first_of(maps.decoder_self, n);
  out.decoder_cross = first_of(maps.decoder_cross, n);
  return out;
}

std::vector<std::string> save_attention_figures(const AttentionMaps& all, std::int64_t num_heads,
                                                const std::string& stem) {
  const std::size_t n = kMaxPictureTokens;
  const bool cut = all.source_tokens.size() > n || all.target_tokens.size() > n;
  const AttentionMaps maps = first_tokens(all, n);
  auto grid = [&](const std::vector<Tensor>& layers) {
    std::vector<std::vector<Tensor>> rows;
    for (const auto& w : layers) {
      std::vector<Tensor> heads;
      for (std::int64_t h = 0; h < num_heads; ++h) heads.push_back(w.select(0, h));
      rows.push_back(heads);
    }
    return rows;
  };
  std::vector<std::string> titles, written;
  for (std::int64_t h = 1; h <= num_heads; ++h) titles.push_back(fmt::format("Head {}", h));
  auto draw = [&](const std::vector<Tensor>& layers, const char* title, const data::Tokens& keys,
                  const data::Tokens& queries, const char* suffix) {
    if (layers.empty()) return;  // a kind the architecture does not have
    std::vector<std::string> row_labels;
    for (std::size_t l = 1; l <= layers.size(); ++l)
      row_labels.push_back(fmt::format("Layer {}", l));
    viz::Heatmaps(grid(layers),
                  {.xlabel = "Key positions",
                   .ylabel = "Query positions",
                   .titles = titles,
                   .row_labels = row_labels,
                   .title = cut ? fmt::format("{} (the first {} tokens)", title, n) : title,
                   .xticklabels = keys,
                   .yticklabels = queries})
        .save(stem + suffix);
    written.push_back(stem + suffix + ".png");
  };
  draw(maps.encoder, "Encoder self-attention", maps.source_tokens, maps.source_tokens, "-encoder");
  draw(maps.decoder_self, "Decoder self-attention", maps.target_tokens, maps.target_tokens,
       "-decoder-self");
  draw(maps.decoder_cross, "Encoder-decoder attention", maps.source_tokens, maps.target_tokens,
       "-decoder-cross");
  return written;
}

std::string attention_maps_json(const AttentionMaps& maps, const std::string& source,
                                const std::string& translation) {
  // Floats printed with fmt's shortest round-trip form, not as doubles
  // (which would spell out the float's binary expansion).
  auto kind = [](const std::vector<Tensor>& layers) {
    std::string out = "[";
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const Tensor w = layers[l].to(DType::f32).contiguous();
      ATTN_CHECK(w.dim() == 3, ShapeError, "attention_maps_json: layer {} is {}, not (heads, Q, K)",
                 l, shape_str(w.shape()));
      const std::int64_t H = w.size(0), Q = w.size(1), K = w.size(2);
      const float* p = w.data<float>();
      out += l ? ",[" : "[";
      for (std::int64_t h = 0; h < H; ++h) {
        out += h ? ",[" : "[";
        for (std::int64_t q = 0; q < Q; ++q) {
          out += q ? ",[" : "[";
          for (std::int64_t k = 0; k < K; ++k) {
            if (k) out += ',';
            const float v = p[(h * Q + q) * K + k];
            ATTN_CHECK(std::isfinite(v), ValueError,
                       "attention_maps_json: weight {} of layer {}, head {}, query {} is {}", k, l,
                       h, q, v);
            out += fmt::format("{}", v);
          }
          out += ']';
        }
        out += ']';
      }
      out += ']';
    }
    return out + "]";
  };
  // Layers and heads of the first kind that has any (a model may lack a
  // kind: an RNN decoder has cross-attention only).
  std::size_t num_layers = 0;
  std::int64_t num_heads = 0;
  for (const auto* layers : {&maps.encoder, &maps.decoder_self, &maps.decoder_cross})
    if (num_layers == 0 && !layers->empty()) {
      num_layers = layers->size();
      num_heads = layers->front().dim() == 3 ? layers->front().size(0) : 0;
    }
  nlohmann::ordered_json head = {
      {"source", source},
      {"translation", translation},
      {"source_tokens", maps.source_tokens},
      {"target_tokens", maps.target_tokens},
      {"num_layers", num_layers},
      {"num_heads", num_heads},
  };
  std::string text = head.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  text.pop_back();  // the closing brace: the weights follow
  text += ",\"attention\":{\"encoder\":" + kind(maps.encoder) +
          ",\"decoder_self\":" + kind(maps.decoder_self) +
          ",\"decoder_cross\":" + kind(maps.decoder_cross) + "}}\n";
  return text;
}

void save_loss_plot(const std::vector<double>& epoch_losses, const std::vector<double>& step_losses,
                    std::int64_t batches_per_epoch, const std::vector<Validation>& validations,
                    const std::string& stem) {
  const bool valid = !validations.empty();
  const bool per_step = !step_losses.empty();
  viz::LinePlot plot({.title = valid ? "Training and validation loss" : "Training loss",
                      .xlabel = "epoch",
                      .ylabel = per_step ? "loss per token" : "loss",
                      .legend = viz::LegendLocation::upper_right,
                      .width = 340,
                      .height = 230});
  const double per_epoch = static_cast<double>(std::max<std::int64_t>(1, batches_per_epoch));
  std::vector<double> x, y;
  if (per_step) {
    const std::size_t n = step_losses.size();
    const std::size_t window = std::max<std::size_t>(1, n / 100);
    for (std::size_t s = 0; s < n; s += window) {
      const std::size_t e = std::min(n, s + window);
      double sum = 0;
      for (std::size_t k = s; k < e; ++k) sum += step_losses[k];
      x.push_back(static_cast<double>(e) / per_epoch);
      y.push_back(sum / static_cast<double>(e - s));
    }
  } else {
    for (std::size_t e = 1; e <= epoch_losses.size(); ++e) {
      x.push_back(static_cast<double>(e));
      y.push_back(epoch_losses[e - 1]);
    }
  }
  if (!x.empty()) plot.plot("train", x, y, "-");
  if (valid) {
    std::vector<double> vx, vy;
    for (const Validation& v : validations) {
      vx.push_back(static_cast<double>(v.step) / per_epoch);
      vy.push_back(v.loss);
    }
    plot.plot("valid", vx, vy, "m--");
  }
  if (x.empty() && !valid) return;  // nothing trained: no picture
  plot.save(stem);
}

void save_bleu_plot(const std::vector<Validation>& validations, const std::string& stem) {
  if (validations.empty()) return;
  viz::LinePlot plot({.title = "Validation BLEU",
                      .xlabel = "minutes of training",
                      .ylabel = "BLEU",
                      .legend = viz::LegendLocation::lower_right,
                      .width = 340,
                      .height = 230});
  std::vector<double> x, y;
  for (const Validation& v : validations) {
    x.push_back(v.seconds / 60.0);
    y.push_back(v.bleu);
  }
  plot.plot("valid", x, y, "bo-");
  plot.save(stem);
}

}  // namespace attn::seq2seq
