// attn/core/env.h — the environment variables attn reads, in one table.
//
// Each variable is read once, at its first use, and parsed here by the one
// rule of its kind; nothing else in attn calls getenv for them. The table
// is also the documentation: `attn --help` and docs/cli.md list it.
//
//   ATTN_NUM_THREADS=N        threads of attn's pool (1..1024; else ignored),
//                             as --threads
//   ATTN_ISA=avx512|avx2|portable
//                             caps every kernel chosen at run time (attention,
//                             f32 and int8 products, log-softmax statistics,
//                             dropout's random words) at that instruction set,
//                             as on a CPU without AVX-512 (or AVX2); unset: the
//                             best the CPU has. Another value is an error of
//                             each command.
//   ATTN_ADAPTIVE_THREADS=0   keeps the whole team on every op, however busy
//                             the machine (attn/core/threads.h)
//   ATTN_GRAIN_SCALE=N        fixes the grain scale at N (1..1024)
//   ATTN_NO_BF16=1            as on a CPU without AVX-512 BF16
//   ATTN_NO_VNNI=1            as on a CPU without VNNI, AVX-512's or AVX-VNNI
//                             (int8 on the AVX2 kernel, or in f32 without AVX2)
//   ATTN_NO_ARGMAX_SCREEN=1   greedy decoding computes every logit (no int8
//                             screen of the output layer)
//
// A flag variable (the ATTN_NO_* and ATTN_ADAPTIVE_THREADS) is on when set
// to anything but "" and "0".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attn {

enum class EnvVar : std::size_t {
  num_threads,
  isa,
  adaptive_threads,
  grain_scale,
  no_bf16,
  no_vnni,
  no_argmax_screen,
  count
};

struct EnvVarInfo {
  std::string_view name;  // "ATTN_ISA"
  std::string_view values;  // "avx512|avx2|portable"
  std::string_view meaning;  // one line
};

inline constexpr std::size_t kNumEnvVars = static_cast<std::size_t>(EnvVar::count);
const std::array<EnvVarInfo, kNumEnvVars>& env_vars();
const EnvVarInfo& env_var(EnvVar v);

// The variable's text as the process started, or nullopt when it is unset
// or empty. Read once.
const std::optional<std::string>& env_text(EnvVar v);

// A flag variable: set to anything but "" and "0".
bool env_flag(EnvVar v);

// A whole number in [lo, hi], or nullopt when unset, empty or not such a
// number (the variables of this kind are ignored then, as documented).
std::optional<std::int64_t> env_int(EnvVar v, std::int64_t lo, std::int64_t hi);

// ATTN_ISA as a cap: nullopt when unset (the best the CPU has), else
// "avx512", "avx2" or "portable". Any other text is one ValueError,
// wherever the kernels are chosen: "ATTN_ISA: unknown instruction set
// 'sse9' (expected avx512, avx2, portable; unset: the best)".
std::optional<std::string> isa_cap();

// Checks every variable that is set: ValueError naming the first one whose
// value is not of its kind ("ATTN_NUM_THREADS: 'abc' is not a whole number
// in [1, 1024]"). The attn program calls it before any command; a library
// user may (else ATTN_NUM_THREADS and ATTN_GRAIN_SCALE of another form are
// ignored, and ATTN_ISA fails where the kernels are chosen).
void check_env();

}  // namespace attn
