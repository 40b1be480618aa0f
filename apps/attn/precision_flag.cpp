#include "precision_flag.h"

#include <fmt/format.h>

#include <cstdio>

#include "attn/ops/quantize.h"

namespace attn::cli {

Precision precision_for(const std::string& text, const char* instead, bool say) {
  const Precision p = parse_precision(text);
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
