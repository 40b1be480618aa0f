// tests/viz/fake_text_metrics.h — text sizes for layout tests, without cairo:
// every character as wide as 0.6 of the font size (0.65 in bold), capitals
// 0.73 high and descenders 0.24 deep, close to DejaVu Sans.
#pragma once

#include <string_view>

#include "viz/text_metrics.h"

namespace attn::testing {

class FakeTextMetrics : public viz::detail::TextMetrics {
 public:
  double text_width(std::string_view text, double size, bool bold = false) const override {
    double chars = 0;
    for (char c : text)
      if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) chars += 1;  // UTF-8 code points
    return chars * size * (bold ? 0.65 : 0.6);
  }
  double cap_height(double size) const override { return 0.73 * size; }
  double descent(double size) const override { return 0.24 * size; }
};

}  // namespace attn::testing
