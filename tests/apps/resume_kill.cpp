// The crash test of checkpoints: `attn train` killed with SIGKILL at random
// moments (also while it writes a checkpoint), interrupted with SIGINT and
// SIGTERM, and resumed each time; every checkpoint it leaves must load, and
// every resumed run must end bit-identical (losses of every step, every
// parameter, Adam's state, the model file) to a run that was never stopped.
//
//   resume_kill <attn executable> [--kills=N] [gtest flags]
//
// ATTN_KILL_SEED=<n> repeats the random kill times of an earlier run (the seed
// is printed).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <set>
#include <thread>

#include "attn/seq2seq/checkpoint.h"
#include "spawn.h"
#include "testing.h"

using namespace attn;
namespace fs = std::filesystem;

namespace {

std::string g_attn;
int g_kills = 24;
const std::string kCorpus = std::string(ATTN_SOURCE_DIR) + "/datasets/fra-eng/fra.txt.gz";

// A tiny model on 61 pairs: 10 epochs of 8 batches, a checkpoint after every step.
std::vector<std::string> train_args(const fs::path& out, std::int64_t checkpoint_every = 1) {
  return {"--threads",
          "1",
          "train",
          "--data",
          kCorpus,
          "--num-examples",
          "60",
          "--epochs",
          "10",
          "--batch-size",
          "8",
          "--num-hiddens",
          "8",
          "--num-heads",
          "2",
          "--ffn-num-hiddens",
          "16",
          "--num-layers",
          "1",
          "--quiet",
          "--overwrite",  // a kill before the first checkpoint leaves a model to replace
          "--checkpoint-every",
          std::to_string(checkpoint_every),
          "--out",
          out.string()};
}

std::vector<std::string> resume_args(const fs::path& dir) {
  return {"--threads", "1", "train", "--resume", dir.string(), "--quiet"};
}

pid_t spawn_attn(const std::vector<std::string>& args, const fs::path& log_stem) {
  return attn::testing::spawn_attn(g_attn, args, log_stem);
}

int run_attn(const std::vector<std::string>& args, const fs::path& log_stem) {
  return attn::testing::run_attn(g_attn, args, log_stem);
}

using attn::testing::seconds_since;
using attn::testing::wait_status;

// The checkpoint's temp files in `dir` (a write in progress, or one a kill cut).
std::set<std::string> temp_files(const fs::path& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(".checkpoint.safetensors.tmp.", 0) == 0)
      out.insert(e.path().filename().string());
  return out;
}

bool has_temp_file(const fs::path& dir) { return !temp_files(dir).empty(); }

// A temp file in `dir` that is not one of `before` (those an earlier kill left):
// the write of the run started after `before` was taken. Empty when none.
std::string new_temp_file(const fs::path& dir, const std::set<std::string>& before) {
  for (const std::string& f : temp_files(dir))
    if (!before.count(f)) return f;
  return {};
}

// After a SIGKILL at any moment: the checkpoint on disk loads and is never
// older than the one before. Returns its step.
std::int64_t expect_whole_checkpoint(const fs::path& ckpt, std::int64_t last_step,
                                     const std::string& label) {
  seq2seq::Checkpoint ck;
  EXPECT_NO_THROW(ck = seq2seq::load_checkpoint(ckpt.string())) << label;
  EXPECT_GE(ck.state.step, last_step) << label;
  return ck.state.step;
}

// What must be equal between a resumed run and the reference.
struct Outcome {
  std::string model_bytes;
  seq2seq::Checkpoint checkpoint;
};

Outcome outcome_of(const fs::path& dir) {
  Outcome o;
  o.model_bytes = attn::testing::read_file(dir / "model.safetensors");
  o.checkpoint = seq2seq::load_checkpoint((dir / seq2seq::kCheckpointFile).string());
  return o;
}

void expect_same_tensors(const io::TensorMap& a, const io::TensorMap& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    ASSERT_NE(it, b.end()) << what << " " << name;
    EXPECT_EQ(to_vector<float>(t), to_vector<float>(it->second)) << what << " " << name;
  }
}

void expect_same_outcome(const Outcome& got, const Outcome& want, const std::string& label) {
  SCOPED_TRACE(label);
  const auto &g = got.checkpoint, &w = want.checkpoint;
  EXPECT_EQ(g.state.step, w.state.step);
  EXPECT_EQ(g.state.epoch, w.state.epoch);
  EXPECT_EQ(g.state.step_loss, w.state.step_loss);  // every step's loss, exactly
  EXPECT_EQ(g.state.step_tokens, w.state.step_tokens);
  EXPECT_EQ(g.state.rng_offset, w.state.rng_offset);
  EXPECT_EQ(g.state.shuffle_offset, w.state.shuffle_offset);
  expect_same_tensors(g.parameters, w.parameters, "parameter");
  expect_same_tensors(g.exp_avg, w.exp_avg, "exp_avg");
  expect_same_tensors(g.exp_avg_sq, w.exp_avg_sq, "exp_avg_sq");
  EXPECT_TRUE(got.model_bytes == want.model_bytes) << "model.safetensors differs";
}

class ResumeKill : public attn::testing::TempDirTest {
 protected:
  // The uninterrupted run, once per process.
  static const Outcome& reference(double* seconds = nullptr) {
    static double ref_seconds = 0;
    static const Outcome ref = [] {
      fs::path dir =
          fs::temp_directory_path() / ("attn_resume_kill_ref_" + std::to_string(getpid()));
      fs::remove_all(dir);
      fs::create_directories(dir);
      auto t0 = std::chrono::steady_clock::now();
      int rc = run_attn(train_args(dir / "model"), dir / "ref");
      ref_seconds = seconds_since(t0);
      EXPECT_EQ(rc, 0) << attn::testing::read_file(dir / "ref.err");
      Outcome o = outcome_of(dir / "model");
      fs::remove_all(dir);
      return o;
    }();
    if (seconds) *seconds = ref_seconds;
    return ref;
  }

  static std::uint64_t kill_seed() {
    if (const char* s = std::getenv("ATTN_KILL_SEED")) return std::strtoull(s, nullptr, 10);
    return std::random_device{}();
  }

  std::string err_of(const fs::path& stem) {
    return attn::testing::read_file(stem.string() + ".err");
  }
};

}  // namespace

// SIGKILL at random moments, many times, over runs and resumed runs: after
// every kill the checkpoint (if one was written yet) loads, and the run
// resumed to its end equals the reference.
TEST_F(ResumeKill, SigkillAtRandomMoments) {
  double ref_seconds = 0;
  const Outcome& ref = reference(&ref_seconds);
  ASSERT_EQ(ref.checkpoint.state.step, 80);
  const std::uint64_t seed = kill_seed();
  std::mt19937_64 rng(seed);
  // Delays cover the life of a run: start-up, steps, checkpoint writes (most
  // of a step's time here) and, for resumed runs near the end, the outputs.
  // A chain of runs is killed up to kMaxKillsPerChain times, then left to
  // finish.
  std::uniform_real_distribution<double> delay(0.0, 0.7 * ref_seconds);
  std::printf("reference run %.2f s; kill seed %llu (ATTN_KILL_SEED repeats it)\n", ref_seconds,
              static_cast<unsigned long long>(seed));

  int kills = 0, kills_before_checkpoint = 0, kills_mid_write = 0, kills_after_training = 0;
  int resumes = 0, chains = 0;
  const int kMaxKillsPerChain = 8;
  while (kills < g_kills) {
    fs::path dir = dir_ / fmt::format("chain{}", chains++);
    fs::create_directories(dir);
    const fs::path model = dir / "model";
    const fs::path ckpt = model / seq2seq::kCheckpointFile;
    std::int64_t last_step = -1;
    bool finished = false;
    for (int attempt = 0; !finished; ++attempt) {
      const bool resume = fs::exists(ckpt);
      resumes += resume;
      const std::set<std::string> before = temp_files(model);  // left by an earlier kill
      const fs::path stem = dir / fmt::format("run{}", attempt);
      pid_t pid = spawn_attn(resume ? resume_args(model) : train_args(model), stem);
      ASSERT_GT(pid, 0);
      if (attempt < kMaxKillsPerChain && kills < g_kills) {
        std::this_thread::sleep_for(std::chrono::duration<double>(delay(rng)));
        kill(pid, SIGKILL);  // a zombie, if it already exited: no effect
      }
      const int st = wait_status(pid);
      if (WIFSIGNALED(st)) {
        ASSERT_EQ(WTERMSIG(st), SIGKILL) << err_of(stem);
        ++kills;
        if (!fs::exists(ckpt)) {
          ++kills_before_checkpoint;
          continue;
        }
        kills_mid_write += !new_temp_file(model, before).empty();
        last_step = expect_whole_checkpoint(ckpt, last_step, fmt::format("after kill {}", kills));
        kills_after_training += last_step == ref.checkpoint.state.step;
      } else {
        ASSERT_TRUE(WIFEXITED(st));
        ASSERT_EQ(WEXITSTATUS(st), 0) << err_of(stem);
        finished = true;
      }
    }
    expect_same_outcome(outcome_of(model), ref, dir.filename().string());
    EXPECT_FALSE(has_temp_file(model)) << "a finished run left a temp file";
  }
  std::printf(
      "%d SIGKILLs in %d chains of runs: %d before the first checkpoint, %d while a checkpoint "
      "was being written (a temp file left), %d after the last step; %d resumes; every chain's "
      "final model and losses bit-identical to the reference\n",
      kills, chains, kills_before_checkpoint, kills_mid_write, kills_after_training, resumes);
  EXPECT_GE(kills, g_kills);

  // Kills aimed at a checkpoint write. The random delays above may miss every
  // write (one takes a few milliseconds), so these chains kill each run the
  // moment a new temp file appears next to a checkpoint already on disk, until
  // a kill lands inside a write: that kill leaves the new temp file behind, the
  // checkpoint still loads, and the chain still ends equal to the reference.
  // A short run has few writes and a loaded machine may let each one finish
  // before the kill arrives, so a chain whose training ends without such a
  // kill is followed by a fresh one, for up to 100 runs in all.
  constexpr int kMaxAimedRuns = 100;
  int aimed = 0, aimed_mid_write = 0, aimed_runs = 0, aimed_chains = 0;
  while (aimed_mid_write == 0 && aimed_runs < kMaxAimedRuns) {
    const fs::path dir = dir_ / fmt::format("aimed{}", aimed_chains++), model = dir / "model",
                   ckpt = model / seq2seq::kCheckpointFile;
    fs::create_directories(dir);
    std::int64_t last_step = -1;
    for (int attempt = 0;; ++attempt) {
      const std::set<std::string> before = temp_files(model);  // left by an earlier kill
      const fs::path stem = dir / fmt::format("run{}", attempt);
      pid_t pid = spawn_attn(fs::exists(ckpt) ? resume_args(model) : train_args(model), stem);
      ASSERT_GT(pid, 0);
      ++aimed_runs;
      int st = 0;
      bool exited = false;
      std::string written;  // the temp file of the write the kill aims at
      if (aimed_mid_write == 0) {
        for (auto t0 = std::chrono::steady_clock::now();
             written.empty() && seconds_since(t0) < 10;) {
          if (waitpid(pid, &st, WNOHANG) == pid) {
            exited = true;
            break;
          }
          if (fs::exists(ckpt)) written = new_temp_file(model, before);
        }
        if (!exited) kill(pid, SIGKILL);
      }
      if (!exited) st = wait_status(pid);
      if (!WIFSIGNALED(st)) {
        ASSERT_TRUE(WIFEXITED(st));
        ASSERT_EQ(WEXITSTATUS(st), 0) << err_of(stem);
        break;
      }
      ASSERT_EQ(WTERMSIG(st), SIGKILL) << err_of(stem);
      ++aimed;
      aimed_mid_write += !written.empty() && fs::exists(model / written);
      last_step =
          expect_whole_checkpoint(ckpt, last_step, fmt::format("after aimed kill {}", aimed));
    }
    expect_same_outcome(outcome_of(model), ref, dir.filename().string());
    EXPECT_FALSE(has_temp_file(model)) << "a finished run left a temp file";
  }
  std::printf("%d kills aimed at checkpoint writes in %d chains (%d runs), %d inside one\n", aimed,
              aimed_chains, aimed_runs, aimed_mid_write);
  EXPECT_GE(aimed_mid_write, 1) << "no aimed kill landed inside a checkpoint write in "
                                << aimed_runs << " runs";
}

// SIGINT / SIGTERM: the step in progress ends, a checkpoint is written, one
// line says how to resume, and the exit code is 128 + the signal; resuming
// gives the reference. `twice` sends the signal again at once (immediate exit).
void signal_and_resume(const fs::path& dir, int sig, bool twice, const Outcome& ref) {
  const fs::path model = dir / "model", ckpt = model / seq2seq::kCheckpointFile;
  pid_t pid = spawn_attn(train_args(model), dir / "run");
  ASSERT_GT(pid, 0);
  // The checkpoint of step 0 is written once the handlers are in place; wait
  // for the one of step 1 (a new file replaces it), so that the signal comes
  // in the middle of training (80 steps of about 10-20 ms each are left).
  auto t0 = std::chrono::steady_clock::now();
  ino_t first = 0;
  for (;;) {
    struct stat sb {};
    if (::stat(ckpt.c_str(), &sb) == 0) {
      if (first == 0) first = sb.st_ino;
      if (sb.st_ino != first) break;
    }
    ASSERT_LT(seconds_since(t0), 120) << "no checkpoint after step 1";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, sig);
  int st = 0;
  if (twice) {
    // More of the same signal, every millisecond, while the first one is
    // handled (finishing the step and writing the checkpoint takes longer):
    // the second that arrives exits at once, wherever it lands.
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      pid_t done = waitpid(pid, &st, WNOHANG);
      if (done == pid) break;
      kill(pid, sig);
    }
  } else {
    st = wait_status(pid);
  }
  ASSERT_TRUE(WIFEXITED(st)) << "killed by signal " << WTERMSIG(st);
  EXPECT_EQ(WEXITSTATUS(st), 128 + sig);
  std::string err = attn::testing::read_file(dir / "run.err");
  seq2seq::Checkpoint ck;
  ASSERT_NO_THROW(ck = seq2seq::load_checkpoint(ckpt.string()));
  EXPECT_LT(ck.state.step, 80) << "the signal came after the end of training";
  const bool again =
      err.find("attn: interrupted again; exiting without a new checkpoint\n") != std::string::npos;
  EXPECT_EQ(again, twice) << err;
  if (!again) {
    EXPECT_GT(ck.state.step, 0);
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find(fmt::format("attn: {} after step {} of 80; checkpoint saved in {}; ",
                                   sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)",
                                   ck.state.step, ckpt.string())),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("resume with: attn train --resume " + model.string() + "\n"),
              std::string::npos)
        << err;
  }
  EXPECT_EQ(run_attn(resume_args(model), dir / "resume"), 0)
      << attn::testing::read_file(dir / "resume.err");
  expect_same_outcome(outcome_of(model), ref, "resumed");
}

// The translator's recipe (a SentencePiece model, token batches, label
// smoothing, warmup, validation every 3 steps with early stopping after 2
// validations without improvement), SIGKILLed at random moments and resumed:
// every chain ends with the reference's model (the best one), checkpoint,
// validations and held-out split, bit for bit.
TEST_F(ResumeKill, TranslatorWithValidationAndEarlyStopping) {
  auto args = [](const fs::path& out) -> std::vector<std::string> {
    return {"--threads",   "1",
            "train",       "--preset",
            "tatoeba",     "--data",
            kCorpus,       "--num-examples",
            "300",         "--valid-size",
            "20",          "--test-size",
            "20",          "--vocab-size",
            "150",         "--num-hiddens",
            "16",          "--num-heads",
            "2",           "--ffn-num-hiddens",
            "32",          "--num-layers",
            "1",           "--batch-tokens",
            "600",         "--lr-warmup",
            "4",           "--epochs",
            "8",           "--valid-freq",
            "3",           "--early-stopping",
            "2",           "--checkpoint-every",
            "1",           "--quiet",
            "--overwrite", "--out",
            out.string()};
  };
  auto read = [](const fs::path& p) { return attn::testing::read_file(p); };
  const fs::path ref_dir = dir_ / "ref";
  fs::create_directories(ref_dir);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run_attn(args(ref_dir / "model"), ref_dir / "run"), 0) << err_of(ref_dir / "run");
  const double ref_seconds = seconds_since(t0);
  const Outcome ref = outcome_of(ref_dir / "model");
  const auto& rs = ref.checkpoint.state;
  ASSERT_GE(rs.validations.size(), 3u);
  std::printf("translator reference: %.2f s, %lld steps, %zu validations, best %lld%s\n",
              ref_seconds, static_cast<long long>(rs.step), rs.validations.size(),
              static_cast<long long>(rs.best), rs.stalls >= 2 ? ", stopped early" : "");

  std::mt19937_64 rng(kill_seed());
  std::uniform_real_distribution<double> delay(0.0, 0.8 * ref_seconds);
  int kills = 0;
  for (int chain = 0; chain < 3; ++chain) {
    const fs::path dir = dir_ / fmt::format("tchain{}", chain), model = dir / "model";
    const fs::path ckpt = model / seq2seq::kCheckpointFile;
    fs::create_directories(dir);
    for (int attempt = 0;; ++attempt) {
      ASSERT_LT(attempt, 12);
      const fs::path stem = dir / fmt::format("run{}", attempt);
      pid_t pid = spawn_attn(fs::exists(ckpt) ? resume_args(model) : args(model), stem);
      ASSERT_GT(pid, 0);
      if (attempt < 3) {
        std::this_thread::sleep_for(std::chrono::duration<double>(delay(rng)));
        kill(pid, SIGKILL);
      }
      const int st = wait_status(pid);
      if (WIFSIGNALED(st)) {
        ++kills;
        continue;
      }
      ASSERT_TRUE(WIFEXITED(st));
      ASSERT_EQ(WEXITSTATUS(st), 0) << err_of(stem);
      break;
    }
    const Outcome got = outcome_of(model);
    expect_same_outcome(got, ref, dir.filename().string());
    const auto& gs = got.checkpoint.state;
    ASSERT_EQ(gs.validations.size(), rs.validations.size());
    for (std::size_t i = 0; i < rs.validations.size(); ++i) {
      EXPECT_EQ(gs.validations[i].step, rs.validations[i].step) << i;
      EXPECT_EQ(gs.validations[i].loss, rs.validations[i].loss) << i;
      EXPECT_EQ(gs.validations[i].bleu, rs.validations[i].bleu) << i;
    }
    EXPECT_EQ(gs.best, rs.best);
    EXPECT_EQ(gs.stalls, rs.stalls);
    for (const char* f : {"spm.model", "data/train.tsv", "data/valid.tsv", "data/test.tsv"})
      EXPECT_TRUE(read(model / f) == read(ref_dir / "model" / f)) << f << " differs";
  }
  std::printf("%d SIGKILLs over 3 chains; every chain bit-identical to the reference\n", kills);
}

TEST_F(ResumeKill, SigintCheckpointsAndExits130) {
  signal_and_resume(dir_, SIGINT, false, reference());
}

TEST_F(ResumeKill, SigtermCheckpointsAndExits143) {
  signal_and_resume(dir_, SIGTERM, false, reference());
}

TEST_F(ResumeKill, SecondSigintExitsAtOnce) { signal_and_resume(dir_, SIGINT, true, reference()); }

// A missing or damaged checkpoint: one line naming the file, exit 1, and the
// file is left as it was.
TEST_F(ResumeKill, DamagedCheckpointIsRefused) {
  const fs::path model = dir_ / "model", ckpt = model / seq2seq::kCheckpointFile;
  ASSERT_EQ(run_attn(train_args(model), dir_ / "train"), 0);
  const std::string good = attn::testing::read_file(ckpt);
  auto expect_refused = [&](const std::string& bytes, const std::string& needle) {
    { std::ofstream(ckpt, std::ios::binary | std::ios::trunc) << bytes; }
    EXPECT_EQ(run_attn(resume_args(model), dir_ / "resume"), 1);
    std::string err = attn::testing::read_file(dir_ / "resume.err");
    EXPECT_EQ(err.rfind("attn: error: ", 0), 0u) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find(needle), std::string::npos) << err;
    EXPECT_EQ(attn::testing::read_file(ckpt), bytes) << "the checkpoint was changed";
  };
  expect_refused(good.substr(0, good.size() / 2), ckpt.string());
  expect_refused(good.substr(0, 5), ckpt.string());
  expect_refused("", ckpt.string());
  std::string flipped = good;
  flipped[10] = '}';  // inside the JSON header
  expect_refused(flipped, ckpt.string());
  fs::remove(ckpt);
  EXPECT_EQ(run_attn(resume_args(model), dir_ / "resume"), 1);
  std::string err = attn::testing::read_file(dir_ / "resume.err");
  EXPECT_EQ(err, "attn: error: cannot resume: '" + ckpt.string() + "' does not exist\n");
  EXPECT_EQ(run_attn({"train", "--resume", (dir_ / "nope").string()}, dir_ / "resume"), 1);
  EXPECT_NE(attn::testing::read_file(dir_ / "resume.err").find("does not exist"),
            std::string::npos);
}

// Flags that contradict the checkpoint are usage errors (exit 2); those that
// agree with it are fine.
TEST_F(ResumeKill, ContradictingFlagsAreRefused) {
  const fs::path model = dir_ / "model";
  ASSERT_EQ(run_attn({"--threads", "1",
                      "train",     "--data",
                      kCorpus,     "--num-examples",
                      "60",        "--epochs",
                      "1",         "--batch-size",
                      "8",         "--num-hiddens",
                      "8",         "--num-heads",
                      "2",         "--ffn-num-hiddens",
                      "16",        "--num-layers",
                      "1",         "--quiet",
                      "--out",     model.string()},
                     dir_ / "train"),
            0);
  auto refused = [&](std::vector<std::string> extra, const std::string& needle) {
    auto a = resume_args(model);
    a.insert(a.end(), extra.begin(), extra.end());
    EXPECT_EQ(run_attn(a, dir_ / "resume"), 2);
    std::string err = attn::testing::read_file(dir_ / "resume.err");
    EXPECT_NE(err.find(needle), std::string::npos) << err;
  };
  refused({"--lr", "0.01"}, "--lr: 0.01 differs from the checkpoint's 0.005");
  refused({"--num-hiddens", "16"}, "--num-hiddens: 16 differs");
  refused({"--out", (dir_ / "elsewhere").string()}, "is not the directory of --resume");
  // Agreeing flags, --epochs to train longer, and the same --out are accepted.
  auto a = resume_args(model);
  a.insert(a.end(),
           {"--lr", "0.005", "--num-hiddens", "8", "--epochs", "2", "--out", model.string() + "/"});
  EXPECT_EQ(run_attn(a, dir_ / "resume"), 0) << attn::testing::read_file(dir_ / "resume.err");
  EXPECT_EQ(seq2seq::load_checkpoint((model / seq2seq::kCheckpointFile).string()).state.epoch, 2);
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--kills=", 0) == 0) {
      g_kills = std::atoi(a.c_str() + 8);
    } else {
      g_attn = a;
    }
  }
  if (g_attn.empty() || !fs::exists(g_attn)) {
    std::fprintf(stderr, "usage: %s <attn executable> [--kills=N]\n", argv[0]);
    return 2;
  }
  return RUN_ALL_TESTS();
}
