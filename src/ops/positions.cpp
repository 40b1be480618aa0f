// Rotary embeddings, ALiBi's slopes and T5's buckets (attn/ops/positions.h).
#include "attn/ops/positions.h"

#include <algorithm>
#include <cmath>

#include "attn/autograd/node.h"
#include "attn/core/error.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

namespace {

// x rotated by `sign` times rotary's angles (sign -1: back), a new tensor.
Tensor rotate(const Tensor& x, std::int64_t start, double base, int sign) {
  const Tensor xc = x.contiguous();
  const std::int64_t D = xc.size(-1), T = xc.size(-2), rows = xc.numel() / D;
  // The angles' cosines and sines once per (position, pair), in f64.
  std::vector<double> c(static_cast<std::size_t>(T * (D / 2))), s(c.size());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < D / 2; ++i) {
      const double angle = static_cast<double>(start + t) *
                           std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(D));
      c[static_cast<std::size_t>(t * (D / 2) + i)] = std::cos(angle);
      s[static_cast<std::size_t>(t * (D / 2) + i)] = sign * std::sin(angle);
    }
  Tensor out = Tensor::empty(xc.shape(), xc.dtype());
  dispatch_float(xc.dtype(), "rotary", [&]<class T_>() {
    const T_* in = xc.data<T_>();
    T_* o = out.data<T_>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t t = r % T;
      for (std::int64_t i = 0; i < D / 2; ++i) {
        const auto k = static_cast<std::size_t>(t * (D / 2) + i);
        const T_ a = in[r * D + 2 * i], b = in[r * D + 2 * i + 1];
        const T_ ci = static_cast<T_>(c[k]), si = static_cast<T_>(s[k]);
        o[r * D + 2 * i] = a * ci - b * si;
        o[r * D + 2 * i + 1] = a * si + b * ci;
      }
    }
  });
  return out;
}

}  // namespace

Tensor rotary(const Tensor& x, std::int64_t start, double base) {
  ATTN_CHECK(x.dim() >= 2 && x.size(-1) % 2 == 0, ShapeError,
             "rotary: expected (..., T, D) with D even, got {}", shape_str(x.shape()));
  ATTN_CHECK(start >= 0, ValueError, "rotary: start must be >= 0, got {}", start);
  ATTN_CHECK(base > 1.0, ValueError, "rotary: base must be > 1, got {}", base);
  Tensor out = rotate(x, start, base, 1);
  return record(out, "rotary", {x}, [start, base](const Tensor& g, const Needs&) {
    return Grads{rotate(g, start, base, -1)};
  });
}

std::vector<double> alibi_slopes(std::int64_t heads) {
  ATTN_CHECK(heads >= 1, ValueError, "alibi_slopes: heads must be >= 1, got {}", heads);
  auto power_of_two = [](std::int64_t n) {
    std::vector<double> s;
    for (std::int64_t k = 1; k <= n; ++k)
      s.push_back(std::exp2(-8.0 * static_cast<double>(k) / static_cast<double>(n)));
    return s;
  };
  std::int64_t n = 1;
  while (n * 2 <= heads) n *= 2;
  std::vector<double> slopes = power_of_two(n);
  const std::vector<double> more = power_of_two(2 * n);
  for (std::size_t k = 0; static_cast<std::int64_t>(slopes.size()) < heads; k += 2)
    slopes.push_back(more[k]);
  return slopes;
}

std::int64_t t5_bucket(std::int64_t offset, bool bidirectional, std::int64_t num_buckets,
                       std::int64_t max_distance) {
  ATTN_CHECK(num_buckets >= (bidirectional ? 4 : 2) && max_distance >= 1, ValueError,
             "t5_bucket: {} buckets up to distance {} are too few", num_buckets, max_distance);
  std::int64_t bucket = 0, n = -offset;  // n: how far the key lies before the query
  if (bidirectional) {
    num_buckets /= 2;
    if (n < 0) bucket += num_buckets;
    n = n < 0 ? -n : n;
  } else {
    n = std::max<std::int64_t>(n, 0);
  }
  const std::int64_t exact = num_buckets / 2;
  if (n < exact) return bucket + n;
  const double scaled = std::log(static_cast<double>(n) / static_cast<double>(exact)) /
                        std::log(static_cast<double>(max_distance) / static_cast<double>(exact)) *
                        static_cast<double>(num_buckets - exact);
  return bucket +
         std::min<std::int64_t>(exact + static_cast<std::int64_t>(scaled), num_buckets - 1);
}

}  // namespace attn
