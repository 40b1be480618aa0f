// attn/seq2seq/checkpoint.h — training checkpoints: everything `attn train
// --resume` needs to continue exactly where training stopped.
//
// A checkpoint is one safetensors file (in a model directory:
// DIR/checkpoint.safetensors), written atomically — temp file, fsync, rename,
// fsync of the directory — so a crash at any moment leaves either the previous
// checkpoint or the new one, whole. Its tensors:
//   <name>                  every model parameter under its d2l name, F32
//   adam.exp_avg.<name>     Adam's first moment of that parameter, F32
//   adam.exp_avg_sq.<name>  Adam's second moment, F32
//   train.step_loss         F64 (steps): the summed masked cross-entropy of each step
//   train.step_tokens       F64 (steps): the target tokens of each step's batch
// and its __metadata__ {"format": "attn-checkpoint", "checkpoint": JSON}, the
// JSON an object of
//   "format_version": 1
//   "model":  the model's config.json object (model_dir.h)
//   "data":   the data rows of the hyperparameter table (hparams.h: the
//              corpus and how it was cut) and "fingerprint"
//   "train":  the train rows of the table (num_epochs, lr, batch_size, ...)
//   "state":  {"step", "epoch", "batch", "shuffle_offset", "rng_seed",
//              "rng_offset", "adam_steps", "seconds"}  (TrainState)
//   "threads": the thread count of the run (losses are bit-identical only
//              with the same count)
//   "run_id": the run's identity (RunSpec::run_id; absent in checkpoints of
//              an older attn), which the model directory's weights carry too
#pragma once

#include <cstdint>
#include <future>
#include <string>

#include "attn/data/nmt.h"
#include "attn/io/safetensors.h"
#include "attn/seq2seq/hparams.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/trainer.h"

namespace attn::seq2seq {

inline constexpr const char* kCheckpointFile = "checkpoint.safetensors";

struct Checkpoint {
  RunSpec run;
  TrainState state;  // without Adam's moments: restore_checkpoint puts them in
  io::TensorMap parameters;  // d2l name -> parameter
  io::TensorMap exp_avg, exp_avg_sq;  // d2l name -> Adam's moment of that parameter
};

// A run's identity: 32 hex digits of the SHA-256 of everything that fixes
// its trajectory — the model, data and training rows of the hyperparameter
// table as the run starts (the corpora's paths left out) and the training
// data's fingerprint (their content). attn is
// deterministic, so two runs of one spec are the same run (their weights'
// files equal, whatever the thread or process count), and runs of
// different specs have different ids. Computed once, when a run starts
// (the rows a resume may change, --epochs among them, do not change it).
std::string run_id_of(const RunSpec& run);
// Whether `id` is of that form.
bool is_run_id(const std::string& id);

// A 64-bit FNV-1a hash of the training data: both vocabularies' tokens and
// the training arrays and lengths. Resuming on data with another fingerprint
// would not continue the same run.
std::uint64_t data_fingerprint(const data::NmtData& data);

// Writes `net` and `state` as a checkpoint to `path` (atomically). Before
// Adam's first step (state.adam_steps 0, every moment all zero bits) the
// moments are left out: load_checkpoint reads them as zeros.
void save_checkpoint(const std::string& path, const nn::Seq2SeqModel& net, const RunSpec& run,
                     const TrainState& state);

// The bytes save_checkpoint writes.
std::string checkpoint_bytes(const nn::Seq2SeqModel& net, const RunSpec& run,
                             const TrainState& state);

// Writes checkpoints off the training thread. write() takes the state at
// once, so training may go on changing it, and leaves the file (temp file,
// fsync, rename) to a background thread. A large state (64 MiB or more) is
// copied (a memory copy, into blocks the allocator keeps for the next
// checkpoint) and the background thread computes the content digest and streams
// the copies to the file; a small one is serialized at once. With `last` (no
// step follows: the caller changes neither the parameters nor the moments
// until finish() returns) a large state is not copied at all. write() first
// waits for the write before it and throws that write's error, if any;
// finish() waits for the last one and throws its error. The destructor waits
// too but drops an error: call finish() to see it.
class CheckpointWriter {
 public:
  explicit CheckpointWriter(std::string path) : path_(std::move(path)) {}
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void write(const nn::Seq2SeqModel& net, const RunSpec& run, const TrainState& state,
             bool last = false);
  void finish();

 private:
  std::string path_;
  std::future<void> pending_;
};

namespace detail {
// The size from which CheckpointWriter copies the state rather than
// serializing it on the calling thread (64 MiB); returns the previous value.
// For tests.
std::int64_t set_checkpoint_snapshot_bytes(std::int64_t bytes);
}  // namespace detail

// Reads a checkpoint and checks it before anything is built from it: the file
// (as io::load_safetensors), the format, every metadata key (present, of its
// type and range), the model config (as config_from_json), the parameters
// (as check_weights, and F32), one Adam moment pair per parameter, of its
// shape, finite (the second moment not negative), or none at Adam's step 0
// (zeros, then), the step records (one per
// step, finite, tokens positive whole numbers), no other tensor, and the
// state's consistency (step = epoch x batches per epoch + batch, Adam's step
// count = step, epoch within num_epochs). Every problem is an IOError of one
// line naming the file and the key or tensor.
Checkpoint load_checkpoint(const std::string& path);

// Copies the checkpoint's parameters into `net` (a model of c.run.model) and
// returns the state to resume from, Adam's moments in net.parameters() order.
TrainState restore_checkpoint(const Checkpoint& c, nn::Seq2SeqModel& net);

}  // namespace attn::seq2seq
