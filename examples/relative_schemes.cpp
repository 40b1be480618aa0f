// Beyond d2l 10.6: the relative schemes attn's Transformer offers besides the
// book's sinusoids (--positions rotary|alibi|relative), each checked for the
// property that makes it relative (the score of a query at i and a key at j
// depends on i - j only) and drawn by offset. Part of `attn demo positions`.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "attn/attn.h"
#include "attn/nn/positional.h"
#include "attn/ops/positions.h"
#include "attn/viz/heatmap.h"
#include "examples.h"

namespace attn::examples {
namespace {

constexpr std::int64_t kLen = 16;  // positions drawn
constexpr std::int64_t kDim = 16;  // head dim of the rotary check

double dot_rows(const Tensor& a, std::int64_t i, const Tensor& b, std::int64_t j) {
  return sum(mul(a.select(0, i), b.select(0, j))).item<double>();
}

// max |s(i, j) - s(i + shift, j + shift)| over i, j < kLen, shifts 1, 7, 50
// and `trials` random q, k: rotary (q and k turned by their positions), and
// for contrast d2l's sinusoids added to q and k.
void rotary_check(std::uint64_t seed) {
  Generator gen(seed);
  const nn::PositionalEncoding pe(kDim, 0.0, 128);
  const Tensor P = pe.P.select(0, 0).to(DType::f64);  // (128, kDim)
  double rot = 0, added = 0;
  for (int t = 0; t < 20; ++t) {
    const Tensor q = uniform(-1, 1, {1, kDim}, gen, DType::f64);
    const Tensor k = uniform(-1, 1, {1, kDim}, gen, DType::f64);
    // Row p of each: the vector at position p.
    const Tensor qr = rotary(q.expand({128, kDim}).contiguous().unsqueeze(0), 0).select(0, 0);
    const Tensor kr = rotary(k.expand({128, kDim}).contiguous().unsqueeze(0), 0).select(0, 0);
    const Tensor qa = add(q, P), ka = add(k, P);
    for (std::int64_t shift : {1, 7, 50})
      for (std::int64_t i = 0; i < kLen; ++i)
        for (std::int64_t j = 0; j < kLen; ++j) {
          rot = std::max(rot,
                         std::abs(dot_rows(qr, i, kr, j) - dot_rows(qr, i + shift, kr, j + shift)));
          added = std::max(
              added, std::abs(dot_rows(qa, i, ka, j) - dot_rows(qa, i + shift, ka, j + shift)));
        }
  }
  fmt::print(
      "\nRelative schemes (beyond the book; --positions rotary|alibi|relative)\n"
      "Is the score of q at i and k at j a function of i - j? max |s(i, j) - s(i + s, j + s)|\n"
      "over 20 random q, k of {} dims, i, j < {}, shifts 1, 7 and 50:\n"
      "  rotary (q, k turned by position x theta_i):   {:.1e}  (rounding: relative)\n"
      "  sinusoids added to q and k (d2l):             {:.2f}   (absolute)\n",
      kDim, kLen, rot, added);
}

}  // namespace

void relative_schemes(const Options& o) {
  rotary_check(o.seed + 11);
  // ALiBi: fixed slopes, the bias -m |i - j| of a (Q, K) grid by construction.
  const std::int64_t heads = 4;
  const std::vector<double> slopes = alibi_slopes(heads);
  fmt::print("  alibi: head slopes {:.4g}; bias -m |i - j|, a function of i - j by construction\n",
             fmt::join(slopes, ", "));
  // T5: the buckets of the query minus key distance, bidirectional (an encoder).
  std::vector<std::int64_t> buckets;
  for (std::int64_t d : {0, 1, 2, 7, 8, 12, 16, 32, 64, 127, 128, 500})
    buckets.push_back(t5_bucket(-d, true));
  fmt::print(
      "  relative (T5): key d before the query -> bucket; d = 0, 1, 2, 7, 8, 12, 16, 32, 64, "
      "127, 128, 500:\n    {}\n  (exact up to 7, then logarithmic; one learned bias per head "
      "and bucket)\n",
      fmt::join(buckets, ", "));

  // Pictures by (query i, key j): rotary's score of one vector with itself
  // at i and j, ALiBi's first and last heads, T5's buckets.
  Generator gen(o.seed + 12);
  const Tensor x = uniform(-1, 1, {1, kDim}, gen, DType::f64);
  const Tensor xr = rotary(x.expand({kLen, kDim}).contiguous().unsqueeze(0), 0).select(0, 0);
  const Tensor rot = matmul(xr, xr.transpose(0, 1));  // (kLen, kLen)
  auto grid = [](const Tensor& by_offset, std::int64_t h) {  // (H, 2K - 1) -> (K, K) of head h
    Tensor g = Tensor::empty({kLen, kLen}, DType::f64);
    const Tensor row = by_offset.select(0, h).to(DType::f64).contiguous();
    for (std::int64_t i = 0; i < kLen; ++i)
      for (std::int64_t j = 0; j < kLen; ++j)
        g.data<double>()[i * kLen + j] = row.data<double>()[i - j + kLen - 1];
    return g;
  };
  const Tensor alibi = alibi_bias(heads, kLen, DType::f64);
  Tensor bucket_ids = Tensor::empty({1, 2 * kLen - 1}, DType::f64);
  for (std::int64_t i = 0; i < 2 * kLen - 1; ++i)
    bucket_ids.data<double>()[i] = static_cast<double>(t5_bucket(kLen - 1 - i, true));
  // Each panel on its own scale, [0, 1] from its least to its largest
  // value; ALiBi's two heads on head 1's, so that their reach compares.
  auto scaled = [](const Tensor& t, const Tensor& range) {
    const std::vector<double> v = to_vector<double>(range);
    const double lo = *std::min_element(v.begin(), v.end());
    const double hi = *std::max_element(v.begin(), v.end());
    return div(sub(t, lo), hi > lo ? hi - lo : 1.0);
  };
  const Tensor head1 = grid(alibi, 0), head2 = grid(alibi, 1), ids = grid(bucket_ids, 0);
  const std::string path = figure_path(o, "relative_positions");
  viz::Heatmaps({{scaled(rot, rot), scaled(head1, head1), scaled(head2, head1), scaled(ids, ids)}},
                {.xlabel = "Key position j",
                 .ylabel = "Query position i",
                 .titles = {"rotary: x(i) . x(j)", fmt::format("alibi head 1 (m {})", slopes[0]),
                            fmt::format("alibi head 2 (m {})", slopes[1]), "T5 bucket of i - j"},
                 .cmap = viz::Colormap::blues})
      .save(path);
  fmt::print("  every panel is constant along its diagonals (i - j fixed); plot: {}.png\n", path);
}

}  // namespace attn::examples
