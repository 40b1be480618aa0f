// A model directory is one unit, whatever happens to the process writing it:
// `attn train --overwrite` killed with SIGKILL inside save_model over an
// existing model leaves a directory that `attn translate` reads as exactly
// the old model or exactly the new one; a directory being trained into is
// locked; a resumed run finds a corpus given by a relative path from anywhere.
//
//   model_dir_cli <attn executable> [gtest flags]
#include <sys/stat.h>

#include <random>
#include <thread>

#include "attn/io/dir_lock.h"
#include "attn/io/file_set.h"
#include "attn/seq2seq/checkpoint.h"
#include "attn/seq2seq/model_dir.h"
#include "spawn.h"
#include "testing.h"

using namespace attn;
namespace fs = std::filesystem;

namespace {

std::string g_attn;
const std::string kCorpus = std::string(ATTN_SOURCE_DIR) + "/datasets/fra-eng/fra.txt.gz";
const std::vector<std::string> kSentences = {"go .",       "i lost .", "he's calm .",
                                             "i'm home .", "we won .", "help me ."};

// A tiny model; `heads` 4 or 8 changes nothing in the weights' shapes.
std::vector<std::string> train_args(const fs::path& out, int heads, int epochs,
                                    const std::string& seed, bool overwrite) {
  std::vector<std::string> a = {"--threads",
                                "1",
                                "--seed",
                                seed,
                                "train",
                                "--data",
                                kCorpus,
                                "--num-examples",
                                "60",
                                "--epochs",
                                std::to_string(epochs),
                                "--batch-size",
                                "8",
                                "--num-hiddens",
                                "16",
                                "--num-heads",
                                std::to_string(heads),
                                "--ffn-num-hiddens",
                                "16",
                                "--num-layers",
                                "1",
                                "--quiet",
                                "--checkpoint-every",
                                "0",
                                "--out",
                                out.string()};
  if (overwrite) a.push_back("--overwrite");
  return a;
}

class ModelDirCli : public attn::testing::TempDirTest {
 protected:
  std::string err_of(const fs::path& stem) {
    return attn::testing::read_file(stem.string() + ".err");
  }
  int run(const std::vector<std::string>& args, const std::string& tag, const fs::path& cwd = {}) {
    return attn::testing::run_attn(g_attn, args, dir_ / tag, cwd);
  }
  // What `attn translate` prints for kSentences, or "exit N: <stderr>".
  std::string translate(const fs::path& model) {
    std::vector<std::string> args = {"translate", "--model", model.string()};
    args.insert(args.end(), kSentences.begin(), kSentences.end());
    int rc = run(args, "translate");
    if (rc != 0) return fmt::format("exit {}: {}", rc, err_of(dir_ / "translate"));
    return attn::testing::read_file(dir_ / "translate.out");
  }
  // The model's parameters as loaded by the library (all of them, in order).
  std::vector<float> weights(const fs::path& model) {
    std::vector<float> all;
    try {
      seq2seq::LoadedModel m = seq2seq::load_model(model.string());
      for (const auto& [name, p] : m.net->named_parameters()) {
        auto v = to_vector<float>(p);
        all.insert(all.end(), v.begin(), v.end());
      }
    } catch (const Error&) {}
    return all;
  }
};

void copy_dir(const fs::path& from, const fs::path& to) {
  fs::remove_all(to);
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(from))
    if (e.is_regular_file() && e.path().filename() != io::kLockFile)
      fs::copy_file(e.path(), to / e.path().filename());
}

}  // namespace

// SIGKILL anywhere in `attn train --overwrite` over a trained model: the
// directory always reads as the old model, the new model's first save (its
// initial weights) or its final save, never a mix and never an error.
TEST_F(ModelDirCli, KillInsideSaveModelLeavesTheOldOrTheNewModel) {
  // The old model: 4 heads, seed 0, trained.
  const fs::path old_dir = dir_ / "old";
  ASSERT_EQ(run(train_args(old_dir, 4, 3, "0", false), "old"), 0) << err_of(dir_ / "old");
  // The new model's final state: 8 heads, seed 1, trained to the end.
  const fs::path final_dir = dir_ / "final";
  ASSERT_EQ(run(train_args(final_dir, 8, 3, "1", false), "final"), 0) << err_of(dir_ / "final");
  // The new model's first save (its initial weights): a long run, killed
  // once its first model is complete.
  const fs::path init_dir = dir_ / "init";
  pid_t pid =
      attn::testing::spawn_attn(g_attn, train_args(init_dir, 8, 100000, "1", false), dir_ / "init");
  ASSERT_GT(pid, 0);
  for (auto t0 = std::chrono::steady_clock::now();
       !(fs::exists(init_dir / "manifest.json") && !fs::exists(init_dir / io::kPendingDir));) {
    ASSERT_LT(attn::testing::seconds_since(t0), 60) << err_of(dir_ / "init");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  attn::testing::wait_status(pid);

  const std::string old_text = translate(old_dir), init_text = translate(init_dir),
                    final_text = translate(final_dir);
  const std::vector<float> old_w = weights(old_dir), init_w = weights(init_dir),
                           final_w = weights(final_dir);
  ASSERT_FALSE(old_w.empty());
  ASSERT_NE(old_w, init_w);
  ASSERT_NE(init_w, final_w);
  ASSERT_EQ(old_text.rfind("exit", 0), std::string::npos) << old_text;

  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> delay(0.0, 0.4);
  int kills = 0, mid_save = 0, old_seen = 0, init_seen = 0, final_seen = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const fs::path target = dir_ / "target";
    copy_dir(old_dir, target);
    const fs::path stem = dir_ / fmt::format("overwrite{}", trial);
    pid_t p = attn::testing::spawn_attn(g_attn, train_args(target, 8, 3, "1", true), stem);
    ASSERT_GT(p, 0);
    bool pending_seen = false;
    if (trial % 2 == 0) {
      // Aimed: the moment a save has begun (its staging directory exists).
      for (auto t0 = std::chrono::steady_clock::now(); attn::testing::seconds_since(t0) < 10;) {
        int st = 0;
        if (waitpid(p, &st, WNOHANG) == p) {
          p = -1;
          break;
        }
        if (fs::exists(target / io::kPendingDir)) {
          pending_seen = true;
          break;
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::duration<double>(delay(rng)));
    }
    if (p > 0) {
      kill(p, SIGKILL);
      const int st = attn::testing::wait_status(p);
      kills += WIFSIGNALED(st);
    }
    mid_save += pending_seen && fs::exists(target / io::kPendingDir);
    const std::string text = translate(target);
    const std::vector<float> w = weights(target);
    SCOPED_TRACE(fmt::format("trial {}", trial));
    EXPECT_TRUE(text == old_text || text == init_text || text == final_text) << text;
    const bool is_old = w == old_w, is_init = w == init_w, is_final = w == final_w;
    EXPECT_TRUE(is_old || is_init || is_final) << "the weights are none of the three models'";
    old_seen += is_old;
    init_seen += is_init;
    final_seen += is_final;
  }
  std::printf(
      "24 runs of train --overwrite over a trained model, %d killed (%d inside a save, "
      "its staging directory left): translate read the old model %d times, the new "
      "model's first save %d times, its final save %d times, never anything else\n",
      kills, mid_save, old_seen, init_seen, final_seen);
  EXPECT_GE(mid_save, 1) << "no kill landed inside a save";
}

// A directory being trained into is locked: a second train there is refused
// with the first one's process id; two started at once, one of them wins.
TEST_F(ModelDirCli, ADirectoryInUseIsRefused) {
  const fs::path model = dir_ / "model";
  pid_t first =
      attn::testing::spawn_attn(g_attn, train_args(model, 4, 100000, "0", false), dir_ / "first");
  ASSERT_GT(first, 0);
  for (auto t0 = std::chrono::steady_clock::now(); !fs::exists(model / "manifest.json");) {
    ASSERT_LT(attn::testing::seconds_since(t0), 60) << err_of(dir_ / "first");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(run(train_args(model, 4, 1, "0", true), "second"), 1);
  EXPECT_EQ(err_of(dir_ / "second"),
            fmt::format("attn: error: '{}' is in use by process {} (attn train); wait for it to "
                        "end or stop it\n",
                        model.string(), first));
  // While it trains, its model can be read.
  EXPECT_EQ(translate(model).rfind("exit", 0), std::string::npos);
  kill(first, SIGTERM);
  EXPECT_EQ(attn::testing::exit_code(attn::testing::wait_status(first)), 143)
      << err_of(dir_ / "first");

  // Two at once into a new directory: exactly one trains, the other is
  // refused, and what is left is the winner's model.
  const fs::path same = dir_ / "same";
  pid_t a = attn::testing::spawn_attn(g_attn, train_args(same, 4, 2, "0", true), dir_ / "a");
  pid_t b = attn::testing::spawn_attn(g_attn, train_args(same, 4, 2, "0", true), dir_ / "b");
  const int ra = attn::testing::exit_code(attn::testing::wait_status(a));
  const int rb = attn::testing::exit_code(attn::testing::wait_status(b));
  EXPECT_TRUE((ra == 0 && rb == 1) || (ra == 1 && rb == 0))
      << ra << " " << rb << "\n"
      << err_of(dir_ / "a") << err_of(dir_ / "b");
  // The holder's name is "process N" unless the winner already finished and
  // emptied the lock file while the loser read it: then "another process".
  EXPECT_NE((ra == 1 ? err_of(dir_ / "a") : err_of(dir_ / "b")).find("' is in use by "),
            std::string::npos)
      << err_of(dir_ / "a") << err_of(dir_ / "b");
  EXPECT_EQ(translate(same).rfind("exit", 0), std::string::npos);
}

// --data given as a relative path is stored absolute: resuming from another
// directory finds the corpus.
TEST_F(ModelDirCli, ResumeFromAnotherDirectoryFindsARelativeCorpus) {
  const fs::path work = dir_ / "work", elsewhere = dir_ / "elsewhere";
  fs::create_directories(work / "data");
  fs::create_directories(elsewhere);
  fs::copy_file(kCorpus, work / "data" / "corpus.txt.gz");
  std::vector<std::string> args = train_args("model", 4, 2, "0", false);
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--data") args[i + 1] = "data/corpus.txt.gz";
  ASSERT_EQ(run(args, "train", work), 0) << err_of(dir_ / "train");
  const seq2seq::Checkpoint ck =
      seq2seq::load_checkpoint((work / "model" / seq2seq::kCheckpointFile).string());
  EXPECT_EQ(ck.run.data.path, (work / "data" / "corpus.txt.gz").string());
  EXPECT_EQ(run({"--threads", "1", "train", "--resume", (work / "model").string(), "--epochs", "3",
                 "--quiet"},
                "resume", elsewhere),
            0)
      << err_of(dir_ / "resume");
  // And --data given with --resume, relative to where the resume runs.
  fs::copy_file(kCorpus, elsewhere / "c.txt.gz");
  EXPECT_EQ(run({"--threads", "1", "train", "--resume", (work / "model").string(), "--epochs", "4",
                 "--data", "c.txt.gz", "--quiet"},
                "resume2", elsewhere),
            0)
      << err_of(dir_ / "resume2");
  EXPECT_EQ(
      seq2seq::load_checkpoint((work / "model" / seq2seq::kCheckpointFile).string()).run.data.path,
      (elsewhere / "c.txt.gz").string());
}

// A corpus that is a FIFO nobody writes: attn waits, and SIGTERM (or Ctrl-C)
// ends it at once, leaving nothing behind.
TEST_F(ModelDirCli, ASignalEndsTheWaitForACorpus) {
  const fs::path fifo = dir_ / "fifo", out = dir_ / "never";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  std::vector<std::string> args = train_args(out, 4, 1, "0", false);
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--data") args[i + 1] = fifo.string();
  for (int sig : {SIGTERM, SIGINT}) {
    pid_t pid = attn::testing::spawn_attn(g_attn, args, dir_ / "fifo-run");
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, sig);
    auto t0 = std::chrono::steady_clock::now();
    int st = 0;
    while (waitpid(pid, &st, WNOHANG) != pid) {
      ASSERT_LT(attn::testing::seconds_since(t0), 10) << "still waiting after the signal";
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(WIFSIGNALED(st)) << err_of(dir_ / "fifo-run");
    EXPECT_EQ(WTERMSIG(st), sig);
    EXPECT_FALSE(fs::exists(out));
  }
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) g_attn = fs::absolute(argv[1]).string();
  if (g_attn.empty() || !fs::exists(g_attn)) {
    std::fprintf(stderr, "usage: %s <attn executable>\n", argv[0]);
    return 2;
  }
  return RUN_ALL_TESTS();
}
