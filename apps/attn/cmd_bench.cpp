// attn bench <kernel> — timings of attn's kernels, printed for people or as
// one JSON line for scripts (the peers in bench/peers print the same keys).
//
// attn bench attention: scaled dot-product attention on (B, T, H, D) inputs,
// Q = K = --len, the fused op (default) or the materialized reference.
// Forward under no-grad (where --len <= 8 runs the decode kernel, as the op
// chooses); with --backward also forward + backward. Each is run
// once to warm up, then --repeats times; the median is reported. FLOPs follow
// the FlashAttention convention: forward 4 B H T^2 D (halved when causal),
// backward 2.5 times that. --isa and --no-small-path pick the f32 kernels
// (attn/ops/attention.h, AttentionKernelConfig), to compare them; --precision
// bf16 runs the call in a bf16 PrecisionScope (attn/ops/precision.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/ops/attention.h"
#include "attn/ops/precision.h"
#include "bench_timing.h"
#include "commands.h"
#include "precision_flag.h"
#include "rss.h"

namespace attn::cli {
namespace {

struct AttentionBenchOptions {
  std::int64_t len = 1024, heads = 8, dim = 64, batch = 1;
  bool causal = false, backward = false, reference = false, json = false;
  std::string isa;  // "": the default (ATTN_ISA, else the best this CPU has)
  std::string precision = "f32";
  bool no_small_path = false;
  int threads = 0;  // 0: the global setting
  int repeats = 5;
};

// Applies --isa and --no-small-path; an instruction set this CPU lacks is a
// runtime error (exit 1), an unknown name was refused by the parser (exit 2).
void configure_kernels(const AttentionBenchOptions& o) {
  AttentionKernelConfig kc = attention_kernel_config();
  if (!o.isa.empty()) {
    const std::vector<std::string> have = attention_isas();
    if (std::find(have.begin(), have.end(), o.isa) == have.end())
      throw Error(
          fmt::format("bench attention: --isa {}: this CPU cannot run the {} kernels (it "
                      "runs: {})",
                      o.isa, o.isa, fmt::join(have, ", ")));
    kc.isa = o.isa;
  }
  kc.small_path = !o.no_small_path;
  set_attention_kernel_config(kc);
}

int run_attention(const AttentionBenchOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  configure_kernels(o);
  const Precision precision = precision_for(o.precision, "timing f32");
  PrecisionScope precision_scope(precision);
  const AttentionKernelConfig kernels = attention_kernel_config();
  const Shape shape{o.batch, o.len, o.heads, o.dim};
  Generator gen(1);
  Tensor q = uniform(-1, 1, shape, gen), k = uniform(-1, 1, shape, gen),
         v = uniform(-1, 1, shape, gen), g = uniform(-1, 1, shape, gen);
  AttentionOptions opt;
  opt.causal = o.causal;
  auto attend = o.reference ? scaled_dot_product_attention_reference : scaled_dot_product_attention;
  const double flops = 4.0 * static_cast<double>(o.batch) * static_cast<double>(o.heads) *
                       static_cast<double>(o.len) * static_cast<double>(o.len) *
                       static_cast<double>(o.dim) / (o.causal ? 2.0 : 1.0);

  const double fwd_ms = median_ms(o.repeats, [&] {
    autograd::NoGradGuard no_grad;
    Tensor out = attend(q, k, v, opt);
  });
  std::optional<double> fwdbwd_ms;
  if (o.backward) {
    for (const Tensor& t : {q, k, v}) t.requires_grad_();
    fwdbwd_ms = median_ms(o.repeats, [&] {
      Tensor out = attend(q, k, v, opt);
      out.backward(g);
      for (const Tensor& t : {q, k, v}) t.zero_grad();
    });
  }
  const double gflops = flops / (fwd_ms * 1e6);
  const double rss = peak_rss_mib();
  if (o.json) {
    nlohmann::ordered_json j = {{"kernel", o.reference ? "reference" : "fused"},
                                {"batch", o.batch},
                                {"len", o.len},
                                {"heads", o.heads},
                                {"dim", o.dim},
                                {"causal", o.causal},
                                {"isa", kernels.isa},
                                {"small_path", kernels.small_path},
                                {"precision", precision_name(precision)},
                                {"threads", get_num_threads()},
                                {"repeats", o.repeats},
                                {"fwd_ms", fwd_ms},
                                {"fwdbwd_ms", nullptr},
                                {"gflops", gflops},
                                {"fwdbwd_gflops", nullptr},
                                {"peak_rss_mib", rss}};
    if (fwdbwd_ms) {
      j["fwdbwd_ms"] = *fwdbwd_ms;
      j["fwdbwd_gflops"] = 3.5 * flops / (*fwdbwd_ms * 1e6);
    }
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("attention ({}, {}): batch {}, {}, length {}, head dim {}, {}, {}\n",
             o.reference ? "materialized reference" : "fused", precision_name(precision), o.batch,
             count_of(o.heads, "head"), o.len, o.dim, o.causal ? "causal" : "no mask",
             count_of(get_num_threads(), "thread"));
  fmt::print("kernels: {}, small path {}\n", kernels.isa, kernels.small_path ? "on" : "off");
  fmt::print("forward           {:10.3f} ms  {:8.1f} GFLOP/s  (median of {})\n", fwd_ms, gflops,
             o.repeats);
  if (fwdbwd_ms)
    fmt::print("forward+backward  {:10.3f} ms  {:8.1f} GFLOP/s\n", *fwdbwd_ms,
               3.5 * flops / (*fwdbwd_ms * 1e6));
  fmt::print("peak RSS          {:10.1f} MiB\n", rss);
  return 0;
}

void setup_bench(CLI::App& parent, Context& ctx) {
  CLI::App* bench = parent.add_subcommand("bench", "Time attn's kernels; pick one");
  add_registered(*bench, "bench", ctx);
}

void setup_bench_attention(CLI::App& parent, Context& ctx) {
  CLI::App* sub = parent.add_subcommand(
      "attention",
      "Scaled dot-product attention on (B, T, H, D) inputs: time, GFLOP/s, peak memory");
  auto o = std::make_shared<AttentionBenchOptions>();
  sub->add_option("--len", o->len, "Sequence length (queries = keys)")
      ->check(in_range(std::int64_t{1}, std::int64_t{1} << 20))
      ->capture_default_str();
  sub->add_option("--heads", o->heads, "Attention heads")
      ->check(in_range(std::int64_t{1}, std::int64_t{4096}))
      ->capture_default_str();
  sub->add_option("--dim", o->dim, "Head dimension")
      ->check(in_range(std::int64_t{1}, std::int64_t{65536}))
      ->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size")
      ->check(in_range(std::int64_t{1}, std::int64_t{1} << 20))
      ->capture_default_str();
  sub->add_flag("--causal", o->causal, "Causal mask (query i sees keys 0..i)");
  sub->add_flag("--backward", o->backward, "Also time forward + backward");
  sub->add_flag("--reference", o->reference,
                "Time the materialized reference (bmm, masked softmax, bmm) instead");
  sub->add_option(
         "--isa", o->isa,
         "Instruction set of the f32 kernels (default: ATTN_ISA, else the best this CPU has)")
      ->check(CLI::IsMember({"avx512", "avx2", "portable"}))
      ->option_text("avx512|avx2|portable");
  add_precision_flag(sub, o->precision,
                     "here the tiled attention kernels and the reference's products (the small "
                     "path, the decode kernel and the AVX2 and portable kernels stay f32)");
  sub->add_flag("--no-small-path", o->no_small_path,
                "Run small problems (<= 64 queries and keys per head) on the tiled kernels too, "
                "not several heads at a time across the vector lanes");
  sub->add_option("--threads", o->threads, "Threads (default: the global --threads)")
      ->check(in_range(1, 1024))
      ->option_text("N");
  sub->add_option("--repeats", o->repeats, "Timed runs; the median is reported")
      ->check(in_range(1, 100000))
      ->capture_default_str();
  sub->add_flag("--json", o->json,
                "One JSON line: fwd_ms, fwdbwd_ms (null without --backward), gflops (forward), "
                "fwdbwd_gflops, peak_rss_mib, and the settings (isa, small_path, precision, ...)");
  set_action(sub, ctx, [o](const Context&) { return run_attention(*o); });
}

const Registration bench_registration{"", "bench", 60, setup_bench};
const Registration bench_attention_registration{"bench", "attention", 0, setup_bench_attention};

}  // namespace
}  // namespace attn::cli
