#include "attn/core/env.h"

#include <charconv>
#include <cstdlib>
#include <tuple>

#include "attn/core/error.h"

namespace attn {

namespace {

// clang-format off
constexpr std::array<EnvVarInfo, kNumEnvVars> kVars = {{
    {"ATTN_NUM_THREADS", "N", "threads of attn's pool (1..1024), as --threads"},
    {"ATTN_ISA", "avx512|avx2|portable",
     "caps every kernel chosen at run time (attention, products, log-softmax, dropout) at "
     "this instruction set, as on a CPU without AVX-512 (or AVX2); unset: the best the CPU has"},
    {"ATTN_ADAPTIVE_THREADS", "0", "0: every op keeps the whole team, however busy the machine"},
    {"ATTN_GRAIN_SCALE", "N", "fixes the grain scale of small ops at N (1..1024)"},
    {"ATTN_NO_BF16", "1", "as on a CPU without AVX-512 BF16 (bf16 runs in f32)"},
    {"ATTN_NO_VNNI", "1",
     "as on a CPU without VNNI, AVX-512's or AVX-VNNI (int8 runs on AVX2's kernel, or in f32 "
     "without AVX2)"},
    {"ATTN_NO_ARGMAX_SCREEN", "1", "greedy decoding computes every logit (no int8 screen)"},
}};
// clang-format on

// Every variable read once, together, at the first use of any.
struct Values {
  std::array<std::optional<std::string>, kNumEnvVars> text;
  Values() {
    for (std::size_t i = 0; i < kNumEnvVars; ++i) {
      const std::string name(kVars[i].name);
      if (const char* v = std::getenv(name.c_str()); v && *v) text[i] = v;
    }
  }
};

const Values& values() {
  static const Values v;
  return v;
}

}  // namespace

const std::array<EnvVarInfo, kNumEnvVars>& env_vars() { return kVars; }

const EnvVarInfo& env_var(EnvVar v) { return kVars[static_cast<std::size_t>(v)]; }

const std::optional<std::string>& env_text(EnvVar v) {
  return values().text[static_cast<std::size_t>(v)];
}

bool env_flag(EnvVar v) {
  const auto& t = env_text(v);
  return t && *t != "0";
}

std::optional<std::int64_t> env_int(EnvVar v, std::int64_t lo, std::int64_t hi) {
  const auto& t = env_text(v);
  if (!t) return std::nullopt;
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(t->data(), t->data() + t->size(), n);
  if (ec != std::errc() || end != t->data() + t->size() || n < lo || n > hi) return std::nullopt;
  return n;
}

std::optional<std::string> isa_cap() {
  const auto& t = env_text(EnvVar::isa);
  if (!t) return std::nullopt;
  if (*t == "avx512" || *t == "avx2" || *t == "portable") return *t;
  throw ValueError(fmt::format(
      "ATTN_ISA: unknown instruction set '{}' (expected avx512, avx2, portable; unset: the best)",
      *t));
}

void check_env() {
  for (const auto& [var, lo, hi] :
       {std::tuple{EnvVar::num_threads, 1, 1024}, std::tuple{EnvVar::grain_scale, 1, 1024}}) {
    const auto& t = env_text(var);
    ATTN_CHECK(!t || env_int(var, lo, hi), ValueError, "{}: '{}' is not a whole number in [{}, {}]",
               env_var(var).name, *t, lo, hi);
  }
  isa_cap();
}

}  // namespace attn
