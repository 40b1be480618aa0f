// apps/attn/precision_flag.h — what --precision bf16 gets on this CPU, said
// once on stderr where it is not what the user may expect.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "attn/ops/precision.h"

namespace attn::cli {

// The precision to run for --precision `text` (already checked to be one):
// f32 stays f32. bf16 is bf16 where the CPU has AVX-512 BF16, with a
// warning where bf16 will run slower than f32 here (bf16_slower_than_f32());
// without AVX-512 BF16 it is f32, with a
// warning that ends in `instead` ("training in f32", "decoding in f32").
// `say` false: the same choice, nothing printed (MPI ranks but the first).
Precision precision_for(Precision requested, const char* instead, bool say = true);
Precision precision_for(const std::string& text, const char* instead, bool say = true);

// --precision, defined once for every command that takes it (train's comes
// from the hyperparameter table, whose choices these are): f32 or bf16,
// the common meaning, then `detail` (what bf16 covers in that command).
CLI::Option* add_precision_flag(CLI::App* sub, std::string& precision, const std::string& detail);

// --version's line on the bf16 products: what runs them and how fast.
std::string bf16_description();

// --version's line on the int8 products (--quantize int8): the kernel that
// runs them (attn::int8_description()).
std::string int8_description();

}  // namespace attn::cli
