#include "precision_flag.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

#include "attn/ops/quantize.h"
#include "attn/seq2seq/hparams.h"

namespace attn::cli {

CLI::Option* add_precision_flag(CLI::App* sub, std::string& precision, const std::string& detail) {
  const std::string_view choices = seq2seq::hparam(seq2seq::HP::precision).choices;
  std::vector<std::string> names;
  for (std::size_t start = 0; start <= choices.size();) {
    const std::size_t bar = std::min(choices.find('|', start), choices.size());
    names.emplace_back(choices.substr(start, bar - start));
    start = bar + 1;
  }
  return sub
      ->add_option("--precision", precision,
                   "Matrix products in f32, or bf16: operands rounded to bfloat16, f32 sums, on "
                   "AVX-512 BF16 (without it f32, with a warning)" +
                       (detail.empty() ? std::string() : "; " + detail))
      ->check(CLI::IsMember(names))
      ->capture_default_str();
}

Precision precision_for(const std::string& text, const char* instead, bool say) {
  return precision_for(parse_precision(text), instead, say);
}

Precision precision_for(Precision p, const char* instead, bool say) {
  if (p != Precision::bf16) return p;
  if (!bf16_supported()) {
    if (say)
      fmt::print(stderr, "attn: warning: --precision bf16: this CPU has no AVX-512 BF16; {}\n",
                 instead);
    return Precision::f32;
  }
  if (say && bf16_slower_than_f32())
    fmt::print(stderr,
               "attn: warning: --precision bf16: this CPU's bf16 dot products make {:.2f}x the "
               "multiply-adds per second of its f32 FMAs (measured; no AMX), so bf16 runs "
               "slower than f32 here\n",
               bf16_dot_rate());
  return p;
}

std::string bf16_description() {
  if (!bf16_supported())
    return "bf16 products: none (no AVX-512 BF16: --precision bf16 runs in f32)";
  const std::string rate = fmt::format(
      "AVX-512 BF16 dot products at {:.2f}x the f32 FMA rate (measured)", bf16_dot_rate());
  if (bf16_products_on_amx()) return fmt::format("bf16 products: AMX tiles (oneDNN); {}", rate);
  return fmt::format("bf16 products: {}{}", rate,
                     bf16_slower_than_f32() ? ": slower than f32 on this CPU" : "");
}

std::string int8_description() {
  if (!int8_supported())
    return fmt::format("int8 products: {}: --quantize int8 runs in f32", attn::int8_description());
  return fmt::format("int8 products: {}", attn::int8_description());
}

}  // namespace attn::cli
