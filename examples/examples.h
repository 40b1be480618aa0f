// examples/examples.h — one program per section of d2l's attention chapter.
//
// Each section is a function that prints what the book prints and writes its
// figures (SVG and PNG) into `out_dir`. The same functions run as
// `attn demo <section>` and as the standalone programs examples/<section>.cpp
// build into (build/release/examples/<section>).
#pragma once

#include <cstdint>
#include <string>

namespace attn::examples {

struct Options {
  std::string out_dir = "out";
  std::uint64_t seed = 0;
};

int attention_cues(const Options& o);  // 10.1: the eye(10) heatmap
int nadaraya_watson(const Options& o);  // 10.2: kernel regression, three ways
int attention_scoring(const Options& o);  // 10.3: masked softmax, additive, dot product
int multihead_attention(const Options& o);  // 10.5 and 10.6: multi-head and self-attention
int positional_encoding(const Options& o);  // 10.6: sinusoidal positions
int complexity(const Options& o);  // 10.6: CNN, RNN and self-attention, measured
int positions(const Options& o);  // 10.6: permutation, relative positions, depth
// positions' part beyond the book: rotary, ALiBi and T5's relative biases.
void relative_schemes(const Options& o);

// main() of a standalone example: parses --out DIR and --seed N.
int run_main(int argc, char** argv, int (*section)(const Options&));

// Writes a figure's SVG and PNG into o.out_dir and prints where they went.
std::string figure_path(const Options& o, const std::string& name);

}  // namespace attn::examples
