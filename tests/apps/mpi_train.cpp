// Data-parallel training under mpirun: `mpirun -np 2 attn train` against one
// process with the same global batch, and a run whose second process dies.
//
//   mpi_train <attn executable> <mpirun executable, or - for none>  [gtest flags]
//
// Skipped, with a message, when there is no mpirun or attn was built without
// MPI (scripts/install-deps.sh installs Open MPI, so CI runs it).
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "attn/seq2seq/checkpoint.h"
#include "spawn.h"
#include "testing.h"

using namespace attn;
using attn::testing::exit_code;
using attn::testing::run_attn;
using attn::testing::seconds_since;
using attn::testing::spawn_attn;
using attn::testing::wait_status;
namespace fs = std::filesystem;

namespace {

std::string g_attn, g_mpirun;
const std::string kCorpus = std::string(ATTN_SOURCE_DIR) + "/datasets/fra-eng/fra.txt.gz";

fs::path work_dir() {
  fs::path d = fs::temp_directory_path() / ("attn_mpi_train_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// The reason to skip, or "".
std::string skip_reason() {
  if (g_mpirun == "sanitizers")
    return "not run in a sanitizer build (Open MPI's runtime is not instrumented)";
  if (g_mpirun.empty()) return "no mpirun (install openmpi-bin)";
  const fs::path log = work_dir() / "version";
  if (run_attn(g_attn, {"--version"}, log) != 0) return "attn --version failed";
  if (attn::testing::read_file(log.string() + ".out").find("MPI: not built in") !=
      std::string::npos)
    return "attn was built without MPI";
  return "";
}

// mpirun -np n (one thread per process) attn <args>.
std::vector<std::string> mpirun_args(int n, const std::vector<std::string>& args) {
  std::vector<std::string> all = {
      "-np", std::to_string(n), "--oversubscribe", "--bind-to", "none", g_attn, "--threads", "1"};
  all.insert(all.end(), args.begin(), args.end());
  return all;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

std::string logs(const fs::path& stem) {
  return "stdout:\n" + attn::testing::read_file(stem.string() + ".out") + "\nstderr:\n" +
         attn::testing::read_file(stem.string() + ".err");
}

void expect_same_losses(const nlohmann::json& a, const nlohmann::json& b, double rel) {
  const auto la = a["step_losses"].get<std::vector<double>>();
  const auto lb = b["step_losses"].get<std::vector<double>>();
  ASSERT_EQ(la.size(), lb.size());
  double worst = 0;
  for (std::size_t i = 0; i < la.size(); ++i) {
    const double r = std::abs(la[i] - lb[i]) / std::max(std::abs(la[i]), 1e-30);
    worst = std::max(worst, r);
    EXPECT_LE(r, rel) << "step " << i + 1 << ": " << la[i] << " vs " << lb[i];
  }
  std::printf("  %zu steps, worst relative difference of the step losses %.3g\n", la.size(), worst);
}

// `attn train <flags>` in one process (one thread) into w/one, and under
// mpirun with two processes (one thread each) into w/two; metrics in
// w/{one,two}.json.
void train_one_and_two(const fs::path& w, const std::vector<std::string>& flags) {
  fs::remove_all(w);
  fs::create_directories(w);
  auto args = [&](const std::string& name) {
    std::vector<std::string> a = {"train"};
    a.insert(a.end(), flags.begin(), flags.end());
    for (const std::string& s :
         std::vector<std::string>{"--quiet", "--out", (w / name).string(), "--metrics-json",
                                  (w / (name + ".json")).string()})
      a.push_back(s);
    return a;
  };
  std::vector<std::string> one = {"--threads", "1"};
  for (const auto& s : args("one")) one.push_back(s);
  ASSERT_EQ(run_attn(g_attn, one, w / "one"), 0) << logs(w / "one");
  ASSERT_EQ(run_attn(g_mpirun, mpirun_args(2, args("two")), w / "two"), 0) << logs(w / "two");
  EXPECT_NE(attn::testing::read_file((w / "two").string() + ".out").find("2 processes (mpirun)"),
            std::string::npos)
      << logs(w / "two");
}

// d2l's preset (dropout 0.1, lr 0.005, no warmup) for 5 epochs of 10
// batches, the global batch of 64 split 32 + 32. The first epoch follows one
// process to rounding (step losses within 1e-6: only the order of the sums
// differs); after it, Adam at this learning rate amplifies those roundings
// (a gradient entry near 0 moves its parameter by about lr whatever its
// size), and the difference grows about tenfold every 3 steps to around 1e-3
// by step 50 — as it does between any two summation orders. The difference
// is printed, not asserted; the translator's recipe below is held to 1e-5
// over its whole run.
TEST(MpiTrain, D2lPresetFollowsOneProcess) {
  if (const std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const fs::path w = work_dir() / "d2l";
  train_one_and_two(w, {"--data", kCorpus, "--epochs", "5", "--checkpoint-every", "0"});
  if (HasFatalFailure()) return;
  const auto a = read_json(w / "one.json"), b = read_json(w / "two.json");
  const auto la = a["step_losses"].get<std::vector<double>>();
  const auto lb = b["step_losses"].get<std::vector<double>>();
  ASSERT_EQ(la.size(), 50u);
  ASSERT_EQ(lb.size(), 50u);
  double first_epoch = 0, all = 0;
  for (std::size_t i = 0; i < la.size(); ++i) {
    const double r = std::abs(la[i] - lb[i]) / la[i];
    if (i < 10) first_epoch = std::max(first_epoch, r);
    all = std::max(all, r);
  }
  std::printf("  worst relative difference of the step losses: %.3g in epoch 1, %.3g in 5 epochs\n",
              first_epoch, all);
  EXPECT_LE(first_epoch, 1e-6);
  EXPECT_LE(all, 0.25);  // the same training, not another one
}

// The tatoeba recipe at toy size on 3,000 pairs (one epoch, 56 steps),
// validating every `valid_freq` steps (0: never).
std::vector<std::string> small_translator(int valid_freq) {
  return {"--preset",
          "tatoeba",
          "--data",
          kCorpus,
          "--num-examples",
          "3000",
          "--vocab-size",
          "400",
          "--valid-size",
          "100",
          "--test-size",
          "100",
          "--num-hiddens",
          "32",
          "--ffn-num-hiddens",
          "64",
          "--num-layers",
          "1",
          "--batch-tokens",
          "512",
          "--valid-freq",
          std::to_string(valid_freq),
          "--epochs",
          "1",
          "--time-limit",
          "0"};
}

// A translator's run (the tatoeba recipe: SentencePiece, token batches,
// dropout, label smoothing, warmup; validation split between the processes)
// on 3,000 pairs, 56 steps: the step losses follow one process to 1e-5, the
// validations' losses too and their BLEU exactly, and the two models
// translate the same.
TEST(MpiTrain, TranslatorWithValidationFollowsOneProcess) {
  if (const std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const fs::path w = work_dir() / "spm";
  train_one_and_two(w, small_translator(15));
  if (HasFatalFailure()) return;
  const auto a = read_json(w / "one.json"), b = read_json(w / "two.json");
  ASSERT_GE(a["step_losses"].size(), 15u);
  expect_same_losses(a, b, 1e-5);
  const auto& va = a["validations"];
  const auto& vb = b["validations"];
  ASSERT_EQ(va.size(), vb.size());
  ASSERT_GE(va.size(), 1u);
  for (std::size_t i = 0; i < va.size(); ++i) {
    EXPECT_EQ(va[i]["step"], vb[i]["step"]);
    const double la = va[i]["loss"].get<double>(), lb = vb[i]["loss"].get<double>();
    EXPECT_LE(std::abs(la - lb), 1e-5 * la) << "validation " << i;
    EXPECT_NEAR(va[i]["bleu"].get<double>(), vb[i]["bleu"].get<double>(), 1e-9)
        << "validation " << i;
  }
  // Every process trained the same SentencePiece model: process 0's.
  EXPECT_EQ(attn::testing::read_file(w / "one" / "spm.model"),
            attn::testing::read_file(w / "two" / "spm.model"));
  // The two models translate the same.
  std::string outputs[2];
  for (int k = 0; k < 2; ++k) {
    std::vector<std::string> t = {"translate", "--model", (w / (k == 0 ? "one" : "two")).string(),
                                  "Go.",       "I lost.", "He's calm.",
                                  "I'm home.", "We won.", "Tom is here."};
    const fs::path stem = w / (k == 0 ? "tr_one" : "tr_two");
    ASSERT_EQ(run_attn(g_attn, t, stem), 0) << logs(stem);
    outputs[k] = attn::testing::read_file(stem.string() + ".out");
  }
  EXPECT_FALSE(outputs[0].empty());
  EXPECT_EQ(outputs[0], outputs[1]);
}

// The tensors' bytes of a model.safetensors (what follows its JSON header,
// which names the run and so differs between the two runs).
std::string weight_bytes(const fs::path& model) {
  const std::string all = attn::testing::read_file(model / "model.safetensors");
  if (all.size() < 8) return "";
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = n << 8 | static_cast<unsigned char>(all[static_cast<std::size_t>(i)]);
  return n + 8 <= all.size() ? all.substr(static_cast<std::size_t>(n + 8)) : "";
}

// `attn train <flags>` as one process (one thread) with --accum-steps n into
// w/one, and as n processes (one thread each) into w/many: every step's loss
// and every weight the same, bit for bit.
void expect_accum_equals_processes(const fs::path& w, int n, std::vector<std::string> flags) {
  fs::remove_all(w);
  fs::create_directories(w);
  flags.insert(flags.begin(), "train");
  for (const char* s : {"--quiet", "--checkpoint-every", "0"}) flags.push_back(s);
  auto with = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> a = flags;
    for (const std::string& s : {std::string("--out"), (w / name).string(),
                                 std::string("--metrics-json"), (w / (name + ".json")).string()})
      a.push_back(s);
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  std::vector<std::string> one = {"--threads", "1"};
  for (const auto& s : with("one", {"--accum-steps", std::to_string(n)})) one.push_back(s);
  ASSERT_EQ(run_attn(g_attn, one, w / "one"), 0) << logs(w / "one");
  ASSERT_EQ(run_attn(g_mpirun, mpirun_args(n, with("many", {})), w / "many"), 0)
      << logs(w / "many");
  const auto la = read_json(w / "one.json")["step_losses"].get<std::vector<double>>();
  const auto lb = read_json(w / "many.json")["step_losses"].get<std::vector<double>>();
  ASSERT_GE(la.size(), 50u);
  ASSERT_EQ(la.size(), lb.size());
  for (std::size_t i = 0; i < la.size(); ++i)
    ASSERT_EQ(la[i], lb[i]) << "step " << i + 1 << " of " << n << " micro-batches";
  const std::string wa = weight_bytes(w / "one"), wb = weight_bytes(w / "many");
  ASSERT_FALSE(wa.empty());
  EXPECT_TRUE(wa == wb) << "the weights differ";
  std::printf("  %d processes = --accum-steps %d: %zu step losses and %zu weight bytes equal\n", n,
              n, la.size(), wa.size());
}

// d2l's preset, 50 steps (batches of 64: 32 + 32, or 21 + 21 + 22), with
// dropout: N processes summed in their order give one process's bits with
// N micro-batches; a run moves between the two with --resume.
TEST(MpiTrain, ProcessesEqualAccumStepsOnD2lPreset) {
  if (const std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  for (int n : {2, 3})
    expect_accum_equals_processes(work_dir() / ("d2l_accum" + std::to_string(n)), n,
                                  {"--data", kCorpus, "--epochs", "5"});
  if (HasFatalFailure()) return;
  // Three epochs as 2 processes, then two more as one with --accum-steps 2:
  // the 50 steps of the run that took one process throughout.
  const fs::path w = work_dir() / "d2l_accum2";
  const fs::path moved = w / "moved";
  ASSERT_EQ(run_attn(g_mpirun,
                     mpirun_args(2, {"train", "--data", kCorpus, "--epochs", "3", "--quiet",
                                     "--checkpoint-every", "0", "--out", moved.string()}),
                     w / "first"),
            0)
      << logs(w / "first");
  ASSERT_EQ(
      run_attn(g_attn,
               {"--threads", "1", "train", "--resume", moved.string(), "--epochs", "5",
                "--accum-steps", "2", "--quiet", "--metrics-json", (w / "moved.json").string()},
               w / "second"),
      0)
      << logs(w / "second");
  const auto la = read_json(w / "one.json")["step_losses"].get<std::vector<double>>();
  const auto lb = read_json(w / "moved.json")["step_losses"].get<std::vector<double>>();
  ASSERT_EQ(la.size(), lb.size());
  for (std::size_t i = 0; i < la.size(); ++i) ASSERT_EQ(la[i], lb[i]) << "step " << i + 1;
  EXPECT_TRUE(weight_bytes(w / "one") == weight_bytes(moved)) << "the weights differ";
}

// The translator's recipe, small (SentencePiece, token batches, dropout,
// label smoothing, warmup), 56 steps: the same with 2 and 3.
TEST(MpiTrain, ProcessesEqualAccumStepsOnTranslatorRecipe) {
  if (const std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  for (int n : {2, 3})
    expect_accum_equals_processes(work_dir() / ("spm_accum" + std::to_string(n)), n,
                                  small_translator(0));
}

// The step of the checkpoint `ckpt` once it is 20 or later (within 120 s of
// t0), while `mpirun` runs; a failure if it ends first.
std::int64_t wait_for_checkpoint(pid_t mpirun, const fs::path& ckpt,
                                 std::chrono::steady_clock::time_point t0, const fs::path& stem) {
  std::int64_t step = 0;
  while (step < 20 && seconds_since(t0) < 120) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    int status = 0;
    if (waitpid(mpirun, &status, WNOHANG) != 0) {
      ADD_FAILURE() << "mpirun ended early\n" << logs(stem);
      return step;
    }
    try {
      if (fs::exists(ckpt)) step = seq2seq::load_checkpoint(ckpt.string()).state.step;
    } catch (const std::exception&) {}
  }
  EXPECT_GE(step, 20) << logs(stem);
  return step;
}

// The processes (children of mpirun) with their rank.
std::vector<std::pair<pid_t, int>> ranks_of(pid_t mpirun) {
  std::vector<std::pair<pid_t, int>> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    const std::string stat = attn::testing::read_file(fs::path("/proc") / e->d_name / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2 || ppid != mpirun)
      continue;
    const std::string env = attn::testing::read_file(fs::path("/proc") / e->d_name / "environ");
    const std::string key = std::string("OMPI_COMM_WORLD_RANK=");
    for (std::size_t at = 0; at < env.size(); at = env.find('\0', at) + 1) {
      if (env.compare(at, key.size(), key) == 0) {
        out.emplace_back(pid, std::atoi(env.c_str() + at + key.size()));
        break;
      }
      if (env.find('\0', at) == std::string::npos) break;
    }
  }
  closedir(d);
  return out;
}

// Process 1 killed mid-training: process 0 (and mpirun) end within 30 s, with
// a non-zero exit; the checkpoint loads; --resume with 1 and with 2
// processes trains to the end.
TEST(MpiTrain, DeadProcessStopsTheRunAndResumeFinishes) {
  if (const std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const fs::path w = work_dir() / "kill";
  fs::remove_all(w);
  fs::create_directories(w);
  const fs::path out = w / "model";
  const std::vector<std::string> train = {
      "train",   "--data", kCorpus,      "--epochs",           "60",
      "--quiet", "--out",  out.string(), "--checkpoint-every", "5"};
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t mpirun = spawn_attn(g_mpirun, mpirun_args(2, train), w / "run");
  ASSERT_GT(mpirun, 0);
  // Wait for a checkpoint of step 20 or later.
  const fs::path ckpt = out / seq2seq::kCheckpointFile;
  std::int64_t step = 0;
  ASSERT_GE(step = wait_for_checkpoint(mpirun, ckpt, t0, w / "run"), 20);
  pid_t victim = -1;
  for (auto [pid, rank] : ranks_of(mpirun))
    if (rank == 1) victim = pid;
  ASSERT_GT(victim, 0) << "no process of rank 1 under mpirun " << mpirun;
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  int status = 0;
  while (waitpid(mpirun, &status, WNOHANG) == 0 && seconds_since(killed) < 60)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double took = seconds_since(killed);
  if (took >= 60) {
    for (auto [pid, rank] : ranks_of(mpirun)) ::kill(pid, SIGKILL);
    ::kill(mpirun, SIGKILL);
    wait_status(mpirun);
  }
  std::printf("  rank 1 killed after checkpoint step %lld; mpirun ended %.1f s later with %d\n",
              static_cast<long long>(step), took, exit_code(status));
  ASSERT_LT(took, 30.0) << logs(w / "run");
  EXPECT_NE(exit_code(status), 0);
  // The checkpoint loads; copies resume with one process and with two.
  seq2seq::Checkpoint ck;
  ASSERT_NO_THROW(ck = seq2seq::load_checkpoint(ckpt.string()));
  EXPECT_GE(ck.state.step, 20);
  const fs::path copy = w / "model2";
  fs::copy(out, copy, fs::copy_options::recursive);
  fs::remove(copy / ".lock");
  ASSERT_EQ(run_attn(g_attn, {"--threads", "1", "train", "--resume", out.string(), "--quiet"},
                     w / "resume1"),
            0)
      << logs(w / "resume1");
  ASSERT_EQ(run_attn(g_mpirun, mpirun_args(2, {"train", "--resume", copy.string(), "--quiet"}),
                     w / "resume2"),
            0)
      << logs(w / "resume2");
  for (const fs::path& dir : {out, copy}) {
    const auto end = seq2seq::load_checkpoint((dir / seq2seq::kCheckpointFile).string());
    EXPECT_EQ(end.state.epoch, 60) << dir;
    EXPECT_EQ(end.state.step, 600) << dir;
  }
}

// ---- Two hosts over TCP, on this machine ----
//
// Two network namespaces joined by a veth pair (10.231.0.1 and .2, inside
// the namespaces only) stand for two hosts: mpirun runs in the first, and
// starts the second host's daemon through a launch agent that enters the
// second namespace where ssh would log in. Open MPI's TCP transport alone
// (--mca btl tcp,self: no shared memory) carries the sums, so the
// multi-host path runs. Made and removed by the test; skipped with a
// message where namespaces cannot be made (not root, no iproute2).
class TwoHosts {
 public:
  explicit TwoHosts(const fs::path& dir) {
    const std::string tag = std::to_string(::getpid());
    ns_[0] = "attn" + tag + "h0";
    ns_[1] = "attn" + tag + "h1";
    const std::string v0 = "av" + tag + "a", v1 = "av" + tag + "b";
    made_ = sh("ip netns add " + ns_[0]) && sh("ip netns add " + ns_[1]);
    made_ = made_ && sh("ip link add " + v0 + " type veth peer name " + v1) &&
            sh("ip link set " + v0 + " netns " + ns_[0]) &&
            sh("ip link set " + v1 + " netns " + ns_[1]) &&
            sh("ip -n " + ns_[0] + " addr add 10.231.0.1/24 dev " + v0) &&
            sh("ip -n " + ns_[1] + " addr add 10.231.0.2/24 dev " + v1);
    for (int i = 0; i < 2 && made_; ++i)
      made_ = sh("ip -n " + ns_[i] + " link set lo up") &&
              sh("ip -n " + ns_[i] + " link set " + (i == 0 ? v0 : v1) + " up");
    link_ = v1;
    // The launch agent: `agent HOST COMMAND...`, as mpirun calls ssh.
    agent_ = dir / "agent.sh";
    agent_log_ = dir / "agent.log";
    std::ofstream(agent_) << "#!/bin/sh\n"
                          << "host=$1; shift\n"
                          << "echo \"$host\" >> " << agent_log_.string() << "\n"
                          << "case \"$host\" in\n"
                          << "  10.231.0.1) ns=" << ns_[0] << " ;;\n"
                          << "  10.231.0.2) ns=" << ns_[1] << " ;;\n"
                          << "  *) echo \"agent: no host $host\" >&2; exit 255 ;;\n"
                          << "esac\n"
                          << "exec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n";
    fs::permissions(agent_, fs::perms::owner_all);
  }
  ~TwoHosts() {
    for (const std::string& ns : ns_) {
      sh("ip netns pids " + ns + " 2>/dev/null | xargs -r kill -9");
      sh("ip netns del " + ns + " 2>/dev/null");
    }
  }
  bool made() const { return made_; }
  // mpirun in the first namespace, one process on each host, one thread each.
  std::vector<std::string> mpirun(const std::vector<std::string>& args) const {
    std::vector<std::string> all = {
        "ip", "netns", "exec", ns_[0], g_mpirun, "-np", "2", "--host", "10.231.0.1:1,10.231.0.2:1",
        "--mca", "plm_rsh_agent", agent_.string(), "--mca", "btl", "tcp,self", "--mca",
        "btl_tcp_if_include", "10.231.0.0/24", "--mca", "oob_tcp_if_include", "10.231.0.0/24",
        // A lost host noticed within seconds.
        "--mca", "oob_tcp_keepalive_time", "1", "--mca", "oob_tcp_keepalive_intvl", "1", "--mca",
        "oob_tcp_keepalive_probes", "3", "--bind-to", "none", g_attn, "--threads", "1"};
    all.insert(all.end(), args.begin(), args.end());
    return all;
  }
  bool link_down() const { return sh("ip -n " + ns_[1] + " link set " + link_ + " down"); }
  std::string agent_log() const { return attn::testing::read_file(agent_log_); }

 private:
  static bool sh(const std::string& command) {
    return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
  }
  std::string ns_[2], link_;
  fs::path agent_, agent_log_;
  bool made_ = false;
};

const char* const kEnv = "/usr/bin/env";  // runs `ip` from PATH

// The d2l preset, 50 steps, as two hosts: the bits of one process with
// --accum-steps 2. Then a run whose link goes down after step 20: mpirun
// ends within 30 s with an error, the last checkpoint loads, and --resume
// (one process, --accum-steps 2) finishes the run.
TEST(MpiTrain, TwoHostsOverTcp) {
  if (const std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const fs::path w = work_dir() / "hosts";
  fs::remove_all(w);
  fs::create_directories(w);
  TwoHosts hosts(w);
  if (!hosts.made()) GTEST_SKIP() << "cannot make network namespaces (needs root and iproute2)";
  const std::vector<std::string> d2l = {"train", "--data", kCorpus, "--quiet"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = d2l;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ASSERT_EQ(run_attn(g_attn,
                     {"--threads", "1", "train", "--data", kCorpus, "--quiet", "--epochs", "5",
                      "--checkpoint-every", "0", "--accum-steps", "2", "--out",
                      (w / "one").string(), "--metrics-json", (w / "one.json").string()},
                     w / "one"),
            0)
      << logs(w / "one");
  ASSERT_EQ(run_attn(kEnv,
                     hosts.mpirun(
                         with({"--epochs", "5", "--checkpoint-every", "0", "--out",
                               (w / "two").string(), "--metrics-json", (w / "two.json").string()})),
                     w / "two"),
            0)
      << logs(w / "two");
  EXPECT_NE(hosts.agent_log().find("10.231.0.2"), std::string::npos)
      << "the second host was not started through the agent";
  const auto la = read_json(w / "one.json")["step_losses"].get<std::vector<double>>();
  const auto lb = read_json(w / "two.json")["step_losses"].get<std::vector<double>>();
  ASSERT_EQ(la.size(), 50u);
  ASSERT_EQ(la.size(), lb.size());
  for (std::size_t i = 0; i < la.size(); ++i) ASSERT_EQ(la[i], lb[i]) << "step " << i + 1;
  EXPECT_TRUE(weight_bytes(w / "one") == weight_bytes(w / "two")) << "the weights differ";

  // The link taken down mid-run.
  const fs::path out = w / "cut";
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t mpirun = spawn_attn(
      kEnv,
      hosts.mpirun(with({"--epochs", "60", "--checkpoint-every", "5", "--out", out.string()})),
      w / "cut");
  ASSERT_GT(mpirun, 0);
  const fs::path ckpt = out / seq2seq::kCheckpointFile;
  std::int64_t step = 0;
  ASSERT_GE(step = wait_for_checkpoint(mpirun, ckpt, t0, w / "cut"), 20);
  ASSERT_TRUE(hosts.link_down());
  const auto cut = std::chrono::steady_clock::now();
  int status = 0;
  while (waitpid(mpirun, &status, WNOHANG) == 0 && seconds_since(cut) < 60)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double took = seconds_since(cut);
  if (took >= 60) {
    ::kill(mpirun, SIGKILL);
    wait_status(mpirun);
  }
  std::printf("  link down after checkpoint step %lld; mpirun ended %.1f s later with %d\n",
              static_cast<long long>(step), took, exit_code(status));
  ASSERT_LT(took, 30.0) << logs(w / "cut");
  EXPECT_NE(exit_code(status), 0);
  seq2seq::Checkpoint ck;
  ASSERT_NO_THROW(ck = seq2seq::load_checkpoint(ckpt.string()));
  EXPECT_GE(ck.state.step, 20);
  fs::remove(out / ".lock");
  ASSERT_EQ(run_attn(g_attn,
                     {"--threads", "1", "train", "--resume", out.string(), "--accum-steps", "2",
                      "--quiet"},
                     w / "resume"),
            0)
      << logs(w / "resume");
  EXPECT_EQ(seq2seq::load_checkpoint(ckpt.string()).state.step, 600);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: mpi_train <attn executable> <mpirun or -> [gtest flags]\n");
    return 2;
  }
  g_attn = argv[1];
  g_mpirun = argc > 2 && std::string(argv[2]) != "-" ? argv[2] : "";
  // mpirun refuses root without these (CI runs as root); a container may
  // forbid the cross-process copy of Open MPI's shared-memory transport.
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
  const int rc = RUN_ALL_TESTS();
  fs::remove_all(work_dir());
  return rc;
}
