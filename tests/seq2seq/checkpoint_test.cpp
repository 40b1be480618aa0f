#include "attn/seq2seq/checkpoint.h"
#include "attn/nn/init.h"

#include "attn/io/atomic_file.h"
#include "attn/io/digest.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "attn/io/atomic_file.h"
#include "attn/io/safetensors.h"
#include "testing.h"

using namespace attn;

namespace {

const std::string kCorpus = std::string(ATTN_SOURCE_DIR) + "/datasets/fra-eng/fra.txt.gz";

// 61 pairs: 8 batches of 8 per epoch (the last one of 5).
const data::NmtData& tiny_data() {
  static const data::NmtData d = [] {
    data::NmtOptions o;
    o.num_examples = 60;
    return data::load_data_nmt(kCorpus, o);
  }();
  return d;
}

seq2seq::RunSpec tiny_run(std::int64_t num_epochs) {
  const auto& d = tiny_data();
  seq2seq::RunSpec run;
  auto& c = run.model.transformer;
  c.src_vocab_size = static_cast<std::int64_t>(d.src_vocab.size());
  c.tgt_vocab_size = static_cast<std::int64_t>(d.tgt_vocab.size());
  c.num_hiddens = 8;
  c.num_heads = 2;
  c.ffn_num_hiddens = 16;
  c.num_layers = 1;
  c.dropout = 0.1;
  c.max_len = 100;
  run.model.num_steps = 10;
  run.data.path = kCorpus;
  run.data.num_examples = 60;
  run.data.num_pairs = d.src.array.size(0);
  run.data.fingerprint = seq2seq::data_fingerprint(d);
  run.train.num_epochs = num_epochs;
  run.train.batch_size = 8;
  run.train.seed = 5;
  run.threads = get_num_threads();
  return run;
}

// A fresh model as `attn train` makes one: the default generator seeded, then Xavier.
std::unique_ptr<nn::EncoderDecoder> fresh_net(const seq2seq::RunSpec& run, std::uint64_t seed) {
  manual_seed(seed);
  auto net = std::make_unique<nn::EncoderDecoder>(run.model.transformer);
  nn::xavier_init(*net, default_generator());
  return net;
}

std::map<std::string, std::vector<float>> params_of(const nn::EncoderDecoder& net) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, p] : net.named_parameters()) out[name] = to_vector<float>(p);
  return out;
}

class CheckpointTest : public attn::testing::TempDirTest {
 protected:
  void background_writer_writes_the_state_of_its_step();
  std::string path(const std::string& name = seq2seq::kCheckpointFile) const {
    return (dir_ / name).string();
  }

  // Trains `run` from scratch, stopping after `stop_after` steps (-1: never)
  // and writing checkpoints to path().
  seq2seq::TrainResult train_until(const seq2seq::RunSpec& run, std::int64_t stop_after,
                                   std::int64_t checkpoint_every = 0) {
    auto net = fresh_net(run, 7);
    return train_with(*net, run, stop_after, checkpoint_every, nullptr);
  }

  seq2seq::TrainResult train_with(nn::EncoderDecoder& net, const seq2seq::RunSpec& run,
                                  std::int64_t stop_after, std::int64_t checkpoint_every,
                                  const seq2seq::TrainState* resume) {
    seq2seq::TrainHooks hooks;
    std::int64_t step = resume ? resume->step : 0;
    hooks.on_batch = [&](const seq2seq::Progress& p) { step = p.step; };
    hooks.should_stop = [&] { return stop_after >= 0 && step >= stop_after; };
    hooks.checkpoint_every = checkpoint_every;
    hooks.on_checkpoint = [&](const seq2seq::TrainState& s, bool last) {
      seq2seq::save_checkpoint(path(), net, run, s);
      ++checkpoints_;
      lasts_.push_back(last);
    };
    return seq2seq::train_seq2seq(net, tiny_data(), run.train, hooks, resume);
  }

  // Loads path() into a model that starts from other weights and another
  // default-generator state (as a new process would), and trains on.
  seq2seq::TrainResult resume(std::unique_ptr<nn::EncoderDecoder>& net,
                              std::int64_t stop_after = -1) {
    seq2seq::Checkpoint ck = seq2seq::load_checkpoint(path());
    net = fresh_net(ck.run, 12345);
    seq2seq::TrainState state = seq2seq::restore_checkpoint(ck, *net);
    return train_with(*net, ck.run, stop_after, 0, &state);
  }

  // Rewrites path() after `edit` changes its tensors and metadata JSON,
  // with a new content digest (so that the load reaches the checks of the
  // content); with `keep_digest`, with the old one.
  void corrupt(const std::function<void(io::TensorMap&, nlohmann::json&)>& edit,
               bool keep_digest = false) {
    io::Metadata meta;
    io::TensorMap t = io::load_safetensors(path(), &meta);
    nlohmann::json j = nlohmann::json::parse(meta.at("checkpoint"));
    edit(t, j);
    meta["checkpoint"] = j.dump();
    if (keep_digest) {
      std::string digest = meta.at(io::kDigestKey);
      meta.erase(io::kDigestKey);
      std::string bytes = io::serialize_safetensors(t, meta, /*with_digest=*/true);
      // Put the old digest back in place of the new one (same length).
      io::Metadata now;
      io::parse_safetensors(bytes, "edited", &now);
      bytes.replace(bytes.find(now.at(io::kDigestKey)), digest.size(), digest);
      io::write_file_atomic(path(), bytes);
      return;
    }
    meta.erase(io::kDigestKey);
    io::save_safetensors(path(), t, meta, /*with_digest=*/true);
  }

  void expect_load_error(const std::string& needle) {
    try {
      seq2seq::load_checkpoint(path());
      ADD_FAILURE() << "no error; expected one containing: " << needle;
    } catch (const IOError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(path()), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }

  // Stopping after each step of `stops` and resuming in a "new process" gives
  // the very same losses, step by step, and the very same parameters as never
  // stopping.
  void expect_resume_bit_identical(const seq2seq::RunSpec& run,
                                   const seq2seq::TrainResult& straight,
                                   const std::map<std::string, std::vector<float>>& straight_params,
                                   const std::vector<std::int64_t>& stops) {
    seq2seq::TrainResult first = train_until(run, stops[0]);
    EXPECT_TRUE(first.stopped);
    EXPECT_EQ(first.steps, stops[0]);
    std::unique_ptr<nn::EncoderDecoder> net;
    for (std::size_t k = 1; k < stops.size(); ++k) {
      seq2seq::TrainResult mid = resume(net, stops[k]);
      EXPECT_TRUE(mid.stopped);
      EXPECT_EQ(mid.steps, stops[k]);
    }
    seq2seq::TrainResult last = resume(net);
    EXPECT_FALSE(last.stopped);
    EXPECT_EQ(last.steps, straight.steps);
    EXPECT_EQ(last.step_losses, straight.step_losses);  // exact
    EXPECT_EQ(last.epoch_losses, straight.epoch_losses);
    EXPECT_EQ(last.final_loss, straight.final_loss);
    EXPECT_EQ(last.tokens, straight.tokens);
    EXPECT_EQ(params_of(*net), straight_params);  // every parameter, exactly
  }

  int checkpoints_ = 0;
  std::vector<bool> lasts_;  // each checkpoint's `last`
};

}  // namespace

TEST_F(CheckpointTest, ResumeIsBitIdenticalWithOneThread) {
  const int threads = get_num_threads();
  set_num_threads(1);
  const auto run = tiny_run(4);  // 32 steps
  auto net = fresh_net(run, 7);
  seq2seq::TrainResult straight = train_with(*net, run, -1, 0, nullptr);
  auto straight_params = params_of(*net);
  ASSERT_EQ(straight.steps, 32);
  ASSERT_EQ(straight.step_losses.size(), 32u);
  for (std::vector<std::int64_t> stops :
       {std::vector<std::int64_t>{13}, {16}, {0}, {31}, {3, 11, 20, 27}}) {
    SCOPED_TRACE(::testing::Message() << "stops at " << ::testing::PrintToString(stops));
    expect_resume_bit_identical(run, straight, straight_params, stops);
  }
  set_num_threads(threads);
}

TEST_F(CheckpointTest, ResumeIsBitIdenticalWithTwoThreads) {
  const int threads = get_num_threads();
  set_num_threads(2);
  const auto run = tiny_run(3);
  auto net = fresh_net(run, 7);
  seq2seq::TrainResult straight = train_with(*net, run, -1, 0, nullptr);
  auto straight_params = params_of(*net);
  expect_resume_bit_identical(run, straight, straight_params, {5, 17});
  set_num_threads(threads);
}

// Checkpoints come before the first step, every N steps and after the last.
TEST_F(CheckpointTest, ScheduleAndFinalState) {
  const auto run = tiny_run(2);  // 16 steps
  seq2seq::TrainResult r = train_until(run, -1, 5);
  EXPECT_EQ(checkpoints_, 5);  // 0, 5, 10, 15, 16
  EXPECT_EQ(lasts_, (std::vector<bool>{false, false, false, false, true}));
  seq2seq::Checkpoint ck = seq2seq::load_checkpoint(path());
  EXPECT_EQ(ck.state.step, 16);
  EXPECT_EQ(ck.state.epoch, 2);
  EXPECT_EQ(ck.state.batch, 0);
  EXPECT_EQ(ck.state.adam_steps, 16);
  ASSERT_EQ(ck.state.step_loss.size(), 16u);
  for (std::size_t i = 0; i < 16; ++i)
    EXPECT_EQ(ck.state.step_loss[i] / ck.state.step_tokens[i], r.step_losses[i]);
  EXPECT_EQ(ck.run.train.num_epochs, 2);
  EXPECT_EQ(ck.run.train.batch_size, 8);
  EXPECT_EQ(ck.run.train.lr, run.train.lr);
  EXPECT_EQ(ck.run.train.seed, 5u);
  EXPECT_EQ(ck.run.data.fingerprint, run.data.fingerprint);
  EXPECT_EQ(ck.run.data.num_pairs, 61);
  EXPECT_EQ(ck.run.model.transformer.num_hiddens, 8);
  EXPECT_EQ(ck.run.model.transformer.dropout, 0.1);
  EXPECT_EQ(ck.exp_avg.size(), ck.parameters.size());
  EXPECT_EQ(ck.exp_avg_sq.size(), ck.parameters.size());

  // Resuming a finished run trains nothing and reports the same losses.
  std::unique_ptr<nn::EncoderDecoder> net;
  seq2seq::TrainResult again = resume(net);
  EXPECT_EQ(again.steps, 16);
  EXPECT_EQ(again.step_losses, r.step_losses);
  EXPECT_EQ(again.epoch_losses, r.epoch_losses);
  EXPECT_EQ(checkpoints_, 5);  // nothing new to save
}

// CheckpointWriter: each write() copies the checkpoint at once and the file
// then holds the state of that step, though training went on meanwhile:
// serialized on the training thread (small checkpoints) or copied, then
// serialized on the background thread (large ones, forced here); the last
// checkpoint is not copied.
TEST_F(CheckpointTest, BackgroundWriterWritesTheStateOfItsStep) {
  for (const std::int64_t from : {std::int64_t(64) << 20, std::int64_t(0)}) {
    SCOPED_TRACE(from);
    const std::int64_t saved = seq2seq::detail::set_checkpoint_snapshot_bytes(from);
    background_writer_writes_the_state_of_its_step();
    seq2seq::detail::set_checkpoint_snapshot_bytes(saved);
  }
}

void CheckpointTest::background_writer_writes_the_state_of_its_step() {
  const auto run = tiny_run(1);  // 8 steps
  auto net = fresh_net(run, 7);
  seq2seq::CheckpointWriter writer(path());
  std::vector<std::string> expected, written;
  std::vector<bool> lasts;
  seq2seq::TrainHooks hooks;
  hooks.checkpoint_every = 3;
  hooks.on_checkpoint = [&](const seq2seq::TrainState& s, bool last) {
    if (!expected.empty()) {  // the write before this one, on disk
      writer.finish();
      written.push_back(attn::testing::read_file(path()));
    }
    writer.write(*net, run, s, last);
    expected.push_back(seq2seq::checkpoint_bytes(*net, run, s));
    lasts.push_back(last);
  };
  // Stop after step 4: the step-0 checkpoint is written while steps 1-3 run
  // and the one of step 3 while step 4 runs; the last (step 4) after the
  // weights of steps 1-4 changed.
  std::int64_t step = 0;
  hooks.on_batch = [&](const seq2seq::Progress& p) { step = p.step; };
  hooks.should_stop = [&] { return step >= 4; };
  seq2seq::TrainResult r = seq2seq::train_seq2seq(*net, tiny_data(), run.train, hooks, nullptr);
  writer.finish();
  written.push_back(attn::testing::read_file(path()));
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(lasts, (std::vector<bool>{false, false, true}));  // steps 0, 3 and 4
  ASSERT_EQ(written.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(written[k], expected[k]) << "checkpoint " << k;
  EXPECT_NE(expected[0], expected[1]);
  EXPECT_EQ(seq2seq::load_checkpoint(path()).state.step, 4);
}

// Before Adam's first step its moments are zero and the checkpoint leaves
// them out; loading puts zeros back. A moment with a nonzero bit (even a
// -0.0), or a later step, keeps them all in.
TEST_F(CheckpointTest, ZeroMomentsAreLeftOutBeforeTheFirstStep) {
  const auto run = tiny_run(1);
  auto net = fresh_net(run, 7);
  const auto named = net->named_parameters();
  seq2seq::TrainState state;
  for (const auto& p : net->parameters()) {
    state.exp_avg.push_back(zeros_like(p));
    state.exp_avg_sq.push_back(zeros_like(p));
  }
  auto moments_in_file = [&] {
    int n = 0;
    for (const auto& [name, t] : io::load_safetensors(path())) n += name.rfind("adam.", 0) == 0;
    return n;
  };
  const int all = 2 * static_cast<int>(named.size());
  struct Case {
    std::int64_t adam_steps;
    float value;
    int moments;
  };
  for (const Case& c : {Case{0, 0.0f, 0}, Case{0, -0.0f, all}, Case{0, 1e-30f, all}}) {
    SCOPED_TRACE(c.value);
    state.adam_steps = c.adam_steps;
    state.exp_avg_sq[1].data<float>()[2] = c.value;
    seq2seq::save_checkpoint(path(), *net, run, state);
    EXPECT_EQ(moments_in_file(), c.moments);
    const seq2seq::Checkpoint ck = seq2seq::load_checkpoint(path());
    for (std::size_t k = 0; k < named.size(); ++k) {
      const Tensor& m = ck.exp_avg.at(named[k].first);
      const Tensor& v = ck.exp_avg_sq.at(named[k].first);
      ASSERT_EQ(m.shape(), named[k].second.shape());
      ASSERT_EQ(v.shape(), named[k].second.shape());
      EXPECT_EQ(std::memcmp(m.raw_data(), state.exp_avg[k].raw_data(), m.numel() * 4), 0);
      EXPECT_EQ(std::memcmp(v.raw_data(), state.exp_avg_sq[k].raw_data(), v.numel() * 4), 0);
      EXPECT_NE(m.storage(), v.storage());
    }
  }
  // Left out only at Adam's step 0 (a later state's moments are never all
  // zero in training; here they are, and stay in the file).
  state.exp_avg_sq[1].data<float>()[2] = 0.0f;
  state.adam_steps = 1;
  state.step = 1;
  state.batch = 1;
  state.step_loss = {1.0};
  state.step_tokens = {4.0};
  seq2seq::save_checkpoint(path(), *net, run, state);
  EXPECT_EQ(moments_in_file(), all);
  // The background writer's file is the same bytes.
  state = seq2seq::TrainState{};
  for (const auto& p : net->parameters()) {
    state.exp_avg.push_back(zeros_like(p));
    state.exp_avg_sq.push_back(zeros_like(p));
  }
  const std::int64_t saved = seq2seq::detail::set_checkpoint_snapshot_bytes(0);
  seq2seq::CheckpointWriter writer(path());
  writer.write(*net, run, state);
  writer.finish();
  seq2seq::detail::set_checkpoint_snapshot_bytes(saved);
  EXPECT_EQ(attn::testing::read_file(path()), seq2seq::checkpoint_bytes(*net, run, state));
  EXPECT_EQ(moments_in_file(), 0);
}

// A write that fails on the background thread (here: its directory is gone)
// is an error of the next write() or of finish(), naming the file.
TEST_F(CheckpointTest, BackgroundWriterReportsAFailedWrite) {
  const auto run = tiny_run(1);
  auto net = fresh_net(run, 7);
  seq2seq::TrainState state;
  state.exp_avg.clear();
  for (const auto& p : net->parameters()) {
    state.exp_avg.push_back(zeros_like(p));
    state.exp_avg_sq.push_back(zeros_like(p));
  }
  const std::string missing = (dir_ / "gone" / seq2seq::kCheckpointFile).string();
  {
    seq2seq::CheckpointWriter writer(missing);
    writer.write(*net, run, state);
    try {
      writer.finish();
      ADD_FAILURE() << "no error from a write into a missing directory";
    } catch (const IOError& e) {
      EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    }
    writer.finish();  // the error is reported once
  }
  seq2seq::CheckpointWriter writer(missing);
  writer.write(*net, run, state);
  EXPECT_THROW(writer.write(*net, run, state), IOError);
  EXPECT_FALSE(std::filesystem::exists(missing));
}

TEST_F(CheckpointTest, StopBeforeTheFirstStep) {
  const auto run = tiny_run(2);
  seq2seq::TrainResult r = train_until(run, 0);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.steps, 0);
  EXPECT_EQ(checkpoints_, 1);
  EXPECT_EQ(seq2seq::load_checkpoint(path()).state.step, 0);
}

// More epochs than the checkpoint's run: training goes on from where it was.
TEST_F(CheckpointTest, ResumeWithMoreEpochs) {
  auto longer = tiny_run(3);
  auto net = fresh_net(longer, 7);
  seq2seq::TrainResult straight = train_with(*net, longer, -1, 0, nullptr);
  train_until(tiny_run(2), -1);
  seq2seq::Checkpoint ck = seq2seq::load_checkpoint(path());
  ck.run.train.num_epochs = 3;
  auto net2 = fresh_net(ck.run, 99);
  seq2seq::TrainState s = seq2seq::restore_checkpoint(ck, *net2);
  seq2seq::TrainResult r = train_with(*net2, ck.run, -1, 0, &s);
  EXPECT_EQ(r.step_losses, straight.step_losses);
  EXPECT_EQ(params_of(*net2), params_of(*net));
}

// A state that does not fit the run is refused by the trainer.
TEST_F(CheckpointTest, TrainerRefusesAStateThatDoesNotFit) {
  const auto run = tiny_run(2);
  train_until(run, 5);
  seq2seq::Checkpoint ck = seq2seq::load_checkpoint(path());
  auto net = fresh_net(ck.run, 1);
  seq2seq::TrainState s = seq2seq::restore_checkpoint(ck, *net);
  auto expect_refused = [&](seq2seq::TrainState bad, seq2seq::TrainOptions o, const char* needle) {
    try {
      seq2seq::train_seq2seq(*net, tiny_data(), o, seq2seq::TrainHooks{}, &bad);
      ADD_FAILURE() << "no error; expected " << needle;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  seq2seq::TrainOptions o = ck.run.train;
  auto bad = s;
  bad.exp_avg.pop_back();
  expect_refused(bad, o, "Adam moments");
  bad = s;
  bad.exp_avg[0] = zeros({3}, DType::f32);
  expect_refused(bad, o, "Adam moment");
  bad = s;
  bad.step = 6;
  expect_refused(bad, o, "step 6");
  auto other = o;
  other.batch_size = 16;
  expect_refused(s, other, "batches per epoch");
  bad = s;
  bad.step_loss.pop_back();
  expect_refused(bad, o, "step records");
  other = o;
  other.num_epochs = 1;
  bad = s;
  bad.epoch = 1;
  bad.batch = 5;
  bad.step = 13;
  expect_refused(bad, other, "epoch 2 of a run of 1");
}

// A run's identity goes into its checkpoint and comes back; it is the
// spec's: the same for the same spec, another for another.
TEST_F(CheckpointTest, RunIdRoundTrips) {
  seq2seq::RunSpec run = tiny_run(1);
  run.run_id = seq2seq::run_id_of(run);
  EXPECT_TRUE(seq2seq::is_run_id(run.run_id)) << run.run_id;
  EXPECT_EQ(run.run_id, seq2seq::run_id_of(tiny_run(1)));
  seq2seq::RunSpec other = tiny_run(1);
  other.model.transformer.num_hiddens *= 2;
  EXPECT_NE(run.run_id, seq2seq::run_id_of(other));
  other = tiny_run(1);
  other.data.fingerprint ^= 1;
  EXPECT_NE(run.run_id, seq2seq::run_id_of(other));
  train_until(run, 3);
  EXPECT_EQ(seq2seq::load_checkpoint(path()).run.run_id, run.run_id);
  EXPECT_FALSE(seq2seq::is_run_id("0123"));
  EXPECT_FALSE(seq2seq::is_run_id(std::string(32, 'G')));
}

TEST(Checkpoint, DataFingerprintSeesTheData) {
  data::NmtOptions o;
  o.num_examples = 61;
  auto other = data::load_data_nmt(kCorpus, o);
  EXPECT_NE(seq2seq::data_fingerprint(other), seq2seq::data_fingerprint(tiny_data()));
  EXPECT_EQ(seq2seq::data_fingerprint(tiny_data()), seq2seq::data_fingerprint(tiny_data()));
}

// ---- a checkpoint is checked before it is trusted ----

TEST_F(CheckpointTest, MissingTruncatedOrNotACheckpoint) {
  EXPECT_THROW(seq2seq::load_checkpoint(path()), IOError);  // missing
  train_until(tiny_run(1), 3);
  std::string bytes = attn::testing::read_file(path());
  for (std::size_t keep :
       {std::size_t{0}, std::size_t{7}, std::size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    io::write_file_atomic(path(), std::string_view(bytes).substr(0, keep));
    try {
      seq2seq::load_checkpoint(path());
      ADD_FAILURE() << "a checkpoint cut to " << keep << " bytes loaded";
    } catch (const IOError& e) {
      EXPECT_NE(std::string(e.what()).find(path()), std::string::npos) << e.what();
    }
  }
  // A model's weights file is not a checkpoint.
  auto net = fresh_net(tiny_run(1), 1);
  io::TensorMap w;
  for (auto& [name, p] : net->named_parameters()) w.emplace(name, p.detach());
  io::save_safetensors(path(), w, {{"format", "pt"}});
  expect_load_error("not an attn checkpoint");
}

// An edit of a checkpoint that keeps its content digest — a hyperparameter
// in the metadata whose new value the weights still fit, or one weight — is
// refused: the digest no longer matches.
TEST_F(CheckpointTest, EditsBehindTheDigestAreRefused) {
  train_until(tiny_run(2), 11);
  const std::string good = attn::testing::read_file(path());
  corrupt([](auto&, auto& j) { j["model"]["num_heads"] = 1; }, /*keep_digest=*/true);
  expect_load_error("the content does not match the sha256 in its metadata");
  io::write_file_atomic(path(), good);
  corrupt(
      [](auto& t, auto&) {
        Tensor w = t["decoder.dense.weight"].clone();
        w.data<float>()[0] += 1e-3f;
        t["decoder.dense.weight"] = w;
      },
      /*keep_digest=*/true);
  expect_load_error("the content does not match the sha256 in its metadata");
  // Resealed with a new digest, the same num_heads edit loads (its shapes fit).
  io::write_file_atomic(path(), good);
  corrupt([](auto&, auto& j) { j["model"]["num_heads"] = 1; });
  EXPECT_EQ(seq2seq::load_checkpoint(path()).run.model.transformer.num_heads, 1);
  // Without any digest: refused as a checkpoint of an older attn.
  io::Metadata meta;
  io::TensorMap t = io::load_safetensors(path(), &meta);
  meta.erase(io::kDigestKey);
  io::save_safetensors(path(), t, meta);
  expect_load_error("has no sha256");
}

TEST_F(CheckpointTest, MetadataIsValidated) {
  train_until(tiny_run(2), 11);
  const std::string good = attn::testing::read_file(path());
  struct Case {
    const char* needle;
    std::function<void(io::TensorMap&, nlohmann::json&)> edit;
  };
  const std::vector<Case> cases = {
      {"format_version", [](auto&, auto& j) { j["format_version"] = 2; }},
      {"missing \"state\"", [](auto&, auto& j) { j.erase("state"); }},
      {"missing \"state.rng_offset\"", [](auto&, auto& j) { j["state"].erase("rng_offset"); }},
      {"\"state.step\" must be an integer", [](auto&, auto& j) { j["state"]["step"] = "11"; }},
      {"\"state.rng_seed\" must be a whole number",
       [](auto&, auto& j) { j["state"]["rng_seed"] = -1; }},
      {"\"state.step\" = 12 does not match", [](auto&, auto& j) { j["state"]["step"] = 12; }},
      {"\"state.batch\" = 9 is outside", [](auto&, auto& j) { j["state"]["batch"] = 9; }},
      {"\"state.adam_steps\" = 10", [](auto&, auto& j) { j["state"]["adam_steps"] = 10; }},
      {"\"state.seconds\"", [](auto&, auto& j) { j["state"]["seconds"] = nullptr; }},
      {"\"train.lr\"", [](auto&, auto& j) { j["train"]["lr"] = 0; }},
      {"\"train.batch_size\"", [](auto&, auto& j) { j["train"]["batch_size"] = 2.5; }},
      {"expected \"train\" to be a JSON object", [](auto&, auto& j) { j["train"] = 1; }},
      {"\"data.fingerprint\"", [](auto&, auto& j) { j["data"]["fingerprint"] = "xyz"; }},
      {"\"data.path\"", [](auto&, auto& j) { j["data"]["path"] = ""; }},
      {"lacks the \"model\"", [](auto&, auto& j) { j.erase("model"); }},
      {"\"run_id\" must be 32 lower-case hex digits",
       [](auto&, auto& j) { j["run_id"] = "not-an-id"; }},
      {"num_hiddens", [](auto&, auto& j) { j["model"].erase("num_hiddens"); }},
      // The config says 16 hiddens, the tensors have 8: named.
      {"encoder", [](auto&, auto& j) { j["model"]["num_hiddens"] = 16; }},
      {"'adam.exp_avg_sq.encoder.embedding.weight' (Adam's state) is missing",
       [](auto& t, auto&) { t.erase("adam.exp_avg_sq.encoder.embedding.weight"); }},
      {"'adam.exp_avg.encoder.embedding.weight' must be F32 of shape",
       [](auto& t, auto&) {
         t["adam.exp_avg.encoder.embedding.weight"] = zeros({2, 2});
       }},
      {"'adam.exp_avg.decoder.dense.weight' holds nan",
       [](auto& t, auto&) {
         Tensor m = t["adam.exp_avg.decoder.dense.weight"].clone();
         m.data<float>()[3] = NAN;
         t["adam.exp_avg.decoder.dense.weight"] = m;
       }},
      {"'adam.exp_avg_sq.decoder.dense.weight' holds -1",
       [](auto& t, auto&) {
         Tensor m = t["adam.exp_avg_sq.decoder.dense.weight"].clone();
         m.data<float>()[0] = -1;
         t["adam.exp_avg_sq.decoder.dense.weight"] = m;
       }},
      {"'train.step_loss' must be F64 of shape (11)",
       [](auto& t, auto&) { t["train.step_loss"] = zeros({10}, DType::f64); }},
      {"'train.step_tokens' holds -1",
       [](auto& t, auto&) { t["train.step_tokens"] = full({11}, -1.0, DType::f64); }},
      {"'train.step_tokens' holds 2.5",
       [](auto& t, auto&) { t["train.step_tokens"] = full({11}, 2.5, DType::f64); }},
      {"step 1 has loss",  // over 0 tokens; the recorded losses are positive
       [](auto& t, auto&) { t["train.step_tokens"] = zeros({11}, DType::f64); }},
      {"'train.step_loss' is missing", [](auto& t, auto&) { t.erase("train.step_loss"); }},
      {"unexpected tensor 'adam.exp_avg.nope'",
       [](auto& t, auto&) { t["adam.exp_avg.nope"] = zeros({1}); }},
      {"must be F32",
       [](auto& t, auto&) {
         t["decoder.dense.weight"] = t["decoder.dense.weight"].to(DType::f64);
       }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.needle);
    io::write_file_atomic(path(), good);
    corrupt(c.edit);
    expect_load_error(c.needle);
  }
  // A step whose batch had only <pad> targets (0 tokens, loss 0) is valid.
  io::write_file_atomic(path(), good);
  corrupt([](auto& t, auto&) {
    for (const char* name : {"train.step_tokens", "train.step_loss"}) {
      Tensor r = t[name].clone();
      r.template data<double>()[4] = 0;
      t[name] = r;
    }
  });
  seq2seq::Checkpoint padded = seq2seq::load_checkpoint(path());
  EXPECT_EQ(padded.state.step_tokens[4], 0.0);
  // The metadata itself: not JSON, a key given twice, not a checkpoint.
  auto with_meta = [&](const std::string& text) {
    io::write_file_atomic(path(), good);
    io::Metadata meta;
    io::TensorMap t = io::load_safetensors(path(), &meta);
    meta["checkpoint"] = text;
    meta.erase(io::kDigestKey);
    io::save_safetensors(path(), t, meta, /*with_digest=*/true);
  };
  with_meta("{\"format_version\": 1,");
  expect_load_error("not valid JSON");
  with_meta("{\"format_version\": 1, \"format_version\": 1}");
  expect_load_error("\"format_version\" appears twice");
  with_meta("[1, 2]");
  expect_load_error("expected a JSON object");
  // And the untouched file still loads.
  io::write_file_atomic(path(), good);
  EXPECT_EQ(seq2seq::load_checkpoint(path()).state.step, 11);
}
