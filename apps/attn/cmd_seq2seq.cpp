// attn train / translate / evaluate / attention — the Transformer on fra-eng (d2l 10.7).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "attn/attn.h"
#include "attn/data/nmt.h"
#include "attn/io/atomic_file.h"
#include "attn/seq2seq/bleu.h"
#include "attn/seq2seq/checkpoint.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translate.h"
#include "attn/viz/heatmap.h"
#include "attn/viz/line_plot.h"
#include "commands.h"
#include "rss.h"
#include "signals.h"

#ifndef ATTN_DEFAULT_CORPUS
#define ATTN_DEFAULT_CORPUS "datasets/fra-eng/fra.txt.gz"
#endif

namespace attn::cli {
namespace {

namespace fs = std::filesystem;

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
  std::string resume;
  std::int64_t num_hiddens = 32, num_layers = 2, num_heads = 4, ffn_num_hiddens = 64;
  double dropout = 0.1;
  std::int64_t batch_size = 64, num_steps = 10, epochs = 200;
  double lr = 0.005;
  long num_examples = 600;
  double valid_fraction = 0.0;
  std::int64_t checkpoint_every = 100;
  bool quiet = false;
  // Filled in when the action runs: the options given on the command line
  // ("--lr", ..., and "--seed" from the global options).
  std::set<std::string> given;
};

const std::vector<std::pair<std::string, std::string>> kD2lTests = {
    {"go .", "va !"},
    {"i lost .", "j'ai perdu ."},
    {"he's calm .", "il est calme ."},
    {"i'm home .", "je suis chez moi ."}};

// Files that train writes into the model directory; a crash can leave their
// temp files (".<name>.tmp.<unique>") behind, which the next run removes.
const std::vector<std::string> kTrainOutputs = {seq2seq::kCheckpointFile,
                                                "model.safetensors",
                                                "config.json",
                                                "src_vocab.txt",
                                                "tgt_vocab.txt",
                                                "loss.png",
                                                "loss.svg",
                                                "attention-encoder.png",
                                                "attention-encoder.svg",
                                                "attention-decoder-self.png",
                                                "attention-decoder-self.svg",
                                                "attention-decoder-cross.png",
                                                "attention-decoder-cross.svg"};

void remove_stale_temp_files(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    for (const auto& out : kTrainOutputs) {
      std::string prefix = "." + out + ".tmp.";
      if (name.compare(0, prefix.size(), prefix) == 0 && e.is_regular_file(ec)) {
        fs::remove(e.path(), ec);
        break;
      }
    }
  }
}

// `s` as one word for a POSIX shell.
std::string shell_quote(const std::string& s) {
  bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("/._-+,:@%", ch);
  });
  if (plain) return s;
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// A hyperparameter flag given with --resume must agree with the checkpoint.
template <class T>
void check_agrees(const TrainArgs& a, const char* flag, const T& given, const T& stored) {
  if (a.given.count(flag) && !(given == stored))
    throw CLI::ValidationError(
        flag, fmt::format("{} differs from the checkpoint's {}; a resumed run keeps the "
                          "hyperparameters of its checkpoint (only --data, --epochs, "
                          "--checkpoint-every, --metrics-json and --quiet may change)",
                          given, stored));
}

// What a run trains: from the flags (a fresh run) or from a checkpoint.
struct TrainSetup {
  seq2seq::RunSpec run;
  data::NmtData data;
  std::unique_ptr<nn::EncoderDecoder> net;
  std::optional<seq2seq::TrainState> resume;
  int resume_threads = 0;  // the thread count of the run that wrote the checkpoint
  std::string out;
};

data::NmtOptions nmt_options(const seq2seq::RunSpec& run) {
  data::NmtOptions o;
  o.num_steps = run.model.num_steps;
  o.num_examples = run.data.num_examples;
  o.min_freq = run.data.min_freq;
  o.valid_fraction = run.data.valid_fraction;
  return o;
}

TrainSetup fresh_setup(const TrainArgs& a, const Context& ctx) {
  ATTN_CHECK(a.preset == "d2l", ValueError, "train: unknown preset '{}' (known: d2l)", a.preset);
  TrainSetup s;
  seq2seq::RunSpec& run = s.run;
  run.data.path = a.data;
  run.data.num_examples = a.num_examples;
  run.data.valid_fraction = a.valid_fraction;
  run.model.num_steps = a.num_steps;
  s.data = data::load_data_nmt(a.data, nmt_options(run));
  seq2seq::check_training_data(s.data);  // before anything is written
  run.data.min_freq = nmt_options(run).min_freq;
  // Absolute, so that --resume works from any directory.
  run.data.path = fs::absolute(a.data).lexically_normal().string();
  run.data.num_pairs = s.data.src.array.size(0);
  run.data.fingerprint = seq2seq::data_fingerprint(s.data);
  nn::TransformerConfig& c = run.model.transformer;
  c.src_vocab_size = static_cast<std::int64_t>(s.data.src_vocab.size());
  c.tgt_vocab_size = static_cast<std::int64_t>(s.data.tgt_vocab.size());
  c.num_hiddens = a.num_hiddens;
  c.num_layers = a.num_layers;
  c.num_heads = a.num_heads;
  c.ffn_num_hiddens = a.ffn_num_hiddens;
  c.dropout = a.dropout;
  c.max_len = std::max<std::int64_t>(1000, a.num_steps);
  run.train.num_epochs = a.epochs;
  run.train.lr = a.lr;
  run.train.batch_size = a.batch_size;
  run.train.seed = ctx.global.seed;
  s.net = std::make_unique<nn::EncoderDecoder>(c);
  seq2seq::xavier_init(*s.net, default_generator());
  s.out = a.out;
  return s;
}

TrainSetup resume_setup(const TrainArgs& a, const Context& ctx) {
  fs::path dir(a.resume);
  ATTN_CHECK(fs::is_directory(dir), IOError, "cannot resume: model directory '{}' does not exist",
             a.resume);
  fs::path path = dir / seq2seq::kCheckpointFile;
  ATTN_CHECK(fs::exists(path), IOError, "cannot resume: '{}' does not exist", path.string());
  seq2seq::Checkpoint ck = seq2seq::load_checkpoint(path.string());
  seq2seq::RunSpec& run = ck.run;
  const nn::TransformerConfig& c = run.model.transformer;
  if (a.given.count("--out")) {
    std::error_code e1, e2;
    if (fs::weakly_canonical(a.out, e1) != fs::weakly_canonical(dir, e2))
      throw CLI::ValidationError("--out", fmt::format("--out {} is not the directory of --resume "
                                                      "{} (a resumed run writes there)",
                                                      a.out, a.resume));
  }
  check_agrees(a, "--seed", ctx.global.seed, run.train.seed);
  check_agrees(a, "--lr", a.lr, run.train.lr);
  check_agrees(a, "--batch-size", a.batch_size, run.train.batch_size);
  check_agrees(a, "--num-steps", a.num_steps, run.model.num_steps);
  check_agrees(a, "--num-examples", a.num_examples, run.data.num_examples);
  check_agrees(a, "--valid-fraction", a.valid_fraction, run.data.valid_fraction);
  check_agrees(a, "--num-hiddens", a.num_hiddens, c.num_hiddens);
  check_agrees(a, "--num-layers", a.num_layers, c.num_layers);
  check_agrees(a, "--num-heads", a.num_heads, c.num_heads);
  check_agrees(a, "--ffn-num-hiddens", a.ffn_num_hiddens, c.ffn_num_hiddens);
  check_agrees(a, "--dropout", a.dropout, c.dropout);
  if (a.given.count("--epochs")) {
    if (a.epochs < ck.state.epoch + (ck.state.batch > 0 ? 1 : 0))
      throw CLI::ValidationError(
          "--epochs", fmt::format("--epochs {} is fewer than the {} epochs the checkpoint has "
                                  "already begun",
                                  a.epochs, ck.state.epoch + (ck.state.batch > 0 ? 1 : 0)));
    run.train.num_epochs = a.epochs;
  }
  if (a.given.count("--data")) run.data.path = a.data;

  TrainSetup s;
  s.data = data::load_data_nmt(run.data.path, nmt_options(run));
  ATTN_CHECK(seq2seq::data_fingerprint(s.data) == run.data.fingerprint &&
                 s.data.src.array.size(0) == run.data.num_pairs,
             IOError,
             "cannot resume: the training pairs read from '{}' differ from those the checkpoint "
             "'{}' was trained on",
             run.data.path, path.string());
  s.net = std::make_unique<nn::EncoderDecoder>(c);
  s.resume = seq2seq::restore_checkpoint(ck, *s.net);
  s.run = run;
  s.resume_threads = run.threads;
  s.out = a.resume;
  return s;
}

int run_train(const TrainArgs& a, const Context& ctx) {
  TrainSetup s = a.resume.empty() ? fresh_setup(a, ctx) : resume_setup(a, ctx);
  seq2seq::RunSpec& run = s.run;
  run.threads = get_num_threads();
  const nn::TransformerConfig& c = run.model.transformer;
  nn::EncoderDecoder& net = *s.net;
  data::NmtData& data = s.data;
  const fs::path out(s.out);
  const std::string checkpoint_path = (out / seq2seq::kCheckpointFile).string();
  io::ensure_directory(out);
  remove_stale_temp_files(out);

  const std::int64_t num_batches =
      (run.data.num_pairs + run.train.batch_size - 1) / run.train.batch_size;
  if (s.resume) {
    const auto& st = *s.resume;
    if (st.epoch == run.train.num_epochs)
      fmt::print("train: {} is at the end of training (step {}, epoch {}); writing the outputs\n",
                 checkpoint_path, st.step, st.epoch);
    else
      fmt::print("train: resuming {} after step {} of {} (epoch {}/{}, batch {}/{})\n",
                 checkpoint_path, st.step, num_batches * run.train.num_epochs, st.epoch + 1,
                 run.train.num_epochs, st.batch, num_batches);
    if (s.resume_threads != run.threads)
      fmt::print(
          "train: note: the checkpoint was written with {} threads, this run has {}; only the "
          "same thread count gives losses bit-identical to a run that never stopped\n",
          s.resume_threads, run.threads);
  }
  fmt::print("train: {} pairs from {} (vocab {} -> {}), {} parameters, {} threads, seed {}\n",
             data.src.array.size(0), run.data.path, c.src_vocab_size, c.tgt_vocab_size,
             net.num_parameters(), run.threads, run.train.seed);
  flush_stdout();
  // The model directory is complete (config, vocabularies, weights) before the
  // first checkpoint, and always holds a loadable model.
  seq2seq::save_model(s.out, net, run.model, data.src_vocab, data.tgt_vocab);

  const bool tty = isatty(STDERR_FILENO) && !a.quiet;
  const std::int64_t every = std::max<std::int64_t>(1, run.train.num_epochs / 10);
  seq2seq::TrainHooks hooks;
  hooks.on_batch = [&](const seq2seq::Progress& p) {
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
  hooks.on_epoch = [&](const seq2seq::Progress& p) {
    if (tty || a.quiet || (p.epoch % every != 0 && p.epoch != p.num_epochs)) return;
    fmt::print("  epoch {}/{}: loss {:.4f}, {:.0f} tokens/s, {:.1f} s\n", p.epoch, p.num_epochs,
               p.epoch_loss, p.tokens / std::max(p.seconds, 1e-9), p.seconds);
    flush_stdout();
  };
  hooks.checkpoint_every = a.checkpoint_every;
  hooks.on_checkpoint = [&](const seq2seq::TrainState& st) {
    seq2seq::save_checkpoint(checkpoint_path, net, run, st);
  };
  hooks.should_stop = [] { return stop_signal() != 0; };
  // From here to the end of training a signal asks to stop after the step in
  // progress; before (reading the data) and after (the outputs) it ends the
  // process at once: the last checkpoint is whole either way.
  std::optional<StopScope> stoppable(std::in_place);
  seq2seq::TrainResult r =
      seq2seq::train_seq2seq(net, data, run.train, hooks, s.resume ? &*s.resume : nullptr);
  if (!r.stopped) stoppable.reset();
  if (tty) fmt::print(stderr, "\n");
  if (r.stopped) {
    const int sig = stop_signal();
    seq2seq::save_model(s.out, net, run.model, data.src_vocab, data.tgt_vocab);
    flush_stdout();
    fmt::print(stderr,
               "attn: {} after step {} of {}; checkpoint saved in {}; resume with: attn train "
               "--resume {}\n",
               sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)", r.steps,
               num_batches * run.train.num_epochs, checkpoint_path, shell_quote(s.out));
    return 128 + sig;
  }
  fmt::print("loss {:.3f}, {:.1f} tokens/sec, {:.1f} s\n", r.final_loss, r.tokens_per_s, r.seconds);

  seq2seq::save_model(s.out, net, run.model, data.src_vocab, data.tgt_vocab);
  const std::int64_t num_steps = run.model.num_steps;

  // d2l's four test sentences.
  std::vector<std::string> eng;
  for (const auto& [e, _] : kD2lTests) eng.push_back(e);
  auto translations =
      seq2seq::translate_greedy(net, data.src_vocab, data.tgt_vocab, eng, num_steps);
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
  viz::LinePlot loss_plot({.xlabel = "epoch",
                           .ylabel = "loss",
                           .legend = viz::LegendLocation::upper_right,
                           .width = 340,
                           .height = 230});
  std::vector<double> epochs;
  for (std::size_t e = 1; e <= r.epoch_losses.size(); ++e) epochs.push_back(static_cast<double>(e));
  loss_plot.plot("train", epochs, r.epoch_losses, "-");
  loss_plot.save(out / "loss");
  auto maps =
      seq2seq::attention_maps(net, data.src_vocab, data.tgt_vocab, translations.back(), num_steps);
  save_attention_figures(maps, c.num_heads, (out / "attention").string());

  if (!a.metrics_json.empty()) {
    // Latency of greedy translation of one sentence: the median of 51 runs.
    std::vector<double> ms;
    for (int i = 0; i < 51; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      seq2seq::translate_greedy(net, data.src_vocab, data.tgt_vocab, {"i'm home ."}, num_steps);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::nth_element(ms.begin(), ms.begin() + 25, ms.end());
    nlohmann::ordered_json m = {{"final_loss", r.final_loss},     {"tokens_per_s", r.tokens_per_s},
                                {"train_seconds", r.seconds},     {"translate_ms", ms[25]},
                                {"peak_rss_mib", peak_rss_mib()}, {"steps", r.steps},
                                {"epoch_losses", r.epoch_losses}, {"translations", tr_json}};
    const fs::path mpath(a.metrics_json);
    if (mpath.has_parent_path()) io::ensure_directory(mpath.parent_path());
    io::write_file_atomic(a.metrics_json, m.dump(2) + "\n");
  }
  fmt::print(
      "model: {}/ (config.json, model.safetensors, src_vocab.txt, tgt_vocab.txt, "
      "checkpoint.safetensors)\n",
      s.out);
  fmt::print(
      "pictures: {0}/loss.png, {0}/attention-encoder.png, {0}/attention-decoder-self.png, "
      "{0}/attention-decoder-cross.png (and .svg)\n",
      s.out);
  return 0;
}

constexpr const char* kTrainFooter =
    "Checkpoints: OUT/checkpoint.safetensors holds the model, Adam's state, the step,\n"
    "epoch and batch, the random-number state, the losses so far and every\n"
    "hyperparameter. It is written before the first step, every --checkpoint-every\n"
    "steps and at the end, each time atomically: a crash at any moment leaves the\n"
    "previous checkpoint whole.\n"
    "\n"
    "Resume: 'attn train --resume DIR' continues from DIR's checkpoint with its\n"
    "hyperparameters and seed and ends as a run that never stopped would (with the\n"
    "same --threads, bit-identical losses and model). With --resume these may be\n"
    "given: --data (the same corpus elsewhere; it is checked), --epochs (to train\n"
    "longer), --checkpoint-every, --metrics-json, --quiet; any other hyperparameter\n"
    "flag must agree with the checkpoint.\n"
    "\n"
    "Ctrl-C (SIGINT) or SIGTERM: training finishes the step in progress, writes a\n"
    "checkpoint and the model, prints how to resume and exits with 130 (SIGINT) or\n"
    "143 (SIGTERM). A second signal exits at once; the last checkpoint stays whole.";

void setup_train(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* sub = parent.add_subcommand("train",
                                        "Train d2l's Transformer on English-French pairs, "
                                        "translate d2l's test sentences, save the model");
  sub->footer(kTrainFooter);
  sub->add_option("--preset", a->preset, "Hyperparameter preset (d2l: the book's 10.7 settings)")
      ->check(CLI::IsMember({"d2l"}));
  sub->add_option("--data", a->data,
                  "Parallel corpus, 'english<TAB>french' per line, plain or gzip")
      ->capture_default_str();
  sub->add_option("--out", a->out, "Model directory to write")->capture_default_str();
  sub->add_option("--resume", a->resume,
                  "Continue the training whose checkpoint is in this model directory")
      ->option_text("DIR");
  sub->add_option("--checkpoint-every", a->checkpoint_every,
                  "Write a checkpoint every N optimizer steps (0: only at the start, the end "
                  "and on Ctrl-C)")
      ->check(in_range(std::int64_t{0}, std::int64_t{1'000'000'000}))
      ->capture_default_str();
  sub->add_option("--epochs", a->epochs, "Passes over the data")
      ->check(in_range(1, 1000000))
      ->capture_default_str();
  sub->add_option("--lr", a->lr, "Adam learning rate")
      ->check(in_range(1e-9, 10.0))
      ->capture_default_str();
  sub->add_option("--batch-size", a->batch_size, "Sentence pairs per step")
      ->check(in_range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--num-steps", a->num_steps, "Tokens per sentence after cutting or padding")
      ->check(in_range(2, 4096))
      ->capture_default_str();
  sub->add_option("--num-examples", a->num_examples,
                  "Lines of the corpus to use (d2l reads this + 1); 0: all")
      ->check(in_range(0L, 100000000L))
      ->capture_default_str();
  sub->add_option("--valid-fraction", a->valid_fraction,
                  "Fraction of pairs held out (from the end)")
      ->check(in_range(0.0, 0.9))
      ->capture_default_str();
  sub->add_option("--num-hiddens", a->num_hiddens, "Model width")
      ->check(in_range(1, 1 << 16))
      ->capture_default_str();
  sub->add_option("--num-layers", a->num_layers, "Encoder and decoder blocks")
      ->check(in_range(1, 64))
      ->capture_default_str();
  sub->add_option("--num-heads", a->num_heads, "Attention heads (must divide --num-hiddens)")
      ->check(in_range(1, 1024))
      ->capture_default_str();
  sub->add_option("--ffn-num-hiddens", a->ffn_num_hiddens, "Hidden width of the position-wise FFN")
      ->check(in_range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--dropout", a->dropout, "Dropout probability")
      ->check(in_range(0.0, 0.99))
      ->capture_default_str();
  sub->add_option("--metrics-json", a->metrics_json,
                  "Write loss, speed, memory and translations as JSON here");
  sub->add_flag("--quiet", a->quiet, "No progress output");
  const CLI::Option* seed = parent.get_option_no_throw("--seed");
  set_action(sub, ctx, [a, sub, seed](const Context& c) {
    a->given.clear();
    for (const CLI::Option* o : sub->get_options())
      if (o->count() > 0) a->given.insert(o->get_name());
    if (seed && seed->count() > 0) a->given.insert("--seed");
    if (a->given.count("--resume") && a->resume.empty())
      throw CLI::ValidationError("--resume", "needs a model directory");
    if (!a->metrics_json.empty()) {
      // Found before training, not after it has run for minutes. Missing
      // directories are created when the file is written, as for --out.
      const fs::path m(a->metrics_json);
      std::error_code ec;
      if (fs::is_directory(m, ec))
        throw CLI::ValidationError("--metrics-json",
                                   fmt::format("'{}' is a directory, not a file", m.string()));
      fs::path dir = m.has_parent_path() ? m.parent_path() : fs::path(".");
      while (!fs::exists(dir, ec) && dir.has_parent_path() && dir.parent_path() != dir)
        dir = dir.parent_path();
      if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
        throw CLI::ValidationError("--metrics-json",
                                   fmt::format("'{}' is not a directory", dir.string()));
      if (fs::is_directory(dir, ec) && ::access(dir.c_str(), W_OK) != 0)
        throw CLI::ValidationError("--metrics-json",
                                   fmt::format("directory '{}' is not writable", dir.string()));
    }
    if (a->resume.empty() && a->num_hiddens % a->num_heads != 0)
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
  auto translate = [&](const std::vector<std::string>& sentences) {
    for (const auto& t :
         seq2seq::translate_greedy(*m.net, m.src_vocab, m.tgt_vocab, sentences, m.config.num_steps))
      fmt::print("{}\n", t.text);
    flush_stdout();
  };
  if (!a.sentences.empty()) {
    for (const auto& s : a.sentences) data::check_utf8(s, "translate: input");
    translate(a.sentences);
    return 0;
  }
  // stdin: translated in batches as it comes, so that a long stream needs
  // bounded memory and a pipe sees output before its end.
  constexpr std::size_t kBatch = 256;
  std::vector<std::string> batch;
  std::string line;
  std::size_t n = 0;
  while (std::getline(std::cin, line)) {
    ++n;
    ATTN_CHECK(line.size() <= data::kMaxLineBytes, IOError,
               "translate: line {} of stdin is {} bytes long (at most {})", n, line.size(),
               data::kMaxLineBytes);
    data::check_utf8(line, "translate: stdin", n);
    batch.push_back(std::move(line));
    if (batch.size() == kBatch) {
      translate(batch);
      batch.clear();
    }
  }
  if (!batch.empty()) translate(batch);
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
  data::ParallelCorpus corpus = data::read_parallel_corpus(a.data, a.num_examples);
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
      ->check(in_range(0L, 100000000L));
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
