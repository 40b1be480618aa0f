// apps/attn/train_setup.h — what `attn train` trains: its arguments, and the
// run they resolve to (a preset, a --config file and the flags), or the
// checkpoint a --resume continues with its hyperparameters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "attn/optim/data_parallel.h"

#include "attn/seq2seq/checkpoint.h"
#include "attn/seq2seq/hparams.h"
#include "commands.h"
#include "hparam_flags.h"

namespace attn::cli {

struct TrainArgs {
  std::string preset = "d2l";
  std::string config;
  bool dump_config = false;
  std::string out = "out/model";
  std::string metrics_json;
  std::string resume;
  std::string log;
  std::string log_every = "0";  // N steps or Ns seconds
  bool log_every_given = false;
  std::int64_t checkpoint_every = 100;
  bool quiet = false;
  bool overwrite = false;
  std::string reduce_name = "ordered";  // --reduce, parsed into `reduce`
  optim::ReduceOrder reduce = optim::ReduceOrder::ordered;
  HParamFlags hp;
  bool out_given = false;
};

// A preset, on the bundled corpus unless it names another.
seq2seq::RunSpec preset_run(const std::string& name);

struct TrainSetup {
  seq2seq::RunSpec run;
  std::optional<seq2seq::Checkpoint> checkpoint;  // when resuming
  std::string out;
};

// The preset, then the --config file, then the flags (CLI::ValidationError
// for values that do not go together).
seq2seq::RunSpec resolve(const TrainArgs& a, const Context& ctx);

// The checkpoint of --resume and its hyperparameters, with the flags that may
// change applied and the others checked against it.
TrainSetup resume_setup(const TrainArgs& a, const Context& ctx);

}  // namespace attn::cli
