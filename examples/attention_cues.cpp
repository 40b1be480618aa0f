// d2l 10.1 Attention Cues: when each query attends only to the key of the same
// index, the attention weights are the identity matrix.
#include <fmt/format.h>

#include "attn/core/tensor.h"
#include "attn/viz/heatmap.h"
#include "examples.h"

namespace attn::examples {

int attention_cues(const Options& o) {
  Tensor attention_weights = eye(10).reshape({1, 1, 10, 10});
  fmt::print("attention_weights = eye(10).reshape((1, 1, 10, 10)): shape {}\n",
             shape_str(attention_weights.shape()));
  std::string path = figure_path(o, "attention_cues");
  viz::Heatmaps(attention_weights, {.xlabel = "Keys", .ylabel = "Queries"}).save(path);
  fmt::print("heatmap: {}.svg, {}.png\n", path, path);
  return 0;
}

}  // namespace attn::examples

#ifdef ATTN_EXAMPLE_MAIN
int main(int argc, char** argv) {
  return attn::examples::run_main(argc, argv, attn::examples::attention_cues);
}
#endif
