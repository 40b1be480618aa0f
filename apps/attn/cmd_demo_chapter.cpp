// attn demo <section> for the sections of d2l's attention chapter; the code of
// each section lives in examples/ (also built as a standalone program).
#include <memory>
#include <string>

#include "commands.h"
#include "examples.h"

namespace attn::cli {
namespace {

struct Section {
  const char* name;
  const char* help;
  int (*run)(const examples::Options&);
};

const Section kSections[] = {
    {"cues", "10.1: the eye(10) attention heatmap (Keys / Queries)", examples::attention_cues},
    {"nadaraya-watson",
     "10.2: kernel regression by average pooling, Gaussian kernel and a trained width",
     examples::nadaraya_watson},
    {"scoring", "10.3: masked softmax, additive and scaled dot-product attention",
     examples::attention_scoring},
    {"multihead", "10.5-10.6: multi-head attention and self-attention shapes, heads as heatmaps",
     examples::multihead_attention},
    {"positional-encoding",
     "10.6: sinusoidal positional encoding, its plot, heatmap and rotation property",
     examples::positional_encoding},
    {"complexity",
     "10.6: CNN, RNN and self-attention measured: time exponents in n and d, sequential "
     "operations, maximum path lengths, fused against materialized memory",
     examples::complexity},
    {"positions",
     "10.6: permutation equivariance without positions, relative positions, stacked layers",
     examples::positions},
};

void setup_section(const Section& s, CLI::App& parent, Context& ctx) {
  auto out = std::make_shared<std::string>("out");
  CLI::App* sub = parent.add_subcommand(s.name, s.help);
  sub->add_option("--out", *out, "Folder for the figures (SVG and PNG)")->capture_default_str();
  set_action(sub, ctx, [out, run = s.run](const Context& c) {
    return run(examples::Options{*out, c.global.seed});
  });
}

// Every section of the table, in its order, under `attn demo`.
const Registration sections_reg{"demo", "", 20, [](CLI::App& parent, Context& ctx) {
                                  for (const Section& s : kSections) setup_section(s, parent, ctx);
                                }};

}  // namespace
}  // namespace attn::cli
