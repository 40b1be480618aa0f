// attn train / translate / evaluate / attention — the Transformer on fra-eng (d2l 10.7).
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "attn/attn.h"
#include "attn/data/nmt.h"
#include "attn/io/atomic_file.h"
#include "attn/seq2seq/bleu.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translate.h"
#include "attn/viz/heatmap.h"
#include "attn/viz/line_plot.h"
#include "commands.h"

#ifndef ATTN_DEFAULT_CORPUS
#define ATTN_DEFAULT_CORPUS "datasets/fra-eng/fra.txt.gz"
#endif

namespace attn::cli {
namespace {

namespace fs = std::filesystem;

double peak_rss_mib() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  long t = std::lround(s);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
                   : fmt::format("{}:{:02}", t / 60, t % 60);
}

// ---- attention pictures ----

// One figure per attention kind: rows = layers, cols = heads.
void save_attention_figures(const seq2seq::AttentionMaps& maps, std::int64_t num_heads,
                            const std::string& stem) {
  auto grid = [&](const std::vector<Tensor>& layers) {
    std::vector<std::vector<Tensor>> rows;
    for (const auto& w : layers) {
      std::vector<Tensor> heads;
      for (std::int64_t h = 0; h < num_heads; ++h) heads.push_back(w.select(0, h));
      rows.push_back(heads);
    }
    return rows;
  };
  std::vector<std::string> titles, row_labels;
  for (std::int64_t h = 1; h <= num_heads; ++h) titles.push_back(fmt::format("Head {}", h));
  for (std::size_t l = 1; l <= maps.encoder.size(); ++l)
    row_labels.push_back(fmt::format("Layer {}", l));
  auto draw = [&](const std::vector<Tensor>& layers, const char* title, const data::Tokens& keys,
                  const data::Tokens& queries, const char* suffix) {
    viz::Heatmaps(grid(layers), {.xlabel = "Key positions",
                                 .ylabel = "Query positions",
                                 .titles = titles,
                                 .row_labels = row_labels,
                                 .title = title,
                                 .xticklabels = keys,
                                 .yticklabels = queries})
        .save(stem + suffix);
  };
  draw(maps.encoder, "Encoder self-attention", maps.source_tokens, maps.source_tokens, "-encoder");
  draw(maps.decoder_self, "Decoder self-attention", maps.target_tokens, maps.target_tokens,
       "-decoder-self");
  draw(maps.decoder_cross, "Encoder-decoder attention", maps.source_tokens, maps.target_tokens,
       "-decoder-cross");
}

// ---- train ----

struct TrainArgs {
  std::string preset = "d2l";
  std::string data = ATTN_DEFAULT_CORPUS;
  std::string out = "out/model";
  std::string metrics_json;
  std::int64_t num_hiddens = 32, num_layers = 2, num_heads = 4, ffn_num_hiddens = 64;
  double dropout = 0.1;
  std::int64_t batch_size = 64, num_steps = 10, epochs = 200;
  double lr = 0.005;
  long num_examples = 600;
  double valid_fraction = 0.0;
  bool quiet = false;
};

const std::vector<std::pair<std::string, std::string>> kD2lTests = {
    {"go .", "va !"},
    {"i lost .", "j'ai perdu ."},
    {"he's calm .", "il est calme ."},
    {"i'm home .", "je suis chez moi ."}};

int run_train(const TrainArgs& a, const Context& ctx) {
  ATTN_CHECK(a.preset == "d2l", ValueError, "train: unknown preset '{}' (known: d2l)", a.preset);
  data::NmtOptions dopt;
  dopt.num_steps = a.num_steps;
  dopt.num_examples = a.num_examples;
  dopt.valid_fraction = a.valid_fraction;
  data::NmtData data = data::load_data_nmt(a.data, dopt);
  nn::TransformerConfig c;
  c.src_vocab_size = static_cast<std::int64_t>(data.src_vocab.size());
  c.tgt_vocab_size = static_cast<std::int64_t>(data.tgt_vocab.size());
  c.num_hiddens = a.num_hiddens;
  c.num_layers = a.num_layers;
  c.num_heads = a.num_heads;
  c.ffn_num_hiddens = a.ffn_num_hiddens;
  c.dropout = a.dropout;
  c.max_len = std::max<std::int64_t>(1000, a.num_steps);
  nn::EncoderDecoder net(c);
  seq2seq::xavier_init(net, default_generator());
  io::ensure_directory(a.out);
  fmt::print("train: {} pairs from {} (vocab {} -> {}), {} parameters, {} threads, seed {}\n",
             data.src.array.size(0), a.data, c.src_vocab_size, c.tgt_vocab_size,
             net.num_parameters(), get_num_threads(), ctx.global.seed);
  std::fflush(stdout);

  seq2seq::TrainOptions t;
  t.num_epochs = a.epochs;
  t.lr = a.lr;
  t.batch_size = a.batch_size;
  t.seed = ctx.global.seed;
  const bool tty = isatty(STDERR_FILENO) && !a.quiet;
  const std::int64_t every = std::max<std::int64_t>(1, a.epochs / 10);
  auto on_batch = [&](const seq2seq::Progress& p) {
    if (!tty) return;
    double done =
        (static_cast<double>(p.epoch - 1) + static_cast<double>(p.batch) / p.num_batches) /
        p.num_epochs;
    int width = 28, filled = static_cast<int>(done * width);
    double eta = done > 0 ? p.seconds * (1 - done) / done : NAN;
    fmt::print(stderr, "\r  epoch {:>{}}/{} [{}{}] loss {:.3f}  {:.0f} tok/s  ETA {}   ", p.epoch,
               std::to_string(p.num_epochs).size(), p.num_epochs, std::string(filled, '#'),
               std::string(width - filled, '.'), p.epoch_loss, p.tokens / std::max(p.seconds, 1e-9),
               duration(eta));
  };
  auto on_epoch = [&](const seq2seq::Progress& p) {
    if (tty || a.quiet || (p.epoch % every != 0 && p.epoch != p.num_epochs)) return;
    fmt::print("  epoch {}/{}: loss {:.4f}, {:.0f} tokens/s, {:.1f} s\n", p.epoch, p.num_epochs,
               p.epoch_loss, p.tokens / std::max(p.seconds, 1e-9), p.seconds);
    std::fflush(stdout);
  };
  seq2seq::TrainResult r = seq2seq::train_seq2seq(net, data, t, on_batch, on_epoch);
  if (tty) fmt::print(stderr, "\n");
  fmt::print("loss {:.3f}, {:.1f} tokens/sec, {:.1f} s\n", r.final_loss, r.tokens_per_s, r.seconds);

  seq2seq::ModelConfig mc{c, a.num_steps};
  seq2seq::save_model(a.out, net, mc, data.src_vocab, data.tgt_vocab);

  // d2l's four test sentences.
  std::vector<std::string> eng;
  for (const auto& [e, _] : kD2lTests) eng.push_back(e);
  auto translations =
      seq2seq::translate_greedy(net, data.src_vocab, data.tgt_vocab, eng, a.num_steps);
  nlohmann::ordered_json tr_json = nlohmann::ordered_json::array();
  int exact = 0;
  for (std::size_t i = 0; i < kD2lTests.size(); ++i) {
    double b = seq2seq::bleu(translations[i].text, kD2lTests[i].second, 2);
    exact += translations[i].text == kD2lTests[i].second;
    fmt::print("{} => {}, bleu {:.3f}\n", kD2lTests[i].first, translations[i].text, b);
    tr_json.push_back({{"src", kD2lTests[i].first},
                       {"pred", translations[i].text},
                       {"ref", kD2lTests[i].second},
                       {"bleu", b}});
  }
  fmt::print("{} of {} translated exactly\n", exact, kD2lTests.size());

  // Pictures: the loss curve and every attention map of the last sentence.
  fs::path out(a.out);
  viz::LinePlot loss_plot({.xlabel = "epoch",
                           .ylabel = "loss",
                           .legend = viz::LegendLocation::upper_right,
                           .width = 340,
                           .height = 230});
  std::vector<double> epochs;
  for (std::size_t e = 1; e <= r.epoch_losses.size(); ++e) epochs.push_back(static_cast<double>(e));
  loss_plot.plot("train", epochs, r.epoch_losses, "-");
  loss_plot.save(out / "loss");
  auto maps = seq2seq::attention_maps(net, data.src_vocab, data.tgt_vocab, translations.back(),
                                      a.num_steps);
  save_attention_figures(maps, c.num_heads, (out / "attention").string());

  if (!a.metrics_json.empty()) {
    // Latency of greedy translation of one sentence: the median of 51 runs.
    std::vector<double> ms;
    for (int i = 0; i < 51; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      seq2seq::translate_greedy(net, data.src_vocab, data.tgt_vocab, {"i'm home ."}, a.num_steps);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::nth_element(ms.begin(), ms.begin() + 25, ms.end());
    nlohmann::ordered_json m = {{"final_loss", r.final_loss},     {"tokens_per_s", r.tokens_per_s},
                                {"train_seconds", r.seconds},     {"translate_ms", ms[25]},
                                {"peak_rss_mib", peak_rss_mib()}, {"epoch_losses", r.epoch_losses},
                                {"translations", tr_json}};
    io::write_file_atomic(a.metrics_json, m.dump(2) + "\n");
  }
  fmt::print("model: {}/ (config.json, model.safetensors, src_vocab.txt, tgt_vocab.txt)\n", a.out);
  fmt::print(
      "pictures: {0}/loss.png, {0}/attention-encoder.png, {0}/attention-decoder-self.png, "
      "{0}/attention-decoder-cross.png (and .svg)\n",
      a.out);
  return 0;
}

void setup_train(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* sub = parent.add_subcommand("train",
                                        "Train d2l's Transformer on English-French pairs, "
                                        "translate d2l's test sentences, save the model");
  sub->add_option("--preset", a->preset, "Hyperparameter preset (d2l: the book's 10.7 settings)")
      ->check(CLI::IsMember({"d2l"}));
  sub->add_option("--data", a->data,
                  "Parallel corpus, 'english<TAB>french' per line, plain or gzip")
      ->capture_default_str();
  sub->add_option("--out", a->out, "Model directory to write")->capture_default_str();
  sub->add_option("--epochs", a->epochs, "Passes over the data")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->add_option("--lr", a->lr, "Adam learning rate")
      ->check(CLI::Range(1e-9, 10.0))
      ->capture_default_str();
  sub->add_option("--batch-size", a->batch_size, "Sentence pairs per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--num-steps", a->num_steps, "Tokens per sentence after cutting or padding")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  sub->add_option("--num-examples", a->num_examples,
                  "Lines of the corpus to use (d2l reads this + 1); 0: all")
      ->check(CLI::Range(0L, 100000000L))
      ->capture_default_str();
  sub->add_option("--valid-fraction", a->valid_fraction,
                  "Fraction of pairs held out (from the end)")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  sub->add_option("--num-hiddens", a->num_hiddens, "Model width")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  sub->add_option("--num-layers", a->num_layers, "Encoder and decoder blocks")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  sub->add_option("--num-heads", a->num_heads, "Attention heads (must divide --num-hiddens)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  sub->add_option("--ffn-num-hiddens", a->ffn_num_hiddens, "Hidden width of the position-wise FFN")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--dropout", a->dropout, "Dropout probability")
      ->check(CLI::Range(0.0, 0.99))
      ->capture_default_str();
  sub->add_option("--metrics-json", a->metrics_json,
                  "Write loss, speed, memory and translations as JSON here");
  sub->add_flag("--quiet", a->quiet, "No progress output");
  set_action(sub, ctx, [a](const Context& c) {
    if (a->num_hiddens % a->num_heads != 0)
      throw CLI::ValidationError("--num-heads", fmt::format("{} does not divide --num-hiddens {}",
                                                            a->num_heads, a->num_hiddens));
    return run_train(*a, c);
  });
}
const Registration train_reg{"", "train", 10, setup_train};

// ---- translate ----

struct TranslateArgs {
  std::string model;
  std::vector<std::string> sentences;
};

int run_translate(const TranslateArgs& a) {
  seq2seq::LoadedModel m = seq2seq::load_model(a.model);
  std::vector<std::string> sentences = a.sentences;
  if (sentences.empty()) {
    std::string line;
    while (std::getline(std::cin, line)) sentences.push_back(line);
  }
  for (const auto& s : sentences) data::check_utf8(s, "translate: input");
  auto out =
      seq2seq::translate_greedy(*m.net, m.src_vocab, m.tgt_vocab, sentences, m.config.num_steps);
  for (const auto& t : out) fmt::print("{}\n", t.text);
  return 0;
}

void setup_translate(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<TranslateArgs>();
  CLI::App* sub = parent.add_subcommand(
      "translate",
      "Translate English sentences (arguments, or one per line on stdin) with greedy decoding");
  sub->add_option("--model", a->model, "Model directory written by 'attn train'")->required();
  sub->add_option("sentences", a->sentences, "Sentences to translate; none: read stdin");
  set_action(sub, ctx, [a](const Context&) { return run_translate(*a); });
}
const Registration translate_reg{"", "translate", 11, setup_translate};

// ---- evaluate ----

struct EvaluateArgs {
  std::string model, data;
  long num_examples = 0;
};

int run_evaluate(const EvaluateArgs& a) {
  seq2seq::LoadedModel m = seq2seq::load_model(a.model);
  std::string raw = data::read_text_file(a.data);
  data::check_utf8(raw, a.data);
  data::ParallelCorpus corpus =
      data::tokenize_nmt(data::preprocess_nmt(raw), a.num_examples, a.data);
  ATTN_CHECK(!corpus.source.empty(), IOError, "'{}' holds no sentence pairs", a.data);
  auto src = data::build_array_nmt(corpus.source, m.src_vocab, m.config.num_steps);
  auto tgt = data::build_array_nmt(corpus.target, m.tgt_vocab, m.config.num_steps);
  double loss = seq2seq::evaluate_loss(*m.net, src, tgt, m.tgt_vocab["<bos>"]);
  std::vector<std::string> sentences;
  for (const auto& s : corpus.source) {
    std::string joined;
    for (std::size_t i = 0; i < s.size(); ++i) joined += (i ? " " : "") + s[i];
    sentences.push_back(joined);
  }
  std::vector<data::Tokens> preds, refs;
  const std::size_t chunk = 512;
  for (std::size_t s = 0; s < sentences.size(); s += chunk) {
    std::vector<std::string> part(sentences.begin() + s,
                                  sentences.begin() + std::min(sentences.size(), s + chunk));
    for (auto& t :
         seq2seq::translate_greedy(*m.net, m.src_vocab, m.tgt_vocab, part, m.config.num_steps))
      preds.push_back(t.tokens);
  }
  for (const auto& t : corpus.target) refs.push_back(t);
  double b = seq2seq::corpus_bleu(preds, refs);
  int exact = 0;
  for (std::size_t i = 0; i < preds.size(); ++i) exact += preds[i] == refs[i];
  fmt::print(
      "pairs: {}\nloss: {:.4f} per token (teacher forcing)\ncorpus BLEU-4: {:.4f}\nexact: {} "
      "({:.1f}%)\n",
      preds.size(), loss, b, exact, 100.0 * exact / static_cast<double>(preds.size()));
  return 0;
}

void setup_evaluate(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<EvaluateArgs>();
  CLI::App* sub =
      parent.add_subcommand("evaluate", "Corpus BLEU-4 and loss of a model on a parallel corpus");
  sub->add_option("--model", a->model, "Model directory written by 'attn train'")->required();
  sub->add_option("--data", a->data,
                  "Parallel corpus, 'english<TAB>french' per line, plain or gzip")
      ->required();
  sub->add_option("--num-examples", a->num_examples,
                  "Lines to read (d2l's count: this + 1); 0: all")
      ->check(CLI::Range(0L, 100000000L));
  set_action(sub, ctx, [a](const Context&) { return run_evaluate(*a); });
}
const Registration evaluate_reg{"", "evaluate", 12, setup_evaluate};

// ---- attention ----

struct AttentionArgs {
  std::string model, sentence, out = "out/attention";
};

int run_attention(const AttentionArgs& a) {
  seq2seq::LoadedModel m = seq2seq::load_model(a.model);
  data::check_utf8(a.sentence, "attention: input");
  auto tr =
      seq2seq::translate_greedy(*m.net, m.src_vocab, m.tgt_vocab, {a.sentence}, m.config.num_steps);
  auto maps = seq2seq::attention_maps(*m.net, m.src_vocab, m.tgt_vocab, tr[0], m.config.num_steps);
  fs::path stem(a.out);
  if (stem.has_parent_path()) io::ensure_directory(stem.parent_path());
  save_attention_figures(maps, m.config.transformer.num_heads, a.out);
  fmt::print("{} => {}\n", a.sentence, tr[0].text);
  fmt::print("pictures: {0}-encoder.png, {0}-decoder-self.png, {0}-decoder-cross.png (and .svg)\n",
             a.out);
  return 0;
}

void setup_attention(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<AttentionArgs>();
  CLI::App* sub = parent.add_subcommand(
      "attention", "Translate one sentence and draw every layer's and head's attention weights");
  sub->add_option("--model", a->model, "Model directory written by 'attn train'")->required();
  sub->add_option("sentence", a->sentence, "The English sentence")->required();
  sub->add_option("--out", a->out, "Path stem of the pictures (-encoder.png, ... are appended)")
      ->capture_default_str();
  set_action(sub, ctx, [a](const Context&) { return run_attention(*a); });
}
const Registration attention_reg{"", "attention", 13, setup_attention};

}  // namespace
}  // namespace attn::cli
