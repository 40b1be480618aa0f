// The interrupt test: `attn train` at the shapes where a signal handler inside
// oneDNN's JIT code corrupted the heap (num_hiddens 128, ffn 512), at 1 and 2
// threads, stopped with SIGINT or SIGTERM at random moments during training,
// many times. Every run must exit 130 (SIGINT) or 143 (SIGTERM) with a
// checkpoint that loads, and every run resumed to its end must equal, bit for
// bit, the run that was never stopped.
//
//   interrupt <attn executable> [--runs=N] [gtest flags]
//
// ATTN_INTERRUPT_SEED=<n> repeats the random moments of an earlier run.
#include <sys/stat.h>

#include <random>
#include <thread>

#include "attn/seq2seq/checkpoint.h"
#include "spawn.h"
#include "testing.h"

using namespace attn;
namespace fs = std::filesystem;

namespace {

std::string g_attn;
int g_runs = 32;
const std::string kCorpus = std::string(ATTN_SOURCE_DIR) + "/datasets/fra-eng/fra.txt.gz";

std::vector<std::string> train_args(const fs::path& out, int threads) {
  return {"--threads",
          std::to_string(threads),
          "train",
          "--data",
          kCorpus,
          "--epochs",
          "3",
          "--num-hiddens",
          "128",
          "--ffn-num-hiddens",
          "512",
          "--quiet",
          "--checkpoint-every",
          "5",
          "--out",
          out.string()};
}

std::vector<std::string> resume_args(const fs::path& out, int threads) {
  return {"--threads", std::to_string(threads), "train", "--resume", out.string(), "--quiet"};
}

struct Reference {
  std::string model_bytes;
  seq2seq::Checkpoint checkpoint;
  double train_seconds = 0;  // from the first checkpoint to the end of the process
};

class Interrupt : public attn::testing::TempDirTest {
 protected:
  std::string err_of(const fs::path& stem) {
    return attn::testing::read_file(stem.string() + ".err");
  }

  // Waits until `ckpt` exists (the step-0 checkpoint: training has begun).
  bool wait_for(const fs::path& ckpt, pid_t pid) {
    auto t0 = std::chrono::steady_clock::now();
    while (!fs::exists(ckpt)) {
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid) return false;
      if (attn::testing::seconds_since(t0) > 120) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  Reference reference(int threads) {
    const fs::path model = dir_ / fmt::format("ref{}", threads);
    pid_t pid =
        attn::testing::spawn_attn(g_attn, train_args(model, threads), model.string() + "-run");
    EXPECT_GT(pid, 0);
    Reference r;
    EXPECT_TRUE(wait_for(model / seq2seq::kCheckpointFile, pid));
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(attn::testing::exit_code(attn::testing::wait_status(pid)), 0)
        << err_of(model.string() + "-run");
    r.train_seconds = attn::testing::seconds_since(t0);
    r.model_bytes = attn::testing::read_file(model / "model.safetensors");
    r.checkpoint = seq2seq::load_checkpoint((model / seq2seq::kCheckpointFile).string());
    return r;
  }
};

std::uint64_t interrupt_seed() {
  if (const char* s = std::getenv("ATTN_INTERRUPT_SEED")) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

}  // namespace

TEST_F(Interrupt, SignalsAtRandomMomentsNeverCorruptAndResumeExactly) {
  const std::uint64_t seed = interrupt_seed();
  std::mt19937_64 rng(seed);
  std::printf("interrupt seed %llu (ATTN_INTERRUPT_SEED repeats it)\n",
              static_cast<unsigned long long>(seed));
  int interrupted = 0, after_training = 0;
  for (int threads : {1, 2}) {
    const Reference ref = reference(threads);
    ASSERT_EQ(ref.checkpoint.state.step, 30);
    std::printf("%d thread(s): training takes %.2f s after its first checkpoint\n", threads,
                ref.train_seconds);
    // The moment: after one of the checkpoints of steps 0, 5, ..., 20 (each
    // replaces the file), a random fraction of the time 4 more steps take at
    // the pace this very run has had so far: always inside training, however
    // loaded the machine is.
    std::uniform_int_distribution<int> which(0, 4);
    std::uniform_real_distribution<double> fraction(0.0, 1.0);
    for (int run = 0; run < g_runs / 2; ++run) {
      const int sig = run % 2 == 0 ? SIGINT : SIGTERM;
      const fs::path model = dir_ / fmt::format("t{}_run{}", threads, run);
      const fs::path ckpt = model / seq2seq::kCheckpointFile;
      const fs::path stem = model.string() + "-train";
      pid_t pid = attn::testing::spawn_attn(g_attn, train_args(model, threads), stem);
      ASSERT_GT(pid, 0);
      ASSERT_TRUE(wait_for(ckpt, pid)) << err_of(stem);
      const auto started = std::chrono::steady_clock::now();
      const int target = which(rng);
      ino_t last = 0;
      int early = -1;  // the status, if the run ended before the signal
      for (int seen = 0; seen < target;) {
        int est = 0;
        if (waitpid(pid, &est, WNOHANG) == pid) {
          early = est;
          break;
        }
        struct stat sb {};
        if (::stat(ckpt.c_str(), &sb) == 0 && sb.st_ino != last) {
          if (last != 0) ++seen;
          last = sb.st_ino;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      const double per_step = target == 0 ? ref.train_seconds / 30
                                          : attn::testing::seconds_since(started) / (5 * target);
      std::this_thread::sleep_for(std::chrono::duration<double>(fraction(rng) * 4 * per_step));
      if (early < 0) kill(pid, sig);
      const int st = early < 0 ? attn::testing::wait_status(pid) : early;
      SCOPED_TRACE(
          fmt::format("{} thread(s), run {}, signal {}: {}", threads, run, sig, err_of(stem)));
      seq2seq::Checkpoint ck;
      ASSERT_NO_THROW(ck = seq2seq::load_checkpoint((model / seq2seq::kCheckpointFile).string()));
      if (WIFSIGNALED(st)) {
        // The signal came after the last step, while the outputs were being
        // written: then it ends attn at once, as documented.
        ASSERT_EQ(WTERMSIG(st), sig);
        ASSERT_EQ(ck.state.step, 30);
        ++after_training;
      } else {
        ASSERT_TRUE(WIFEXITED(st));
        ASSERT_EQ(WEXITSTATUS(st), 128 + sig) << "a crash, or the signal was not handled";
        ++interrupted;
      }
      const fs::path rstem = model.string() + "-resume";
      ASSERT_EQ(attn::testing::run_attn(g_attn, resume_args(model, threads), rstem), 0)
          << err_of(rstem);
      const seq2seq::Checkpoint done =
          seq2seq::load_checkpoint((model / seq2seq::kCheckpointFile).string());
      EXPECT_EQ(done.state.step_loss, ref.checkpoint.state.step_loss);
      EXPECT_TRUE(attn::testing::read_file(model / "model.safetensors") == ref.model_bytes)
          << "the resumed model differs from the uninterrupted one";
      fs::remove_all(model);
    }
  }
  std::printf(
      "%d runs stopped by SIGINT/SIGTERM during training (exit 130/143), %d after it; "
      "every checkpoint loaded, every resumed run bit-identical to the reference\n",
      interrupted, after_training);
  EXPECT_GE(interrupted, g_runs * 3 / 4);
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--runs=", 0) == 0)
      g_runs = std::atoi(a.c_str() + 7);
    else
      g_attn = a;
  }
  if (g_attn.empty() || !fs::exists(g_attn)) {
    std::fprintf(stderr, "usage: %s <attn executable> [--runs=N]\n", argv[0]);
    return 2;
  }
  return RUN_ALL_TESTS();
}
