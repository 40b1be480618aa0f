// attn.train: a training run from Python, through the library's functions
// (seq2seq/hparams.h, trainer.h, checkpoint.h, model_dir.h), in the order
// `attn train` runs them (apps/attn/cmd_train.cpp): the preset, then the
// keywords (the hyperparameter table's flags), the data, the model, the
// model directory written before the first step, training with checkpoints
// and validations, the model directory written at the end.
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "attn/core/rng.h"
#include "attn/core/threads.h"
#include "attn/data/nmt.h"
#include "attn/io/atomic_file.h"
#include "attn/io/dir_lock.h"
#include "attn/nn/init.h"
#include "attn/ops/precision.h"
#include "attn/seq2seq/checkpoint.h"
#include "attn/seq2seq/hparams.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translation_data.h"
#include "attn/seq2seq/translator.h"
#include "bindings.h"
#include "compute.h"
#include "translator.h"

namespace attn::python {
namespace {

namespace fs = std::filesystem;
using seq2seq::HFlag;
using seq2seq::HParam;
using seq2seq::RunSpec;

// The row a keyword names: the row's name ("num_epochs") or its flag's
// ("epochs" for --epochs), for the rows that are flags.
const HParam& row_of(const std::string& key) {
  for (const HParam& p : seq2seq::hparams()) {
    if (p.flag == HFlag::none) continue;
    std::string flag = seq2seq::flag_of(p).substr(2);
    std::replace(flag.begin(), flag.end(), '-', '_');
    if (key == p.name || key == flag) return p;
  }
  throw ValueError(
      fmt::format("train: '{}' is not a hyperparameter (attn.hyperparameters() lists them)", key));
}

// A keyword's value as the flag's text, read by the table's own parser (its
// types, ranges and messages).
std::string flag_text(const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::float_>(value)) return py::repr(value).cast<std::string>();
  return py::str(value).cast<std::string>();
}

py::dict progress_dict(const char* kind, const seq2seq::Progress& p) {
  py::dict d;
  d["kind"] = kind;
  d["epoch"] = p.epoch;
  d["num_epochs"] = p.num_epochs;
  d["batch"] = p.batch;
  d["num_batches"] = p.num_batches;
  d["step"] = p.step;
  d["loss"] = p.step_loss;
  d["epoch_loss"] = p.epoch_loss;
  d["lr"] = p.lr;
  d["tokens"] = p.tokens;
  d["seconds"] = p.seconds;
  return d;
}

py::dict validation_dict(const seq2seq::Validation& v, bool best) {
  py::dict d;
  d["kind"] = "validation";
  d["step"] = v.step;
  d["loss"] = v.loss;
  d["perplexity"] = v.perplexity;
  d["bleu"] = v.bleu;
  d["seconds"] = v.seconds;
  d["best"] = best;
  return d;
}

// Calls the Python callback from the training thread (the GIL taken for the
// call); an exception from it ends training after the step (should_stop)
// and is raised once train_seq2seq has returned.
class Callback {
 public:
  explicit Callback(py::object fn) : fn_(std::move(fn)) {}
  template <class MakeArg>
  void operator()(MakeArg&& make) {
    if (fn_.is_none() || error_) return;
    py::gil_scoped_acquire gil;
    try {
      fn_(make());
    } catch (py::error_already_set& e) {
      error_ = std::make_unique<py::error_already_set>(std::move(e));
    }
  }
  bool failed() const { return error_ != nullptr; }
  // Ctrl-C while the callback ran raised KeyboardInterrupt in it.
  bool interrupted() const { return error_ && error_->matches(PyExc_KeyboardInterrupt); }
  [[noreturn]] void rethrow() { throw std::move(*error_); }

 private:
  py::object fn_;
  std::unique_ptr<py::error_already_set> error_;
};

struct Outcome {
  seq2seq::TrainResult result;
  std::int64_t total_steps = 0;
};

Outcome run_training(RunSpec& run, const std::string& out, std::int64_t checkpoint_every,
                     Callback& callback, InterruptWatch& watch) {
  const std::unique_ptr<seq2seq::RunData> data = seq2seq::load_run_data(run, /*fresh=*/true);
  const seq2seq::RunData& d = *data;
  run.run_id = seq2seq::run_id_of(run);  // the spec, data included (as attn train)
  std::shared_ptr<nn::Seq2SeqModel> net = seq2seq::make_model(run.model);
  seq2seq::initialize_model(*net, run.model, run.train.embedding_init, default_generator());
  io::ensure_directory(out);
  io::DirectoryLock lock(out, "attn.train (Python)");
  const data::Vocab &sv = d.vocab(data::Side::source), &tv = d.vocab(data::Side::target);
  const seq2seq::ModelExtras extras = d.extras(run);
  auto save = [&] { seq2seq::save_model(out, *net, run.model, sv, tv, extras); };
  if (d.tr) seq2seq::write_split(out, *d.tr);  // so that anyone can re-score
  save();  // a loadable model before the first step

  seq2seq::TrainHooks hooks;
  hooks.on_batch = [&](const seq2seq::Progress& p) {
    callback([&] { return progress_dict("step", p); });
  };
  hooks.on_epoch = [&](const seq2seq::Progress& p) {
    callback([&] { return progress_dict("epoch", p); });
  };
  hooks.checkpoint_every = checkpoint_every;
  seq2seq::CheckpointWriter checkpoints((fs::path(out) / seq2seq::kCheckpointFile).string());
  hooks.on_checkpoint = [&](const seq2seq::TrainState& st, bool last) {
    checkpoints.write(*net, run, st, last);
  };
  hooks.should_stop = [&] {
    if (callback.failed()) return true;
    try {
      watch.check();
    } catch (const Interrupted&) {
      return true;
    }
    return false;
  };
  const bool validating = d.tr && run.train.valid_freq > 0 && !d.tr->split.valid.empty();
  if (validating) {
    hooks.validate = [&](nn::Seq2SeqModel& m) {
      return seq2seq::validate_translator(m, *d.tr->tokenizer, d.tr->split.valid, d.tr->valid);
    };
    hooks.on_validation = [&](const seq2seq::Validation& v, bool best) {
      callback([&] { return validation_dict(v, best); });
    };
    hooks.on_best = [&](const seq2seq::TrainState&) { save(); };
  }
  Outcome o;
  o.result = seq2seq::train_seq2seq(*net, *d.batches, run.train, hooks);
  checkpoints.finish();
  if (!validating) save();  // else the model directory holds the best model
  o.total_steps = d.batches->num_batches() * run.train.num_epochs;
  return o;
}

py::dict result_dict(const seq2seq::TrainResult& r, const std::string& out) {
  py::dict d;
  d["out"] = out;
  d["final_loss"] = r.final_loss;
  d["epoch_losses"] = r.epoch_losses;
  d["step_losses"] = r.step_losses;
  d["steps"] = r.steps;
  d["epochs"] = r.epochs;
  d["tokens"] = r.tokens;
  d["seconds"] = r.seconds;
  d["tokens_per_s"] = r.tokens_per_s;
  py::list validations;
  for (std::size_t i = 0; i < r.validations.size(); ++i)
    validations.append(validation_dict(r.validations[i], static_cast<std::int64_t>(i) == r.best));
  d["validations"] = validations;
  d["best_validation"] = r.best;
  d["early_stopped"] = r.early_stopped;
  d["time_limit_reached"] = r.time_limit_reached;
  return d;
}

constexpr const char* kTrainDoc = R"doc(
Trains a model as `attn train` does and writes its model directory `out`
(config.json, model.safetensors, the vocabularies or spm.model,
training.json, manifest.json, checkpoint.safetensors; a translator's split in
out/data/): the preset's hyperparameters ("d2l": d2l's Transformer of 10.7;
"bahdanau": 10.4; "tatoeba": a translator), then every keyword, which is a
flag of `attn train` from the one hyperparameter table, by its name or its
flag's (num_epochs or epochs, path or data, architecture or model, ...;
attn.hyperparameters() lists them). `data` is the corpus ('english<TAB>french'
per line, plain or gzip; datasets/fra-eng/fra.txt.gz in attn's sources).

callback(event) is called with a dict after every step ({"kind": "step",
"step", "epoch", "batch", "loss" (the step's per token), "epoch_loss", "lr",
"tokens", "seconds", ...}), every epoch ("kind": "epoch") and every
validation ({"kind": "validation", "step", "loss", "perplexity", "bleu",
"best"}); an exception it raises ends training after the step and is raised
here. Ctrl-C ends training after the step in progress, with a checkpoint
written (resume with `attn train --resume OUT`), and raises
KeyboardInterrupt. `seed` seeds every draw (attn --seed), `threads` is attn
--threads (0: attn.get_num_threads()); with the same flags, seed and threads
the step losses are those of `attn train`, bit for bit. A directory that
holds a model is replaced only with overwrite=True.

Returns {"out", "final_loss", "epoch_losses", "step_losses", "steps",
"epochs", "tokens", "seconds", "tokens_per_s", "validations",
"best_validation", "early_stopped", "time_limit_reached"}.)doc";

py::dict train(const std::string& preset, const std::string& out, const py::object& callback_fn,
               int threads, bool overwrite, std::int64_t checkpoint_every,
               const py::kwargs& flags) {
  RunSpec run = seq2seq::preset_run(preset);
  std::uint64_t seed = 0;
  for (const auto& [key, value] : flags) {
    const HParam& p = row_of(py::str(key));
    const seq2seq::HValue v = seq2seq::parse_hvalue(p, flag_text(value));
    if (p.flag == HFlag::global)
      seed = std::get<std::uint64_t>(v);
    else
      p.set(run, v);
  }
  ATTN_CHECK(!run.data.path.empty(), ValueError,
             "train: give data=FILE, the corpus (datasets/fra-eng/fra.txt.gz in attn's sources, "
             "share/attn/datasets/fra-eng/fra.txt.gz where attn is installed)");
  ATTN_CHECK(checkpoint_every >= 0, ValueError, "train: checkpoint_every must be >= 0, got {}",
             checkpoint_every);
  ATTN_CHECK(threads >= 0 && threads <= 1024, ValueError,
             "train: threads must be 0 (attn.get_num_threads()) to 1024, got {}", threads);
  run.train.seed = seed;
  seq2seq::resolve_run(run);  // as attn train: en-fr for the bundled corpus, the positions
  if (run.train.precision == Precision::bf16 && !bf16_supported()) {
    warn("attn: precision bf16: this CPU has no AVX-512 BF16; training in f32");
    run.train.precision = Precision::f32;
  }
  const fs::path dir(out);
  ATTN_CHECK(
      overwrite ||
          (!fs::exists(dir / "manifest.json") && !fs::exists(dir / seq2seq::kCheckpointFile)),
      ValueError, "train: '{}' holds a model already; pass overwrite=True to replace it", out);
  Callback callback(callback_fn);
  InterruptWatch watch;
  Outcome o;
  compute_interruptible(watch, [&] {
    const int saved = get_num_threads();
    if (threads > 0) set_num_threads(threads);
    run.threads = get_num_threads();
    manual_seed(seed);
    try {
      o = run_training(run, out, checkpoint_every, callback, watch);
    } catch (...) {
      set_num_threads(saved);
      throw;
    }
    set_num_threads(saved);
  });
  if (callback.failed() && !callback.interrupted()) callback.rethrow();
  if (o.result.stopped)
    watch.raise_interrupt(fmt::format(
        "attn.train: interrupted after step {} of {}; checkpoint saved in {}; resume with: attn "
        "train --resume {}",
        o.result.steps, o.total_steps, (fs::path(out) / seq2seq::kCheckpointFile).string(), out));
  return result_dict(o.result, out);
}

}  // namespace

void bind_train(py::module_& m) {
  m.def("train", &train, py::arg("preset") = "d2l", py::arg("out") = "out/model", py::kw_only(),
        py::arg("callback") = py::none(), py::arg("threads") = 0, py::arg("overwrite") = false,
        py::arg("checkpoint_every") = 100, kTrainDoc);
  m.def(
      "hyperparameters",
      [](const std::string& preset) {
        const RunSpec run = seq2seq::preset_run(preset);
        py::dict d;
        for (const HParam& p : seq2seq::hparams()) {
          if (p.flag == HFlag::none) continue;
          py::dict row;
          std::string flag = seq2seq::flag_of(p).substr(2);
          std::replace(flag.begin(), flag.end(), '-', '_');
          row["flag"] = seq2seq::flag_of(p);
          row["keyword"] = flag;
          row["default"] = seq2seq::format_hvalue(p.get(run));
          row["range"] = seq2seq::range_of(p);
          row["choices"] = std::string(p.choices);
          row["help"] = std::string(p.help);
          d[py::str(std::string(p.name))] = row;
        }
        return d;
      },
      py::arg("preset") = "d2l",
      "Every hyperparameter attn.train takes, by name: its flag of `attn train`, its other "
      "keyword, its value in the preset (as text), its range or choices and its help, from the "
      "one hyperparameter table.");
}

}  // namespace attn::python
