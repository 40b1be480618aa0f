// --quantize int8 through the CLI: the d2l preset's model translated and
// evaluated with int8 weights against f32 (BLEU on its 600 pairs within a
// tolerance, the loss changed but close), with --precision bf16 too; the
// AVX2 kernel (forced by ATTN_NO_VNNI=1 where the CPU has VNNI) gives the
// translations of the kernel this CPU runs by default, its scores close to
// f32's; an
// unknown value is a usage error; without an int8 kernel (a CPU without
// AVX2, forced by ATTN_ISA=portable) decoding falls back to f32 with a
// warning; --version names the kernel.
//
//   apps_quantize <attn executable> [gtest flags]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attn/ops/precision.h"
#include "attn/ops/quantize.h"
#include "bf16_warning.h"
#include "spawn.h"
#include "testing.h"

using namespace attn;
using attn::testing::read_file;
using attn::testing::run_attn;
namespace fs = std::filesystem;

namespace {

std::string g_attn;
const std::string kCorpus = std::string(ATTN_SOURCE_DIR) + "/datasets/fra-eng/fra.txt.gz";
const std::vector<std::string> kSentences = {"go .", "i lost .", "he's calm .", "i'm home ."};

// One model for every test (training takes most of the time): trained once,
// in the first test that needs it.
class QuantizeCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("attn_quantize_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  static void TearDownTestSuite() {
    if (!::testing::UnitTest::GetInstance()->Failed()) fs::remove_all(dir_);
  }
  static int run(const std::vector<std::string>& args, const std::string& name) {
    return run_attn(g_attn, args, dir_ / name);
  }
  static std::string out_of(const std::string& name) {
    return read_file((dir_ / name).string() + ".out");
  }
  static std::string err_of(const std::string& name) {
    return read_file((dir_ / name).string() + ".err");
  }
  // The d2l preset (d2l 10.7: 600 pairs, 200 epochs), trained once.
  static const fs::path& model() {
    static const fs::path m = [] {
      const fs::path p = dir_ / "d2l";
      const int rc = run({"train", "--data", kCorpus, "--out", p.string(), "--quiet"}, "train");
      EXPECT_EQ(rc, 0) << err_of("train");
      return p;
    }();
    return m;
  }
  static nlohmann::json evaluate(const std::vector<std::string>& flags, const std::string& name) {
    std::vector<std::string> args = {"evaluate", "--model", model().string(),
                                     "--data",   kCorpus,   "--num-examples",
                                     "600",      "--json"};
    args.insert(args.end(), flags.begin(), flags.end());
    EXPECT_EQ(run(args, name), 0) << err_of(name);
    const bool asks_bf16 = std::find(flags.begin(), flags.end(), "bf16") != flags.end();
    EXPECT_TRUE(attn::testing::is_quiet_but_for_slow_bf16(err_of(name), asks_bf16)) << err_of(name);
    return nlohmann::json::parse(out_of(name));
  }
  // Runs with the environment variable `name` set to `value`, then as it was.
  static int run_with(const char* name, const char* value, const std::vector<std::string>& args,
                      const std::string& out) {
    const char* was = std::getenv(name);
    const std::string before = was ? was : "";
    EXPECT_EQ(::setenv(name, value, 1), 0);
    const int rc = run(args, out);
    if (was)
      ::setenv(name, before.c_str(), 1);
    else
      ::unsetenv(name);
    return rc;
  }
  static std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  static fs::path dir_;
};

fs::path QuantizeCli::dir_;

}  // namespace

// The book's four sentences: int8 translates them (no warning, one line
// each); how many agree with f32 is reported.
TEST_F(QuantizeCli, TranslatesTheBookSentences) {
  if (!int8_supported()) GTEST_SKIP() << "no int8 kernel: " << int8_description();
  std::vector<std::string> args = {"translate", "--model", model().string()};
  args.insert(args.end(), kSentences.begin(), kSentences.end());
  ASSERT_EQ(run(args, "translate_f32"), 0) << err_of("translate_f32");
  args.insert(args.begin() + 3, {"--quantize", "int8"});
  ASSERT_EQ(run(args, "translate_int8"), 0) << err_of("translate_int8");
  EXPECT_EQ(err_of("translate_int8"), "");
  const auto f32 = lines(out_of("translate_f32")), int8 = lines(out_of("translate_int8"));
  ASSERT_EQ(int8.size(), kSentences.size()) << out_of("translate_int8");
  ASSERT_EQ(f32.size(), kSentences.size());
  int agree = 0;
  for (std::size_t i = 0; i < f32.size(); ++i) {
    EXPECT_FALSE(int8[i].empty()) << kSentences[i];
    agree += int8[i] == f32[i];
    std::printf("%-12s f32: %-24s int8: %s\n", kSentences[i].c_str(), f32[i].c_str(),
                int8[i].c_str());
  }
  std::printf("int8 and f32 agree on %d of %zu sentences\n", agree, kSentences.size());
  // The AVX2 kernel (the default one where the CPU lacks VNNI; 7-bit
  // operands, other numbers than VNNI's) gives the same translations, each
  // score within 0.15 of f32's (2026-12-03: 0.089 at most, VNNI's 0.020).
  std::vector<std::string> scored = args;
  scored.insert(scored.begin() + 3, {"--n-best", "1"});
  std::vector<std::string> scored_f32 = scored;
  scored_f32.erase(scored_f32.begin() + 5, scored_f32.begin() + 7);  // --quantize int8
  ASSERT_EQ(run(scored, "translate_int8_scores"), 0) << err_of("translate_int8_scores");
  ASSERT_EQ(run(scored_f32, "translate_f32_scores"), 0) << err_of("translate_f32_scores");
  ASSERT_EQ(run_with("ATTN_NO_VNNI", "1", scored, "translate_int8_avx2"), 0)
      << err_of("translate_int8_avx2");
  EXPECT_EQ(err_of("translate_int8_avx2"), "");
  // "i ||| translation ||| score" lines.
  auto split = [](const std::string& line) {
    const std::size_t a = line.find(" ||| "), b = line.rfind(" ||| ");
    EXPECT_TRUE(a != std::string::npos && b > a) << line;
    if (a == std::string::npos || b <= a) return std::make_pair(std::string(), 0.0);
    return std::make_pair(line.substr(0, b), std::stod(line.substr(b + 5)));
  };
  const auto ref = lines(out_of("translate_f32_scores")),
             vnni = lines(out_of("translate_int8_scores")),
             avx2 = lines(out_of("translate_int8_avx2"));
  ASSERT_EQ(ref.size(), kSentences.size()) << out_of("translate_f32_scores");
  ASSERT_EQ(vnni.size(), kSentences.size()) << out_of("translate_int8_scores");
  ASSERT_EQ(avx2.size(), kSentences.size()) << out_of("translate_int8_avx2");
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const auto [text, score] = split(avx2[i]);
    EXPECT_EQ(text, split(vnni[i]).first);
    EXPECT_NEAR(score, split(ref[i]).second, 0.15) << avx2[i] << " against " << ref[i];
  }
  // attention decodes with it too.
  ASSERT_EQ(run({"attention", "--model", model().string(), "--quantize", "int8", "i'm home .",
                 "--out", (dir_ / "att" / "home").string()},
                "attention_int8"),
            0)
      << err_of("attention_int8");
  EXPECT_EQ(err_of("attention_int8"), "");
}

// evaluate on the model's 600 training pairs: int8 changes the numbers (the
// teacher-forced loss is not f32's: int8 really ran) but not by much, and
// BLEU stays within kBleuTolerance of f32's; the same with --precision bf16.
TEST_F(QuantizeCli, EvaluateKeepsBleu) {
  if (!int8_supported()) GTEST_SKIP() << "no int8 kernel: " << int8_description();
  constexpr double kBleuTolerance = 3.0;  // sacreBLEU points, 0 to 100
  constexpr double kLossTolerance = 0.05;  // relative
  const nlohmann::json f32 = evaluate({}, "evaluate_f32");
  std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"int8", {"--quantize", "int8"}}};
  if (bf16_supported())
    runs.push_back({"int8+bf16", {"--quantize", "int8", "--precision", "bf16"}});
  for (const auto& [name, flags] : runs) {
    const nlohmann::json q = evaluate(flags, "evaluate_" + name);
    const double bleu = q["bleu"]["score"], bleu_f32 = f32["bleu"]["score"];
    const double loss = q["loss"], loss_f32 = f32["loss"];
    std::printf(
        "%s: BLEU %.2f (f32 %.2f), d2l's BLEU-4 %.4f (f32 %.4f), exact %d (f32 %d), loss %.5f "
        "(f32 %.5f)\n",
        name.c_str(), bleu, bleu_f32, q["corpus_bleu_tokens"].get<double>(),
        f32["corpus_bleu_tokens"].get<double>(), q["exact"].get<int>(), f32["exact"].get<int>(),
        loss, loss_f32);
    EXPECT_LE(std::fabs(bleu - bleu_f32), kBleuTolerance) << name;
    EXPECT_NE(loss, loss_f32) << name << ": the loss is f32's: int8 did not run";
    EXPECT_LE(std::fabs(loss - loss_f32), kLossTolerance * loss_f32) << name;
    EXPECT_GT(bleu, 10.0) << name;  // the d2l model learned its pairs (f32: 22)
  }
}

// Not a quantization: a usage error (exit 2) naming the choices.
TEST_F(QuantizeCli, AnUnknownValueIsAUsageError) {
  EXPECT_EQ(
      run({"translate", "--model", (dir_ / "none").string(), "--quantize", "int4", "go ."}, "bad"),
      2);
  const auto err = lines(err_of("bad"));
  ASSERT_EQ(err.size(), 2u) << err_of("bad");
  EXPECT_EQ(err[0], "attn: error: --quantize: int4 not in {auto,none,int8}");
  EXPECT_EQ(err[1], "Run 'attn translate --help' for usage.");
}

// Without an int8 kernel (forced by ATTN_ISA=portable, which leaves f32 on
// its portable path): one warning naming why, f32, exit 0.
TEST_F(QuantizeCli, WithoutAnInt8KernelDecodingFallsBackToF32) {
  const std::string m = model().string();
  ASSERT_EQ(
      run_with("ATTN_ISA", "portable", {"translate", "--model", m, "go .", "i lost ."}, "f32"), 0)
      << err_of("f32");
  ASSERT_EQ(
      run_with("ATTN_ISA", "portable",
               {"translate", "--model", m, "--quantize", "int8", "go .", "i lost ."}, "fallback"),
      0)
      << err_of("fallback");
  EXPECT_EQ(err_of("fallback"),
            "attn: warning: --quantize int8: int8 products: none (ATTN_ISA=portable); decoding "
            "in f32\n");
  EXPECT_EQ(out_of("fallback"), out_of("f32"));
  EXPECT_NE(out_of("f32"), "");
}

// --version names the int8 kernel: the one this process chose (the same
// environment), and none under ATTN_ISA=portable.
TEST_F(QuantizeCli, VersionNamesTheKernel) {
  ASSERT_EQ(run({"--version"}, "version"), 0);
  const std::string line = int8_supported() ? "\nint8 products: " + int8_description() + "\n"
                                            : "\nint8 products: " + int8_description() +
                                                  ": --quantize int8 runs in f32\n";
  EXPECT_NE(out_of("version").find(line), std::string::npos) << out_of("version");
  const char* isa = std::getenv("ATTN_ISA");
  if (!(isa && *isa) && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_TRUE(int8_supported()) << "a CPU with AVX2 runs int8";
  }
  ASSERT_EQ(run_with("ATTN_ISA", "portable", {"--version"}, "version_portable"), 0);
  EXPECT_NE(out_of("version_portable")
                .find("\nint8 products: none (ATTN_ISA=portable): --quantize int8 runs in f32\n"),
            std::string::npos)
      << out_of("version_portable");
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <attn executable>\n", argv[0]);
    return 2;
  }
  g_attn = argv[1];
  return RUN_ALL_TESTS();
}
