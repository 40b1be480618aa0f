// attn train — d2l's Transformer (10.7), or a translator of the whole corpus.
//
// run_train, in order: what to train (a preset, a --config file and the
// flags, or a checkpoint to resume), the model directory (checked, then
// created and locked), the data (d2l's pipeline, or a translator's:
// data/corpus.h split, a SentencePiece tokenizer, token batches), the model,
// the training itself (Ctrl-C stops it after a step; validations keep the
// best model), and the end-of-run report (translations, metrics, pictures).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "attn/core/rng.h"
#include "attn/core/threads.h"
#include "attn/data/nmt.h"
#include "attn/io/atomic_file.h"
#include "attn/io/file_set.h"
#include "attn/io/json.h"
#include "attn/io/read_file.h"
#include "attn/nn/init.h"
#include "attn/ops/precision.h"
#include "attn/seq2seq/checkpoint.h"
#include "attn/seq2seq/hparams.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/report.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translation_data.h"
#include "attn/seq2seq/translator.h"
#include "commands.h"
#include "hparam_flags.h"
#include "mpi_comm.h"
#include "paths.h"
#include "precision_flag.h"
#include "rss.h"
#include "signals.h"
#include "train_log.h"
#include "train_output.h"
#include "train_setup.h"

namespace attn::cli {
namespace {

namespace fs = std::filesystem;
using seq2seq::RunSpec;

// ---- the data ----

using seq2seq::RunData;

// The data of a run (seq2seq::load_run_data). Resumed, the tokenizer is the
// one the model directory holds and the pairs must be those the checkpoint
// was trained on. Under mpirun, process 0 trains a fresh run's SentencePiece
// model and the others take it from there.
std::unique_ptr<RunData> load_data(RunSpec& run, const TrainSetup& s, optim::Communicator* comm) {
  const bool fresh = !s.checkpoint;
  const bool spm =
      run.model.tokenizer == seq2seq::TokenizerKind::spm && seq2seq::uses_translation_data(run);
  if (!fresh) {
    std::optional<std::string> model;
    if (spm)
      model = io::FileSet(s.out, seq2seq::kModelKind)
                  .file(seq2seq::kSpmFile)
                  .read_all(seq2seq::kMaxSpmBytes);
    auto d = seq2seq::load_run_data(run, false, model ? &*model : nullptr);
    ATTN_CHECK(d->fingerprint == run.data.fingerprint, IOError,
               "cannot resume: the training pairs read from '{}' differ from those the checkpoint "
               "'{}' was trained on",
               run.data.path, (fs::path(s.out) / seq2seq::kCheckpointFile).string());
    return d;
  }
  if (!comm || !spm) return seq2seq::load_run_data(run, true);
  std::string bytes;
  std::unique_ptr<RunData> d;
  if (comm->rank() == 0) {
    d = seq2seq::load_run_data(run, true);
    bytes = d->tr->spm_model;
  }
  comm->broadcast(bytes, 0);
  if (comm->rank() != 0) d = seq2seq::load_run_data(run, true, &bytes);
  return d;
}

// ---- the model ----

struct Model {
  std::shared_ptr<nn::Seq2SeqModel> net;
  std::optional<seq2seq::TrainState> resume;
};

Model make_model(const TrainSetup& s) {
  Model m;
  m.net = seq2seq::make_model(s.run.model);
  if (s.checkpoint)
    m.resume = seq2seq::restore_checkpoint(*s.checkpoint, *m.net);
  else {
    seq2seq::initialize_model(*m.net, s.run.model, s.run.train.embedding_init, default_generator());
  }
  return m;
}

void print_start(const TrainSetup& s, const RunData& d, const Model& m, TrainLog& log) {
  const RunSpec& run = s.run;
  const std::int64_t num_batches = d.batches->num_batches();
  const std::string ckpt = (fs::path(s.out) / seq2seq::kCheckpointFile).string();
  if (m.resume) {
    const auto& st = *m.resume;
    if (st.epoch == run.train.num_epochs)
      log.line(
          fmt::format("train: {} is at the end of training (step {}, epoch {}); writing the "
                      "outputs",
                      ckpt, st.step, st.epoch));
    else
      log.line(fmt::format("train: resuming {} after step {} of {} (epoch {}/{}, batch {}/{})",
                           ckpt, st.step, num_batches * run.train.num_epochs, st.epoch + 1,
                           run.train.num_epochs, st.batch, num_batches));
    if (s.checkpoint->run.threads != run.threads)
      log.line(
          fmt::format("train: note: the checkpoint was written with {}, this run has {}; only the "
                      "same thread count gives losses bit-identical to a run that never stopped",
                      count_of(s.checkpoint->run.threads, "thread"), run.threads));
  }
  const auto& c = run.model.transformer;
  log.line(fmt::format("train: {} pairs from {} (vocab {} -> {}), {} parameters, {}, seed {}",
                       run.data.num_pairs, run.data.path, c.src_vocab_size, c.tgt_vocab_size,
                       m.net->num_parameters(), count_of(run.threads, "thread"), run.train.seed));
  if (d.tr)
    log.line(fmt::format(
        "train: {} tokenizer; {} validation and {} test pairs held out (no source sentence of "
        "theirs in training); {} training pairs longer than {} tokens dropped; {} batches of "
        "up to {} tokens per epoch",
        enum_name(run.model.tokenizer), d.tr->split.valid.size(), d.tr->split.test.size(),
        d.tr->dropped, run.data.max_length, num_batches, run.data.batch_tokens));
}

// ---- the report ----

void write_metrics(const std::string& target, const seq2seq::TrainResult& r,
                   const nlohmann::ordered_json& translations, double translate_ms) {
  nlohmann::ordered_json valid = nlohmann::ordered_json::array();
  for (const auto& v : r.validations)
    valid.push_back({{"step", v.step},
                     {"seconds", v.seconds},
                     {"loss", v.loss},
                     {"perplexity", v.perplexity},
                     {"bleu", v.bleu}});
  const PlacementProbes placement = placement_probes();
  nlohmann::ordered_json m = {{"final_loss", r.final_loss},
                              {"tokens_per_s", r.tokens_per_s},
                              {"train_seconds", r.seconds},
                              {"translate_ms", translate_ms},
                              {"peak_rss_mib", peak_rss_mib()},
                              {"steps", r.steps},
                              {"allreduce_seconds", r.allreduce_seconds},
                              {"placement_probes", placement.probes},
                              {"placement_far_probes", placement.far},
                              {"epoch_losses", r.epoch_losses},
                              {"step_losses", r.step_losses},
                              {"validations", valid},
                              {"best_validation", r.best},
                              {"translations", translations}};
  const fs::path path(target);
  if (path.has_parent_path()) io::ensure_directory(path.parent_path());
  io::write_file_atomic(path, m.dump(2) + "\n");
}

// d2l's four test sentences through the d2l model, or their cased forms
// through a translator.
int report(const TrainArgs& a, const TrainSetup& s, const RunData& d, Model& m,
           const seq2seq::TrainResult& r, TrainLog& log) {
  nn::Seq2SeqModel& net = *m.net;
  const std::int64_t num_steps = s.run.model.num_steps;
  nlohmann::ordered_json tr_json = nlohmann::ordered_json::array();
  std::function<void()> one_sentence;
  seq2seq::AttentionMaps maps;
  if (!d.tr) {
    log.line(fmt::format("loss {:.3f}, {:.1f} tokens/sec, {:.1f} s", r.final_loss, r.tokens_per_s,
                         r.seconds));
    const data::Vocab &sv = d.nmt.src_vocab, &tv = d.nmt.tgt_vocab;
    auto scored = seq2seq::translate_and_score(net, sv, tv, seq2seq::d2l_test_pairs(), num_steps);
    int exact = 0;
    for (const auto& t : scored) {
      log.line(fmt::format("{} => {}, bleu {:.3f}", t.source, t.prediction, t.bleu));
      exact += t.prediction == t.reference;
      tr_json.push_back(
          {{"src", t.source}, {"pred", t.prediction}, {"ref", t.reference}, {"bleu", t.bleu}});
    }
    log.line(fmt::format("{} of {} translated exactly", exact, scored.size()));
    one_sentence = [&] { seq2seq::translate_greedy(net, sv, tv, {"i'm home ."}, num_steps); };
    auto last =
        seq2seq::translate_greedy(net, sv, tv, {seq2seq::d2l_test_pairs().back().first}, num_steps);
    maps = seq2seq::attention_maps(net, sv, tv, last[0], num_steps);
  } else {
    log.line(fmt::format(
        "loss {:.4f} per token (training, {}), {:.1f} tokens/sec, {:.1f} s", r.final_loss,
        r.epochs > 0 ? "last whole epoch" : fmt::format("the {} steps of the first epoch", r.steps),
        r.tokens_per_s, r.seconds));
    if (r.best >= 0) {
      const auto& b = r.validations[static_cast<std::size_t>(r.best)];
      log.line(
          fmt::format("best validation (kept in {}): step {}, loss {:.4f}, ppl {:.2f}, "
                      "BLEU {:.2f}",
                      s.out, b.step, b.loss, b.perplexity, b.bleu));
    }
    std::vector<std::string> sources = {"Go.", "I lost.", "He's calm.", "I'm home."};
    std::vector<seq2seq::TextTranslation> out;
    for (auto& n_best : seq2seq::translate_texts(net, *d.tr->tokenizer, sources))
      out.push_back(std::move(n_best.front()));
    for (const auto& t : out) {
      log.line(fmt::format("{} => {}", t.source, t.text));
      tr_json.push_back({{"src", t.source}, {"pred", t.text}});
    }
    one_sentence = [&] { seq2seq::translate_texts(net, *d.tr->tokenizer, {"I'm home."}); };
    maps = seq2seq::attention_maps(net, *d.tr->tokenizer, out.back());
  }
  // The metrics first: a picture that fails must not cost them.
  if (!a.metrics_json.empty())
    write_metrics(a.metrics_json, r, tr_json, seq2seq::median_ms(one_sentence, 51));
  const fs::path out(s.out);
  // d2l's plot is per epoch; the translator's per step (a run may end inside its first epoch).
  const bool per_step = s.run.train.loss != seq2seq::Loss::d2l;
  seq2seq::save_loss_plot(r.epoch_losses, per_step ? r.step_losses : std::vector<double>{},
                          d.batches->num_batches(), r.validations, (out / "loss").string());
  seq2seq::save_bleu_plot(r.validations, (out / "bleu").string());
  const std::vector<std::string> pictures =
      seq2seq::save_attention_figures(maps, net.num_heads(), (out / "attention").string());
  log.line(
      fmt::format("model: {}/ (config.json, model.safetensors, the vocabularies{}, "
                  "manifest.json; checkpoint.safetensors)",
                  s.out, d.tr && !d.tr->spm_model.empty() ? ", spm.model" : ""));
  log.line(fmt::format("pictures: {}/loss.png, {}{} (and .svg)", s.out,
                       r.validations.empty() ? "" : fmt::format("{}/bleu.png, ", s.out),
                       fmt::join(pictures, ", ")));
  log.check();
  return 0;
}

// A run stopped by a signal: the line that says where and how to resume
// (process 0), and the exit status 128 + the signal.
int report_stop(const seq2seq::TrainResult& r, const TrainSetup& s, std::int64_t num_batches,
                bool writer, const std::string& checkpoint_path) {
  // With several processes the signal may have reached another one.
  const int sig = stop_signal();
  if (!writer) return 128 + (sig != 0 ? sig : SIGTERM);
  flush_stdout();
  fmt::print(stderr,
             "attn: {} after step {} of {}; checkpoint saved in {}; resume with: attn train "
             "--resume {}\n",
             sig == SIGINT    ? "interrupted (SIGINT)"
             : sig == SIGTERM ? "terminated (SIGTERM)"
                              : "stopped (a signal to another process)",
             r.steps, num_batches * s.run.train.num_epochs, checkpoint_path, shell_quote(s.out));
  return 128 + (sig != 0 ? sig : SIGTERM);
}

// The lines on how training ended: the allreduce's share, early stopping,
// the time limit.
void log_ending(const seq2seq::TrainResult& r, const RunSpec& run, bool parallel, TrainLog& log) {
  if (parallel)
    log.line(fmt::format(
        "train: process 0 spent {:.1f} s of {:.1f} s in the gradients' allreduce "
        "({:.1f}%, waiting for the others included)",
        r.allreduce_seconds, r.seconds, 100.0 * r.allreduce_seconds / std::max(r.seconds, 1e-9)));
  if (r.early_stopped)
    log.line(fmt::format("train: stopped early: {} validations without improvement",
                         run.train.early_stopping));
  if (r.time_limit_reached)
    log.line(fmt::format("train: stopped at the time limit of {} minutes", run.train.time_limit));
}

// The weights of the model directory (the best validation's) into `m`.
void load_best(const std::string& out, Model& m) {
  seq2seq::LoadedModel best = seq2seq::load_model(out);
  io::TensorMap weights;
  for (auto& [name, p] : best.net->named_parameters()) weights.emplace(name, p.detach());
  m.net->load_state_dict(weights);
  m.net->eval();
}

int run_train(const TrainArgs& a, const Context& ctx) {
  if (a.dump_config) {
    fmt::print("{}\n", seq2seq::hparams_to_flat_json(resolve(a, ctx)).dump(2));
    return 0;
  }
  TrainSetup s;
  if (a.resume.empty()) {
    s.run = resolve(a, ctx);
    s.out = a.out;
  } else {
    s = resume_setup(a, ctx);
  }
  RunSpec& run = s.run;
  run.threads = get_num_threads();
  // Under mpirun: one of several processes training one model (mpi_comm.h).
  // Process 0 alone writes (the model directory, checkpoints, logs,
  // pictures) and prints; the others compute their share and stay silent.
  optim::Communicator* comm = mpi_world();
  if (comm && comm->size() == 1) comm = nullptr;
  const bool writer = !comm || comm->rank() == 0;
  run.train.precision = precision_for(run.train.precision, "training in f32", /*say=*/writer);
  // The output directory is checked before the data is read and created
  // after: a corpus that fails (or a signal while it is read) leaves nothing.
  if (writer) check_output_dir(s.out, run, !a.resume.empty(), a.overwrite);
  const std::unique_ptr<RunData> data = load_data(run, s, comm);
  RunData& d = *data;
  if (!s.checkpoint) run.run_id = seq2seq::run_id_of(run);  // the spec, data included
  std::optional<OutputDir> dir;
  if (writer) dir.emplace(s.out, run, !a.resume.empty(), a.overwrite);
  TrainLog::Options log_options{.quiet = a.quiet,
                                .file = a.log,
                                .per_token = run.train.loss == seq2seq::Loss::token,
                                .time_limit_s = 60.0 * run.train.time_limit,
                                .silent = !writer};
  parse_log_every(a.log_every, log_options);
  if (!a.log_every_given && !isatty(STDOUT_FILENO)) log_options.quiet_gap_s = kQuietGapSeconds;
  TrainLog log(log_options);
  Model m = make_model(s);
  print_start(s, d, m, log);
  if (comm)
    log.line(fmt::format(
        "train: {} processes (mpirun), {} each; each batch is split "
        "between them by rows and the gradients summed ({})",
        comm->size(), count_of(run.threads, "thread"),
        a.reduce == optim::ReduceOrder::ordered ? "in the processes' order" : "MPI_Allreduce"));
  const std::string checkpoint_path = (fs::path(s.out) / seq2seq::kCheckpointFile).string();
  const data::Vocab &sv = d.vocab(data::Side::source), &tv = d.vocab(data::Side::target);
  auto save = [&] {
    if (writer) seq2seq::save_model(s.out, *m.net, run.model, sv, tv, d.extras(run));
  };
  // The model directory holds a loadable model before the first step.
  if (!m.resume && writer) {
    if (d.tr) seq2seq::write_split(s.out, *d.tr);
    save();
  }
  if (dir) dir->keep();

  seq2seq::TrainHooks hooks;
  hooks.on_batch = [&](const seq2seq::Progress& p) { log.batch(p); };
  hooks.on_epoch = [&](const seq2seq::Progress& p) { log.epoch(p); };
  hooks.checkpoint_every = a.checkpoint_every;
  // Checkpoints are written on a background thread while training goes on;
  // the last one is whole on disk before anything below reports or exits.
  seq2seq::CheckpointWriter checkpoints(checkpoint_path);
  hooks.on_checkpoint = [&](const seq2seq::TrainState& st, bool last) {
    if (writer) checkpoints.write(*m.net, run, st, last);
  };
  hooks.should_stop = [] { return stop_signal() != 0; };
  hooks.comm = comm;
  hooks.reduce = a.reduce;
  const bool validating = d.tr && run.train.valid_freq > 0 && !d.tr->split.valid.empty();
  if (validating) {
    hooks.validate = [&](nn::Seq2SeqModel& net) {
      return seq2seq::validate_translator(net, *d.tr->tokenizer, d.tr->split.valid, d.tr->valid, {},
                                          comm);
    };
    hooks.on_validation = [&](const seq2seq::Validation& v, bool best) { log.validation(v, best); };
    hooks.on_best = [&](const seq2seq::TrainState&) { save(); };  // the model directory: the best
  }
  // From here to the end of training a signal asks to stop after the step in
  // progress; before (reading the data) and after (the outputs) it ends the
  // process at once: the last checkpoint and the model are whole either way.
  std::optional<StopScope> stoppable(std::in_place);
  seq2seq::TrainResult r =
      seq2seq::train_seq2seq(*m.net, *d.batches, run.train, hooks, m.resume ? &*m.resume : nullptr);
  checkpoints.finish();
  log.end_bar();
  if (r.stopped) {
    if (!validating) save();
    return report_stop(r, s, d.batches->num_batches(), writer, checkpoint_path);
  }
  stoppable.reset();
  // A signal after the last step's check (while the last checkpoint was
  // being finished) found training complete and its checkpoint whole: it
  // ends the process as one during the outputs does, rather than being lost.
  if (const int sig = stop_signal(); sig != 0) end_by_signal(sig);
  if (!writer) return 0;  // the report is process 0's
  log_ending(r, run, comm != nullptr, log);
  if (!validating) save();  // else the model directory holds the best model already
  if (validating) load_best(s.out, m);  // the report describes the model the directory holds
  return report(a, s, d, m, r, log);
}

constexpr const char* kTrainFooter =
    "Presets: d2l (the default: d2l's Transformer of section 10.7 on 600 pairs, the\n"
    "book's numbers), bahdanau (section 10.4: the GRU encoder-decoder with Bahdanau\n"
    "attention, the book's settings, 250 epochs) and tatoeba (a translator of the\n"
    "whole corpus: SentencePiece vocabulary, token batches, label smoothing, warmup,\n"
    "validation, early stopping; about an hour on two cores). --model bahdanau\n"
    "trains the 10.4 model with any other settings. --config FILE reads\n"
    "hyperparameters from a JSON object of the names --dump-config prints; flags\n"
    "override both.\n"
    "\n"
    "The model directory (--out): config.json, model.safetensors, the vocabularies\n"
    "(and spm.model), training.json and manifest.json (their sizes and SHA-256),\n"
    "written as one unit: a reader sees the old model or the new one, never a mix.\n"
    "With validation it holds the best model so far (--valid-metric); the checkpoint\n"
    "holds the last. A directory that already holds a model is not replaced unless\n"
    "--overwrite is given, and a directory being trained into is locked. A\n"
    "translator's split is written to OUT/data/{train,valid,test}.tsv.\n"
    "\n"
    "Checkpoints: OUT/checkpoint.safetensors holds the model, Adam's state, the\n"
    "position in the data, the random-number state, the losses and validations so\n"
    "far and every hyperparameter, with a SHA-256 of its content; written atomically\n"
    "before the first step (without Adam's moments, zero then), every\n"
    "--checkpoint-every steps and at the end.\n"
    "\n"
    "Resume: 'attn train --resume DIR' continues from DIR's checkpoint with its\n"
    "hyperparameters and ends as a run that never stopped would (with the same\n"
    "--threads, bit-identical losses and model). With --resume these may be given:\n"
    "--data, --valid-data, --test-data (the same corpora elsewhere; checked),\n"
    "--epochs and --time-limit (to train longer), --precision, --checkpoint-every,\n"
    "--metrics-json, --log, --quiet; other flags must agree with the checkpoint.\n"
    "\n"
    "Ctrl-C (SIGINT) or SIGTERM: training finishes the step in progress, writes a\n"
    "checkpoint and the model, prints how to resume and exits with 130 (SIGINT) or\n"
    "143 (SIGTERM). A second signal exits at once; the last checkpoint stays whole.\n"
    "Before training starts (reading the data) and after it ends, a signal ends attn\n"
    "at once.\n"
    "\n"
    "Several processes: 'mpirun -np N attn train ...' trains one model with N\n"
    "processes (data-parallel: each computes its rows of every batch, the gradients\n"
    "are summed in the processes' order); the batch flags mean the whole batch,\n"
    "process 0 alone writes, and --resume works with any N. N processes compute\n"
    "the same bits as one with --accum-steps N (N micro-batches a step), so a run\n"
    "can move between them. 'attn --version' says whether this attn was built with\n"
    "MPI.";

void setup_train(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* sub = parent.add_subcommand("train",
                                        "Train d2l's Transformer, or a translator of the whole "
                                        "corpus (--preset tatoeba), and save the model");
  sub->footer(kTrainFooter);
  sub->add_option("--preset", a->preset,
                  "d2l: the book's section 10.7 run (the defaults shown here); tatoeba: a "
                  "translator of the whole corpus in about an hour on 2 cores (subwords, token "
                  "batches, validation; --preset tatoeba --dump-config shows every value)")
      ->check(CLI::IsMember(seq2seq::preset_names()))
      ->capture_default_str();
  add_file_option(sub, "--config", a->config,
                  "A JSON object of hyperparameters by name (as --dump-config prints them)");
  sub->add_flag("--dump-config", a->dump_config,
                "Print every hyperparameter as resolved (preset, --config, flags) and exit");
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
  a->hp.add_to(sub, preset_run("d2l"));
  sub->add_option("--metrics-json", a->metrics_json,
                  "Write loss, validations, speed, memory and translations as JSON here");
  add_file_option(sub, "--log", a->log, "Append every progress and validation line to this file");
  sub->add_option("--log-every", a->log_every,
                  "A progress line every N steps, or with Ns every N seconds (0: d2l's line "
                  "every tenth of the epochs). Not given, and the output not a terminal: also "
                  "a line whenever a minute passed without one")
      ->check(CLI::Validator([](std::string& v) { return log_every_error(v); }, "N|Ns"))
      ->option_text("N|Ns")
      ->capture_default_str();
  sub->add_flag("--quiet", a->quiet, "No progress bar and no progress lines");
  sub->add_option("--reduce", a->reduce_name,
                  "Under mpirun, how the processes' gradients are summed: ordered (the default), "
                  "in the processes' order (N processes give the bits of one with --accum-steps "
                  "N); fast, MPI_Allreduce's own order")
      ->check(CLI::IsMember({"ordered", "fast"}))
      ->option_text("ordered|fast");
  set_action(sub, ctx, [a, sub, &parent](const Context& c) {
    a->hp.collect(sub, &parent);
    a->reduce = a->reduce_name == "fast" ? optim::ReduceOrder::fast : optim::ReduceOrder::ordered;
    a->out_given = sub->get_option("--out")->count() > 0;
    a->log_every_given = sub->get_option("--log-every")->count() > 0;
    if (sub->get_option("--resume")->count() > 0 && a->resume.empty())
      throw CLI::ValidationError("--resume", "needs a model directory");
    if (a->overwrite && !a->resume.empty())
      throw CLI::ValidationError("--overwrite",
                                 "--resume continues the model it names; --overwrite would "
                                 "replace it: give one of them");
    if (!a->resume.empty() && (sub->get_option("--preset")->count() > 0 || !a->config.empty()))
      throw CLI::ValidationError("--resume",
                                 "a resumed run keeps its checkpoint's hyperparameters: "
                                 "--preset and --config do not go with --resume");
    if (!a->metrics_json.empty()) check_metrics_target(a->metrics_json);
    if (!a->log.empty()) check_log_target(a->log);
    return run_train(*a, c);
  });
}

const Registration train_reg{"", "train", 10, setup_train};

}  // namespace
}  // namespace attn::cli
