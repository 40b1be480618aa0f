// attn train — d2l's Transformer (10.7) trained on English-French pairs.
//
// run_train, in order: what to train (the flags, or a checkpoint to resume),
// the model directory (created, locked, never a trained model replaced
// unasked), the data, the training itself (Ctrl-C stops it after a step),
// and the end-of-run report (d2l's sentences, metrics, pictures).
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "attn/core/rng.h"
#include "attn/core/threads.h"
#include "attn/data/nmt.h"
#include "attn/io/atomic_file.h"
#include "attn/io/dir_lock.h"
#include "attn/io/file_set.h"
#include "attn/io/read_file.h"
#include "attn/nn/init.h"
#include "attn/seq2seq/checkpoint.h"
#include "attn/seq2seq/hparams.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/report.h"
#include "attn/seq2seq/trainer.h"
#include "commands.h"
#include "hparam_flags.h"
#include "rss.h"
#include "signals.h"

#ifndef ATTN_DEFAULT_CORPUS
#define ATTN_DEFAULT_CORPUS "datasets/fra-eng/fra.txt.gz"
#endif

namespace attn::cli {
namespace {

namespace fs = std::filesystem;
using seq2seq::HGroup;
using seq2seq::HParam;
using seq2seq::OnResume;
using seq2seq::RunSpec;

struct TrainArgs {
  std::string preset = "d2l";
  std::string out = "out/model";
  std::string metrics_json;
  std::string resume;
  std::int64_t checkpoint_every = 100;
  bool quiet = false;
  bool overwrite = false;
  HParamFlags hp;
  bool out_given = false;
};

// The defaults: d2l's settings, on the bundled corpus.
RunSpec d2l_preset() {
  RunSpec run;
  run.data.path = ATTN_DEFAULT_CORPUS;
  return run;
}

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  long t = std::lround(s);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
                   : fmt::format("{}:{:02}", t / 60, t % 60);
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

// ---- what to train ----

struct TrainSetup {
  RunSpec run;
  std::optional<seq2seq::Checkpoint> checkpoint;  // when resuming
  std::string out;
};

// The flags that --resume accepts besides agreeing hyperparameters.
std::string may_change_on_resume() {
  std::string list;
  for (const HParam& p : seq2seq::hparams())
    if (p.on_resume == OnResume::may_change && p.flag != seq2seq::HFlag::none)
      list += seq2seq::flag_of(p) + ", ";
  return list + "--checkpoint-every, --metrics-json and --quiet";
}

TrainSetup fresh_setup(const TrainArgs& a, const Context& ctx) {
  ATTN_CHECK(a.preset == "d2l", ValueError, "train: unknown preset '{}' (known: d2l)", a.preset);
  TrainSetup s;
  RunSpec& run = s.run = d2l_preset();
  a.hp.apply(run);
  run.train.seed = ctx.global.seed;
  run.model.transformer.max_len = std::max<std::int64_t>(1000, run.model.num_steps);
  try {
    seq2seq::validate(run);
  } catch (const ValueError& e) {
    throw CLI::ValidationError(e.what());
  }
  s.out = a.out;
  return s;
}

TrainSetup resume_setup(const TrainArgs& a, const Context& ctx) {
  const fs::path dir(a.resume);
  ATTN_CHECK(fs::is_directory(dir), IOError, "cannot resume: model directory '{}' does not exist",
             a.resume);
  const fs::path path = dir / seq2seq::kCheckpointFile;
  ATTN_CHECK(fs::exists(fs::symlink_status(path)), IOError, "cannot resume: '{}' does not exist",
             path.string());
  TrainSetup s;
  s.checkpoint = seq2seq::load_checkpoint(path.string());
  RunSpec& run = s.run = s.checkpoint->run;
  if (a.out_given) {
    std::error_code e1, e2;
    if (fs::weakly_canonical(a.out, e1) != fs::weakly_canonical(dir, e2))
      throw CLI::ValidationError("--out", fmt::format("--out {} is not the directory of --resume "
                                                      "{} (a resumed run writes there)",
                                                      a.out, a.resume));
  }
  // Every hyperparameter given must agree with the checkpoint, but those the
  // table lets a resumed run change.
  for (const HParam& p : seq2seq::hparams()) {
    if (!a.hp.given(p.name) || p.on_resume == OnResume::may_change) continue;
    const seq2seq::HValue given =
        p.flag == seq2seq::HFlag::global ? seq2seq::HValue(ctx.global.seed) : a.hp.value(p);
    const seq2seq::HValue stored = p.get(run);
    if (given != stored)
      throw CLI::ValidationError(
          seq2seq::flag_of(p),
          fmt::format("{} differs from the checkpoint's {}; a resumed run keeps the "
                      "hyperparameters of its checkpoint (only {} may change)",
                      seq2seq::format_hvalue(given), seq2seq::format_hvalue(stored),
                      may_change_on_resume()));
  }
  const seq2seq::TrainState& st = s.checkpoint->state;
  if (a.hp.given("num_epochs")) {
    const std::int64_t begun = st.epoch + (st.batch > 0 ? 1 : 0);
    const auto epochs =
        std::get<std::int64_t>(a.hp.value(seq2seq::hparam(seq2seq::HP::num_epochs)));
    if (epochs < begun)
      throw CLI::ValidationError(
          "--epochs", fmt::format("--epochs {} is fewer than the {} epochs the checkpoint has "
                                  "already begun",
                                  epochs, begun));
    run.train.num_epochs = epochs;
  }
  // Absolute, so that a later --resume works from any directory.
  if (a.hp.given("path"))
    run.data.path =
        fs::absolute(std::get<std::string>(a.hp.value(seq2seq::hparam(seq2seq::HP::path))))
            .lexically_normal()
            .string();
  s.out = a.resume;
  return s;
}

// ---- the model directory ----

// Refuses a directory that holds a model or a checkpoint that this run was
// not asked to replace (--overwrite) or continue (--resume).
void refuse_a_model(const fs::path& dir) {
  std::string found;
  for (const std::string& name :
       {std::string(io::kManifestFile), std::string("config.json"),
        std::string("model.safetensors"), std::string(seq2seq::kCheckpointFile)}) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(dir / name, ec))) found += (found.empty() ? "" : ", ") + name;
  }
  if (!found.empty())
    throw ErrorWithHint(
        fmt::format("train: '{}' already holds a model ({}); it is not replaced unasked",
                    dir.string(), found),
        fmt::format("continue its training with 'attn train --resume {0}', replace it with "
                    "--overwrite, or choose another --out",
                    shell_quote(dir.string())));
}

// What OutputDir will refuse, found before the data is read (which may take
// long), without touching the file system.
void check_output_dir(const fs::path& dir, bool resume, bool overwrite) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  if (!resume && !overwrite) refuse_a_model(dir);
  if (io::directory_locked(dir))
    io::DirectoryLock probe(dir, "attn train");  // throws, naming the holder
}

// The directory a run writes: created if missing, locked for the whole run
// (a second `attn train` into it is refused, naming this process), refused
// as check_output_dir says. If this run created it and fails before its
// first model is saved, the directory is removed again.
class OutputDir {
 public:
  OutputDir(const fs::path& dir, bool resume, bool overwrite) : dir_(dir) {
    std::error_code ec;
    created_ = !fs::exists(fs::symlink_status(dir, ec));
    io::ensure_directory(dir);
    try {
      lock_.emplace(dir, "attn train");
      if (!resume && !overwrite) refuse_a_model(dir_);
      io::recover_file_set(dir);
      remove_stale_temp_files();
    } catch (...) {
      discard();
      throw;
    }
  }
  ~OutputDir() {
    if (!kept_) discard();
  }
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  // The directory now holds a model: it stays whatever happens next.
  void keep() { kept_ = true; }

 private:
  // Temp files that a killed run left (".<name>.tmp.<unique>"): nobody else
  // writes here while the lock is held.
  void remove_stale_temp_files() const {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string::npos &&
          e.is_regular_file(ec))
        fs::remove(e.path(), ec);
    }
  }

  void discard() {
    if (!created_) return;
    std::error_code ec;
    if (lock_) lock_->release_and_remove();
    fs::remove_all(dir_ / io::kPendingDir, ec);
    fs::remove(dir_, ec);  // only if empty: never deletes a file of someone else's
  }

  fs::path dir_;
  bool created_ = false, kept_ = false;
  std::optional<io::DirectoryLock> lock_;
};

// ---- --metrics-json ----

// Checked before training, not after it has run for minutes. Missing
// directories are created when the file is written, as for --out; an
// existing target must be a regular file (a device, a FIFO or a symbolic
// link is never replaced by one).
void check_metrics_target(const std::string& target) {
  const fs::path m(target);
  struct stat st {};
  if (::lstat(m.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw CLI::ValidationError(
        "--metrics-json", fmt::format("'{}' is {}, not a regular file; attn does not replace it",
                                      target, io::file_kind(st.st_mode)));
  std::error_code ec;
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

// ---- training ----

// The model and where training stands: initialized (a fresh run) or restored.
struct Model {
  std::unique_ptr<nn::EncoderDecoder> net;
  std::optional<seq2seq::TrainState> resume;
};

data::NmtData load_data(RunSpec& run, bool fresh, const std::string& checkpoint_path) {
  data::NmtOptions o;
  o.num_steps = run.model.num_steps;
  o.num_examples = run.data.num_examples;
  o.min_freq = run.data.min_freq;
  o.valid_fraction = run.data.valid_fraction;
  data::NmtData data = data::load_data_nmt(run.data.path, o);
  if (fresh) {
    seq2seq::check_training_data(data);
    run.data.path = fs::absolute(run.data.path).lexically_normal().string();
    run.data.num_pairs = data.src.array.size(0);
    run.data.fingerprint = seq2seq::data_fingerprint(data);
    run.model.transformer.src_vocab_size = static_cast<std::int64_t>(data.src_vocab.size());
    run.model.transformer.tgt_vocab_size = static_cast<std::int64_t>(data.tgt_vocab.size());
  } else {
    ATTN_CHECK(seq2seq::data_fingerprint(data) == run.data.fingerprint &&
                   data.src.array.size(0) == run.data.num_pairs,
               IOError,
               "cannot resume: the training pairs read from '{}' differ from those the checkpoint "
               "'{}' was trained on",
               run.data.path, checkpoint_path);
  }
  return data;
}

Model make_model(const TrainSetup& s) {
  Model m;
  m.net = std::make_unique<nn::EncoderDecoder>(s.run.model.transformer);
  if (s.checkpoint)
    m.resume = seq2seq::restore_checkpoint(*s.checkpoint, *m.net);
  else
    nn::xavier_init(*m.net, default_generator());
  return m;
}

void print_start(const TrainSetup& s, const data::NmtData& data, const Model& m,
                 const std::string& checkpoint_path) {
  const RunSpec& run = s.run;
  const std::int64_t num_batches =
      (run.data.num_pairs + run.train.batch_size - 1) / run.train.batch_size;
  if (m.resume) {
    const auto& st = *m.resume;
    if (st.epoch == run.train.num_epochs)
      fmt::print("train: {} is at the end of training (step {}, epoch {}); writing the outputs\n",
                 checkpoint_path, st.step, st.epoch);
    else
      fmt::print("train: resuming {} after step {} of {} (epoch {}/{}, batch {}/{})\n",
                 checkpoint_path, st.step, num_batches * run.train.num_epochs, st.epoch + 1,
                 run.train.num_epochs, st.batch, num_batches);
    if (s.checkpoint->run.threads != run.threads)
      fmt::print(
          "train: note: the checkpoint was written with {} threads, this run has {}; only the "
          "same thread count gives losses bit-identical to a run that never stopped\n",
          s.checkpoint->run.threads, run.threads);
  }
  const auto& c = run.model.transformer;
  fmt::print("train: {} pairs from {} (vocab {} -> {}), {} parameters, {} threads, seed {}\n",
             data.src.array.size(0), run.data.path, c.src_vocab_size, c.tgt_vocab_size,
             m.net->num_parameters(), run.threads, run.train.seed);
  flush_stdout();
}

// The progress bar on a terminal, a line every tenth of the epochs otherwise.
seq2seq::TrainHooks progress_hooks(const TrainArgs& a, std::int64_t num_epochs) {
  seq2seq::TrainHooks hooks;
  const bool tty = isatty(STDERR_FILENO) && !a.quiet;
  const std::int64_t every = std::max<std::int64_t>(1, num_epochs / 10);
  hooks.on_batch = [tty](const seq2seq::Progress& p) {
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
  hooks.on_epoch = [tty, quiet = a.quiet, every](const seq2seq::Progress& p) {
    if (tty || quiet || (p.epoch % every != 0 && p.epoch != p.num_epochs)) return;
    fmt::print("  epoch {}/{}: loss {:.4f}, {:.0f} tokens/s, {:.1f} s\n", p.epoch, p.num_epochs,
               p.epoch_loss, p.tokens / std::max(p.seconds, 1e-9), p.seconds);
    flush_stdout();
  };
  hooks.checkpoint_every = a.checkpoint_every;
  return hooks;
}

// ---- the report ----

void write_metrics(const std::string& target, const seq2seq::TrainResult& r,
                   const std::vector<seq2seq::ScoredTranslation>& scored, double translate_ms) {
  nlohmann::ordered_json tr = nlohmann::ordered_json::array();
  for (const auto& t : scored)
    tr.push_back(
        {{"src", t.source}, {"pred", t.prediction}, {"ref", t.reference}, {"bleu", t.bleu}});
  nlohmann::ordered_json m = {{"final_loss", r.final_loss},     {"tokens_per_s", r.tokens_per_s},
                              {"train_seconds", r.seconds},     {"translate_ms", translate_ms},
                              {"peak_rss_mib", peak_rss_mib()}, {"steps", r.steps},
                              {"epoch_losses", r.epoch_losses}, {"translations", tr}};
  const fs::path path(target);
  if (path.has_parent_path()) io::ensure_directory(path.parent_path());
  io::write_file_atomic(path, m.dump(2) + "\n");
}

int report(const TrainArgs& a, const TrainSetup& s, const data::NmtData& data, Model& m,
           const seq2seq::TrainResult& r) {
  nn::EncoderDecoder& net = *m.net;
  const std::int64_t num_steps = s.run.model.num_steps;
  fmt::print("loss {:.3f}, {:.1f} tokens/sec, {:.1f} s\n", r.final_loss, r.tokens_per_s, r.seconds);
  auto scored = seq2seq::translate_and_score(net, data.src_vocab, data.tgt_vocab,
                                             seq2seq::d2l_test_pairs(), num_steps);
  int exact = 0;
  for (const auto& t : scored) {
    fmt::print("{} => {}, bleu {:.3f}\n", t.source, t.prediction, t.bleu);
    exact += t.prediction == t.reference;
  }
  fmt::print("{} of {} translated exactly\n", exact, scored.size());
  flush_stdout();
  // The metrics first: a picture that fails must not cost them.
  if (!a.metrics_json.empty()) {
    const double ms = seq2seq::median_ms(
        [&] {
          seq2seq::translate_greedy(net, data.src_vocab, data.tgt_vocab, {"i'm home ."}, num_steps);
        },
        51);
    write_metrics(a.metrics_json, r, scored, ms);
  }
  const fs::path out(s.out);
  seq2seq::save_loss_plot(r.epoch_losses, (out / "loss").string());
  auto last = seq2seq::translate_greedy(net, data.src_vocab, data.tgt_vocab,
                                        {seq2seq::d2l_test_pairs().back().first}, num_steps);
  auto maps = seq2seq::attention_maps(net, data.src_vocab, data.tgt_vocab, last[0], num_steps);
  seq2seq::save_attention_figures(maps, s.run.model.transformer.num_heads,
                                  (out / "attention").string());
  fmt::print(
      "model: {}/ (config.json, model.safetensors, src_vocab.txt, tgt_vocab.txt, "
      "manifest.json, checkpoint.safetensors)\n",
      s.out);
  fmt::print(
      "pictures: {0}/loss.png, {0}/attention-encoder.png, {0}/attention-decoder-self.png, "
      "{0}/attention-decoder-cross.png (and .svg)\n",
      s.out);
  return 0;
}

int run_train(const TrainArgs& a, const Context& ctx) {
  TrainSetup s = a.resume.empty() ? fresh_setup(a, ctx) : resume_setup(a, ctx);
  RunSpec& run = s.run;
  run.threads = get_num_threads();
  // The output directory is checked before the data is read and created
  // after: a corpus that fails (or a signal while it is read) leaves nothing.
  check_output_dir(s.out, !a.resume.empty(), a.overwrite);
  const std::string checkpoint_path = (fs::path(s.out) / seq2seq::kCheckpointFile).string();
  data::NmtData data = load_data(run, !s.checkpoint, checkpoint_path);
  OutputDir dir(s.out, !a.resume.empty(), a.overwrite);
  Model m = make_model(s);
  print_start(s, data, m, checkpoint_path);
  // The model directory holds a loadable model before the first step.
  seq2seq::save_model(s.out, *m.net, run.model, data.src_vocab, data.tgt_vocab);
  dir.keep();

  seq2seq::TrainHooks hooks = progress_hooks(a, run.train.num_epochs);
  hooks.on_checkpoint = [&](const seq2seq::TrainState& st) {
    seq2seq::save_checkpoint(checkpoint_path, *m.net, run, st);
  };
  hooks.should_stop = [] { return stop_signal() != 0; };
  // From here to the end of training a signal asks to stop after the step in
  // progress; before (reading the data) and after (the outputs) it ends the
  // process at once: the last checkpoint and the model are whole either way.
  std::optional<StopScope> stoppable(std::in_place);
  seq2seq::TrainResult r =
      seq2seq::train_seq2seq(*m.net, data, run.train, hooks, m.resume ? &*m.resume : nullptr);
  if (isatty(STDERR_FILENO) && !a.quiet) fmt::print(stderr, "\n");
  if (r.stopped) {
    const int sig = stop_signal();
    seq2seq::save_model(s.out, *m.net, run.model, data.src_vocab, data.tgt_vocab);
    flush_stdout();
    const std::int64_t num_batches =
        (run.data.num_pairs + run.train.batch_size - 1) / run.train.batch_size;
    fmt::print(stderr,
               "attn: {} after step {} of {}; checkpoint saved in {}; resume with: attn train "
               "--resume {}\n",
               sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)", r.steps,
               num_batches * run.train.num_epochs, checkpoint_path, shell_quote(s.out));
    return 128 + sig;
  }
  stoppable.reset();
  seq2seq::save_model(s.out, *m.net, run.model, data.src_vocab, data.tgt_vocab);
  return report(a, s, data, m, r);
}

constexpr const char* kTrainFooter =
    "The model directory (--out): config.json, model.safetensors, src_vocab.txt,\n"
    "tgt_vocab.txt and manifest.json (their sizes and SHA-256), written as one unit:\n"
    "a reader sees the old model or the new one, never a mix. A directory that\n"
    "already holds a model is not replaced unless --overwrite is given, and a\n"
    "directory being trained into is locked: a second 'attn train' there is refused.\n"
    "\n"
    "Checkpoints: OUT/checkpoint.safetensors holds the model, Adam's state, the step,\n"
    "epoch and batch, the random-number state, the losses so far and every\n"
    "hyperparameter, with a SHA-256 of its content. It is written before the first\n"
    "step, every --checkpoint-every steps and at the end, each time atomically: a\n"
    "crash at any moment leaves the previous checkpoint whole.\n"
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
    "143 (SIGTERM). A second signal exits at once; the last checkpoint stays whole.\n"
    "Before training starts (reading the data) and after it ends, a signal ends attn\n"
    "at once.";

void setup_train(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* sub = parent.add_subcommand("train",
                                        "Train d2l's Transformer on English-French pairs, "
                                        "translate d2l's test sentences, save the model");
  sub->footer(kTrainFooter);
  sub->add_option("--preset", a->preset, "Hyperparameter preset (d2l: the book's 10.7 settings)")
      ->check(CLI::IsMember({"d2l"}));
  sub->add_option("--out", a->out, "Model directory to write")->capture_default_str();
  sub->add_flag("--overwrite", a->overwrite,
                "Replace the model (and checkpoint) that --out already holds");
  sub->add_option("--resume", a->resume,
                  "Continue the training whose checkpoint is in this model directory")
      ->option_text("DIR");
  sub->add_option("--checkpoint-every", a->checkpoint_every,
                  "Write a checkpoint every N optimizer steps (0: only at the start, the end "
                  "and on Ctrl-C)")
      ->check(in_range(std::int64_t{0}, std::int64_t{1'000'000'000}))
      ->capture_default_str();
  a->hp.add_to(sub, d2l_preset());
  sub->add_option("--metrics-json", a->metrics_json,
                  "Write loss, speed, memory and translations as JSON here");
  sub->add_flag("--quiet", a->quiet, "No progress output");
  set_action(sub, ctx, [a, sub, &parent](const Context& c) {
    a->hp.collect(sub, &parent);
    a->out_given = sub->get_option("--out")->count() > 0;
    if (sub->get_option("--resume")->count() > 0 && a->resume.empty())
      throw CLI::ValidationError("--resume", "needs a model directory");
    if (a->overwrite && !a->resume.empty())
      throw CLI::ValidationError("--overwrite",
                                 "--resume continues the model it names; --overwrite would "
                                 "replace it: give one of them");
    if (!a->metrics_json.empty()) check_metrics_target(a->metrics_json);
    return run_train(*a, c);
  });
}

const Registration train_reg{"", "train", 10, setup_train};

}  // namespace
}  // namespace attn::cli
