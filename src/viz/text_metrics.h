// src/viz/text_metrics.h — internal: the sizes of text that a figure's layout
// needs. The Canvas measures with cairo; layout tests pass a simple stand-in,
// so layouts are plain functions of their inputs and these measurements.
#pragma once

#include <string_view>

namespace attn::viz::detail {

class TextMetrics {
 public:
  virtual ~TextMetrics() = default;
  // Advance width of `text` at font `size` (points).
  virtual double text_width(std::string_view text, double size, bool bold = false) const = 0;
  virtual double cap_height(double size) const = 0;  // of "H"
  virtual double descent(double size) const = 0;  // below the baseline
  double line_height(double size) const { return cap_height(size) + descent(size); }
};

}  // namespace attn::viz::detail
