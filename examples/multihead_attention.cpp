// d2l 10.5 Multi-Head Attention and 10.6 Self-Attention.
#include <fmt/format.h>

#include "attn/attn.h"
#include "attn/nn/attention.h"
#include "attn/viz/heatmap.h"
#include "examples.h"

namespace attn::examples {

int multihead_attention(const Options& o) {
  const std::int64_t num_hiddens = 100, num_heads = 5;
  nn::MultiHeadAttention attention(num_hiddens, num_hiddens, num_hiddens, num_hiddens, num_heads,
                                   0.5);
  attention.eval();
  // The chapter prints and draws the weights: take the materialized path.
  nn::KeepAttentionWeights keep;
  fmt::print("MultiHeadAttention(100, 100, 100, 100, num_heads=5, dropout=0.5): {} parameters\n",
             attention.num_parameters());
  const std::int64_t batch_size = 2, num_queries = 4, num_kvpairs = 6;
  Tensor valid_lens = from_vector(std::vector<std::int64_t>{3, 2});
  Tensor X = ones({batch_size, num_queries, num_hiddens});
  Tensor Y = ones({batch_size, num_kvpairs, num_hiddens});
  Tensor out = attention.forward(X, Y, Y, valid_lens);
  fmt::print("attention(X, Y, Y, valid_lens).shape = {}\n", shape_str(out.shape()));
  fmt::print("attention_weights.shape = {}  (batch * heads, queries, keys)\n",
             shape_str(attention.attention_weights().shape()));

  // Self-attention: queries, keys and values are the same tokens.
  Tensor Xr = randn({batch_size, num_queries, num_hiddens});
  Tensor self = attention.forward(Xr, Xr, Xr, valid_lens);
  fmt::print("self-attention: attention(X, X, X, valid_lens).shape = {}\n",
             shape_str(self.shape()));
  // Batch element 0's heads, side by side.
  Tensor w = attention.attention_weights()
                 .narrow(0, 0, num_heads)
                 .reshape({1, num_heads, num_queries, num_queries});
  std::vector<std::string> titles;
  for (std::int64_t h = 1; h <= num_heads; ++h) titles.push_back(fmt::format("Head {}", h));
  std::string path = figure_path(o, "self_attention_heads");
  viz::Heatmaps(w, {.xlabel = "Keys", .ylabel = "Queries", .titles = titles}).save(path);
  fmt::print("heatmap of the {} heads (valid length 3 of 4 keys): {}.png\n", num_heads, path);
  return 0;
}

}  // namespace attn::examples

#ifdef ATTN_EXAMPLE_MAIN
int main(int argc, char** argv) {
  return attn::examples::run_main(argc, argv, attn::examples::multihead_attention);
}
#endif
