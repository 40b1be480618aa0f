// Printing in PyTorch's style, so demos show the chapter's tensors as the book does:
// 4 decimals; whole numbers as "2."; scientific notation when the magnitudes
// span more than 1e3 or leave [1e-4, 1e8); more than 1000 elements summarized
// with "..." keeping 3 items at each edge.
#include <fmt/format.h>

#include <cmath>
#include <ostream>
#include <sstream>

#include "attn/core/tensor.h"

namespace attn {
namespace {

constexpr std::int64_t kThreshold = 1000;
constexpr std::int64_t kEdgeItems = 3;

struct Formatter {
  bool floating = true;
  bool int_mode = false;
  bool sci_mode = false;
  std::size_t width = 1;

  std::string format(double v) const {
    if (!floating) return fmt::format("{}", static_cast<std::int64_t>(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (int_mode) return fmt::format("{:.0f}.", v);
    if (sci_mode) return fmt::format("{:.4e}", v);
    return fmt::format("{:.4f}", v);
  }
};

// Indices shown along one dim of size n.
std::vector<std::int64_t> shown(std::int64_t n, bool summarize) {
  std::vector<std::int64_t> idx;
  if (summarize && n > 2 * kEdgeItems) {
    for (std::int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);  // the "..." marker
    for (std::int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
  } else {
    for (std::int64_t i = 0; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

void collect(const Tensor& t, std::vector<std::int64_t>& index, std::size_t d, bool summarize,
             std::vector<double>& out) {
  if (d == static_cast<std::size_t>(t.dim())) {
    out.push_back(t.at(index));
    return;
  }
  for (auto i : shown(t.shape()[d], summarize)) {
    if (i < 0) continue;
    index[d] = i;
    collect(t, index, d + 1, summarize, out);
  }
}

void render(const Tensor& t, std::vector<std::int64_t>& index, std::size_t d, bool summarize,
            const Formatter& f, std::size_t indent, std::string& out) {
  auto pad = [&](const std::string& s) { return std::string(f.width - s.size(), ' ') + s; };
  if (d == static_cast<std::size_t>(t.dim())) {
    out += pad(f.format(t.at(index)));
    return;
  }
  out += '[';
  auto idx = shown(t.shape()[d], summarize);
  bool last_dim = d + 1 == static_cast<std::size_t>(t.dim());
  std::size_t rest = static_cast<std::size_t>(t.dim()) - d - 1;
  for (std::size_t k = 0; k < idx.size(); ++k) {
    if (k > 0) {
      out += ',';
      if (last_dim) {
        out += ' ';
      } else {
        out += std::string(rest, '\n');
        out += std::string(indent + 1, ' ');
      }
    }
    if (idx[k] < 0) {
      out += "...";
      continue;
    }
    index[d] = idx[k];
    render(t, index, d + 1, summarize, f, indent + 1, out);
  }
  out += ']';
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  bool summarize = numel() > kThreshold;
  std::vector<std::int64_t> index(dim(), 0);
  std::vector<double> values;
  collect(*this, index, 0, summarize, values);

  Formatter f;
  f.floating = is_floating(dtype());
  if (f.floating) {
    std::vector<double> finite;
    for (double v : values)
      if (std::isfinite(v)) finite.push_back(v);
    f.int_mode = true;
    for (double v : finite)
      if (v != std::ceil(v)) f.int_mode = false;
    double amax = 0, amin = INFINITY;
    for (double v : finite) {
      double a = std::fabs(v);
      if (a == 0) continue;
      amax = std::max(amax, a);
      amin = std::min(amin, a);
    }
    if (!f.int_mode && amax > 0) f.sci_mode = amax / amin > 1000.0 || amax > 1e8 || amin < 1e-4;
    if (f.int_mode && amax > 1e8) {
      f.int_mode = false;
      f.sci_mode = true;
    }
  }
  for (double v : values) f.width = std::max(f.width, f.format(v).size());

  std::string body;
  if (numel() == 0) {
    body = "[]";
  } else {
    render(*this, index, 0, summarize, f, prefix.size(), body);
  }
  std::string out = prefix + body;
  if (dtype() != DType::f32 && dtype() != DType::i64)
    out += fmt::format(", dtype={}", dtype_name(dtype()));
  if (numel() == 0 && dim() != 1) out += fmt::format(", size={}", shape_str(shape()));
  if (requires_grad()) out += ", requires_grad=True";
  out += ')';
  return out;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace attn
