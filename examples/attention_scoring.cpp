// d2l 10.3 Attention Scoring Functions: masked softmax, additive attention and
// scaled dot-product attention on the chapter's toy inputs.
#include <fmt/format.h>

#include "attn/attn.h"
#include "attn/nn/attention.h"
#include "attn/viz/heatmap.h"
#include "examples.h"

namespace attn::examples {
namespace {

Tensor lens(std::vector<std::int64_t> v, Shape shape = {}) {
  return from_vector(v, std::move(shape));
}

// The weights of the two queries (one per batch item, valid lengths 2 and 6)
// over the 10 keys, on the full scale of a weight, 0 to 1.
void heatmap(const Options& o, const std::string& name, const std::string& title,
             const Tensor& weights) {
  std::string path = figure_path(o, name);
  viz::Heatmaps(weights.reshape({1, 1, 2, 10}), {.xlabel = "Keys",
                                                 .ylabel = "Queries",
                                                 .title = title,
                                                 .yticklabels = {"0", "1"},
                                                 .vmin = 0.0,
                                                 .vmax = 1.0})
      .save(path);
  fmt::print("heatmap: {}.png\n", path);
}

}  // namespace

int attention_scoring(const Options& o) {
  fmt::print("masked_softmax(rand(2, 2, 4), tensor([2, 3]))\n{}\n\n",
             nn::masked_softmax(rand({2, 2, 4}), lens({2, 3})).str());
  fmt::print("masked_softmax(rand(2, 2, 4), tensor([[1, 3], [2, 4]]))\n{}\n\n",
             nn::masked_softmax(rand({2, 2, 4}), lens({1, 3, 2, 4}, {2, 2})).str());

  Tensor keys = ones({2, 10, 2});
  // values: arange(40).reshape(1, 10, 4).repeat(2, 1, 1)
  Tensor values =
      arange(0.0, 40.0, 1.0, DType::f32).reshape({1, 10, 4}).expand({2, 10, 4}).contiguous();
  Tensor valid_lens = lens({2, 6});

  Tensor queries = normal(0, 1, {2, 1, 20});
  nn::AdditiveAttention additive(2, 20, 8, 0.1);
  additive.eval();
  fmt::print("AdditiveAttention(key_size=2, query_size=20, num_hiddens=8, dropout=0.1)\n{}\n\n",
             additive.forward(queries, keys, values, valid_lens).str());
  heatmap(o, "additive_attention", "Additive attention", additive.attention_weights);

  queries = normal(0, 1, {2, 1, 2});
  nn::DotProductAttention dot(0.5);
  nn::KeepAttentionWeights keep;  // the heatmap below needs the weights
  dot.eval();
  fmt::print("DotProductAttention(dropout=0.5)\n{}\n\n",
             dot.forward(queries, keys, values, valid_lens).str());
  heatmap(o, "dot_product_attention", "Scaled dot-product attention", dot.attention_weights);
  fmt::print(
      "Every key is the same vector, so the valid keys share the weight evenly\n"
      "(1/2 in the first batch, 1/6 in the second) and the masked ones get 0.\n");
  return 0;
}

}  // namespace attn::examples

#ifdef ATTN_EXAMPLE_MAIN
int main(int argc, char** argv) {
  return attn::examples::run_main(argc, argv, attn::examples::attention_scoring);
}
#endif
