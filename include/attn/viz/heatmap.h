// attn/viz/heatmap.h — a grid of attention-weight heatmaps (d2l's show_heatmaps).
//
//   Heatmaps(attention_weights.reshape({1, 1, Q, K}), {.xlabel = "Keys", .ylabel = "Queries"})
//       .save("out/attention");                      // out/attention.svg + .png
//
// The grid has rows x cols panels, each a Q x K matrix drawn as crisp cells
// (row i of the matrix is the i-th row from the top, column j the j-th from
// the left, as matplotlib's imshow draws it). All panels share ONE colour
// scale, shown by one colorbar on the right (d2l's show_heatmaps scales each
// panel on its own and labels the bar with the last one's range; one shared
// scale is what the bar claims). Cell size is chosen so that a 4 x 4 matrix is
// not tiny and a 100 x 100 one still fits; tick labels are thinned out when
// the cells are too small to label each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/viz/color.h"
#include "attn/viz/figure.h"

namespace attn::viz {

struct HeatmapOptions {
  std::string xlabel = "Keys";  // under each column of panels
  std::string ylabel = "Queries";  // left of each row of panels
  std::vector<std::string> titles{};  // empty, or one per column ("Head 1", ...), above the top row
  std::vector<std::string> row_labels{};  // empty, or one per row ("Layer 1", ...), at the far left
  std::string title{};  // optional title over the whole figure
  // Tick labels: empty for integer indices (0, 1, ...), else one per key
  // (xticklabels, K of them) or per query (yticklabels, Q of them), e.g. tokens.
  // Long x labels are rotated to read upwards.
  std::vector<std::string> xticklabels{};
  std::vector<std::string> yticklabels{};
  Colormap cmap = Colormap::reds;
  // Colour scale limits; each defaults to the min / max over all panels.
  std::optional<double> vmin{}, vmax{};
  // Side of one cell in points; 0 picks one from the matrix and grid size.
  double cell_size = 0;
  bool colorbar = true;
};

class Heatmaps : public Figure {
 public:
  // `matrices`: (rows, cols, Q, K), or (cols, Q, K) for one row, or (Q, K) for
  // a single panel. Any dtype; values must be finite.
  explicit Heatmaps(const Tensor& matrices, HeatmapOptions options = {});
  // matrices[r][c] is a 2-D (Q, K) tensor; every row has the same number of
  // panels and every panel the same shape.
  explicit Heatmaps(const std::vector<std::vector<Tensor>>& matrices, HeatmapOptions options = {});

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t num_queries() const { return q_; }
  std::int64_t num_keys() const { return k_; }
  const HeatmapOptions& options() const { return options_; }
  // The colour scale actually used (after defaults and widening a flat range).
  double vmin() const { return vmin_; }
  double vmax() const { return vmax_; }

 protected:
  FigureSize draw(detail::Canvas& canvas) const override;

 private:
  void init();  // validates options and data, settles vmin/vmax
  double value(std::int64_t r, std::int64_t c, std::int64_t i, std::int64_t j) const {
    return values_[static_cast<std::size_t>(((r * cols_ + c) * q_ + i) * k_ + j)];
  }

  HeatmapOptions options_;
  std::int64_t rows_ = 0, cols_ = 0, q_ = 0, k_ = 0;
  std::vector<double> values_;  // (rows, cols, Q, K) row-major
  double vmin_ = 0, vmax_ = 1;
};

}  // namespace attn::viz
