#include "train_setup.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "attn/io/json.h"
#include "attn/io/read_file.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/translation_data.h"
#include "commands.h"
#include "paths.h"

namespace attn::cli {

namespace fs = std::filesystem;
using seq2seq::HParam;
using seq2seq::OnResume;
using seq2seq::RunSpec;

RunSpec preset_run(const std::string& name) {
  RunSpec run = seq2seq::preset_run(name);
  if (run.data.path.empty()) run.data.path = default_corpus();
  return run;
}

namespace {

// The flags that --resume accepts besides agreeing hyperparameters.
std::string may_change_on_resume() {
  std::string list;
  for (const HParam& p : seq2seq::hparams())
    if (p.on_resume == OnResume::may_change && p.flag != seq2seq::HFlag::none)
      list += seq2seq::flag_of(p) + ", ";
  return list + "--checkpoint-every, --metrics-json, --log and --quiet";
}

// "run 1f3a09c2 (num_hiddens 8, 2 layers, 4 heads)"
std::string describe_run(const std::string& run_id, const seq2seq::ModelConfig& m) {
  return fmt::format("run {} (num_hiddens {}, {} layers, {} heads)",
                     run_id.empty() ? std::string("of an older attn") : run_id.substr(0, 8),
                     m.transformer.num_hiddens, m.transformer.num_layers, m.transformer.num_heads);
}

// The checkpoint continues only the run whose model is beside it: a model
// of another run (an --overwrite that failed before its first checkpoint,
// files copied between directories) is refused, naming both.
void check_checkpoint_belongs(const fs::path& dir, const seq2seq::Checkpoint& c,
                              const fs::path& checkpoint) {
  const std::string fix = fmt::format(
      "start the run again with 'attn train --overwrite --out {}' (the checkpoint then goes), or "
      "keep the model and remove '{}'",
      dir.string(), checkpoint.string());
  seq2seq::LoadedModel model;
  try {
    model = seq2seq::load_model(dir.string());
  } catch (const Error& e) {
    throw ErrorWithHint(fmt::format("cannot resume '{}': the model beside it cannot be read: {}",
                                    checkpoint.string(), e.what()),
                        fix);
  }
  if (model.run_id == c.run.run_id) return;
  throw ErrorWithHint(
      fmt::format("cannot resume: the checkpoint '{}' is of {}, step {}, but the model in '{}' is "
                  "of {}; they belong to different runs",
                  checkpoint.string(), describe_run(c.run.run_id, c.run.model), c.state.step,
                  dir.string(), describe_run(model.run_id, model.config)),
      fix);
}

}  // namespace

RunSpec resolve(const TrainArgs& a, const Context& ctx) {
  RunSpec run = preset_run(a.preset);
  bool config_seed = false;
  if (!a.config.empty()) {
    const io::InputFile f(a.config);
    const std::string what = fmt::format("'{}'", a.config);
    const nlohmann::json j = io::parse_json_strict(f.read_all(1 << 20), what);
    for (const auto& name : seq2seq::hparams_from_flat_json(io::JsonObject(j, what), run))
      config_seed = config_seed || name == "seed";
  }
  a.hp.apply(run);
  if (a.hp.given("seed") || !config_seed) run.train.seed = ctx.global.seed;
  try {
    seq2seq::resolve_run(run);
  } catch (const ValueError& e) {
    throw CLI::ValidationError(e.what());
  }
  return run;
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
  check_checkpoint_belongs(dir, *s.checkpoint, path);
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
    if (!a.hp.given(p.name)) continue;
    const seq2seq::HValue given =
        p.flag == seq2seq::HFlag::global ? seq2seq::HValue(ctx.global.seed) : a.hp.value(p);
    if (p.on_resume == OnResume::may_change) {
      if (p.name == "num_epochs") {
        const seq2seq::TrainState& st = s.checkpoint->state;
        const std::int64_t begun = st.epoch + (st.batch > 0 ? 1 : 0);
        if (std::get<std::int64_t>(given) < begun)
          throw CLI::ValidationError(
              "--epochs", fmt::format("--epochs {} is fewer than the {} epochs the checkpoint "
                                      "has already begun",
                                      std::get<std::int64_t>(given), begun));
      }
      p.set(run, given);
      continue;
    }
    const seq2seq::HValue stored = p.get(run);
    if (given != stored)
      throw CLI::ValidationError(
          seq2seq::flag_of(p),
          fmt::format("{} differs from the checkpoint's {}; a resumed run keeps the "
                      "hyperparameters of its checkpoint (only {} may change)",
                      seq2seq::format_hvalue(given), seq2seq::format_hvalue(stored),
                      may_change_on_resume()));
  }
  // Absolute, so that a later --resume works from any directory.
  for (std::string* path : {&run.data.path, &run.data.valid_data, &run.data.test_data})
    if (!path->empty()) *path = fs::absolute(*path).lexically_normal().string();
  s.out = a.resume;
  return s;
}

}  // namespace attn::cli
