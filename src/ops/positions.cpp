// Rotary embeddings, ALiBi's slopes and T5's buckets (attn/ops/positions.h).
#include "attn/ops/positions.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

#include "attn/autograd/node.h"
#include "attn/core/error.h"
#include "attn/ops/index.h"
#include "core/parallel.h"
#include "ops/positions_internal.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

namespace {

// The cosines and sines of rotary's angles position x theta_i, theta_i =
// base^(-2i / D), for positions [0, P) and pairs i < D / 2, in f64: (P, D / 2)
// each.
struct Angles {
  std::int64_t P = 0;
  std::vector<double> cos, sin;
};

Angles compute_angles(std::int64_t D, double base, std::int64_t P) {
  const std::int64_t half = D / 2;
  Angles a;
  a.P = P;
  a.cos.resize(static_cast<std::size_t>(P * half));
  a.sin.resize(a.cos.size());
  for (std::int64_t i = 0; i < half; ++i) {
    const double theta = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(D));
    for (std::int64_t t = 0; t < P; ++t) {
      const double angle = static_cast<double>(t) * theta;
      a.cos[static_cast<std::size_t>(t * half + i)] = std::cos(angle);
      a.sin[static_cast<std::size_t>(t * half + i)] = std::sin(angle);
    }
  }
  return a;
}

// Positions beyond this are computed per call, not kept.
constexpr std::int64_t kKeptPositions = 1 << 16;

// The table kept under `key` (one map per call site), made anew by make(n)
// when the kept one covers fewer than `need` positions (covers(t); 0 for
// none yet): n grows geometrically, as a decoder asks for one more
// position each step, from 64 to kKeptPositions; beyond that each call
// makes its own. A table replaced lives on in whoever holds it.
template <class Key, class Covers, class Make>
std::invoke_result_t<Make, std::int64_t> kept_table(const Key& key, std::int64_t need,
                                                    Covers covers, Make make) {
  using Table = std::invoke_result_t<Make, std::int64_t>;
  if (need > kKeptPositions) return make(need);
  static std::mutex mutex;
  static std::map<Key, Table> kept;
  const std::lock_guard lock(mutex);
  Table& t = kept[key];
  const std::int64_t have = covers(t);
  if (have < need) t = make(std::min(kKeptPositions, std::max({need, 2 * have, std::int64_t{64}})));
  return t;
}

// The angles of positions [0, P), kept per (D, base): each computed once.
std::shared_ptr<const Angles> angles(std::int64_t D, double base, std::int64_t P) {
  return kept_table(
      std::pair{D, base}, P, [](const std::shared_ptr<const Angles>& a) { return a ? a->P : 0; },
      [&](std::int64_t n) { return std::make_shared<const Angles>(compute_angles(D, base, n)); });
}

// Elements from which a rotation is split over threads.
constexpr std::int64_t kParallelElements = std::int64_t{1} << 16;

// x (rows of D) rotated by `sign` times rotary's angles (sign -1: back), a
// new tensor; flat row r sits at position pos(r), every position in [0, P).
// The angles are read from the table kept per dtype (detail::rotary_angles,
// rounded once), then each row is a multiply-add over its pairs.
template <class Pos>
Tensor rotate(const Tensor& x, std::int64_t P, double base, int sign, Pos pos) {
  const Tensor xc = x.contiguous();
  const std::int64_t D = xc.size(-1), half = D / 2, rows = D == 0 ? 0 : xc.numel() / D;
  Tensor out = Tensor::empty(xc.shape(), xc.dtype());
  if (rows == 0 || P == 0) return out;
  const Tensor table = detail::rotary_angles(D, base, P, xc.dtype());
  dispatch_float(xc.dtype(), "rotary", [&]<class T_>() {
    const T_* cs = table.data<T_>();
    const T_* sn = cs + table.size(1) * half;
    const T_ sg = static_cast<T_>(sign);
    const T_* in = xc.data<T_>();
    T_* o = out.data<T_>();
    detail::parallel_ranges(rows, detail::loop_threads(rows * D >= kParallelElements),
                            [&](std::int64_t r0, std::int64_t r1) {
                              for (std::int64_t r = r0; r < r1; ++r) {
                                const T_* c = cs + pos(r) * half;
                                const T_* si = sn + pos(r) * half;
                                const T_* u = in + r * D;
                                T_* y = o + r * D;
#pragma omp simd
                                for (std::int64_t i = 0; i < half; ++i) {
                                  const T_ s_i = sg * si[i];
                                  y[2 * i] = u[2 * i] * c[i] - u[2 * i + 1] * s_i;
                                  y[2 * i + 1] = u[2 * i] * s_i + u[2 * i + 1] * c[i];
                                }
                              }
                            });
  });
  return out;
}

}  // namespace

Tensor detail::rotary_angles(std::int64_t D, double base, std::int64_t P, DType dtype) {
  const std::int64_t half = D / 2;
  // Rounds all the positions `a` holds to `dtype`: (2, a.P, half).
  const auto typed = [&](const Angles& a) {
    Tensor out = Tensor::empty({2, a.P, half}, dtype);
    dispatch_float(dtype, "rotary_angles", [&]<class T_>() {
      T_* o = out.data<T_>();
      for (std::int64_t k = 0; k < a.P * half; ++k) {
        o[k] = static_cast<T_>(a.cos[static_cast<std::size_t>(k)]);
        o[a.P * half + k] = static_cast<T_>(a.sin[static_cast<std::size_t>(k)]);
      }
    });
    return out;
  };
  // Kept per (D, base, dtype) like the f64 angles, so that a decoding step
  // reads the table rather than rounding every position again.
  return kept_table(
      std::tuple{D, base, dtype}, P, [](const Tensor& t) { return t.defined() ? t.size(1) : 0; },
      [&](std::int64_t n) { return typed(*angles(D, base, n)); });
}

namespace {

Tensor rotate_rows(const Tensor& x, std::int64_t start, double base, int sign) {
  const std::int64_t T = x.size(-2);
  return rotate(x, start + T, base, sign, [start, T](std::int64_t r) { return start + r % T; });
}

// Heads x (B, T, H, D): flat row r = (b, t, h) at position start[b] + t.
Tensor rotate_heads(const Tensor& x, const Tensor& start, double base, int sign) {
  const std::int64_t B = x.size(0), T = x.size(1), H = x.size(2);
  std::vector<std::int64_t> s(static_cast<std::size_t>(B), 0);
  if (start.defined())
    for (std::int64_t b = 0; b < B; ++b)
      s[static_cast<std::size_t>(b)] = start.data<std::int64_t>()[b];
  const std::int64_t P = (B == 0 ? 0 : *std::max_element(s.begin(), s.end())) + T;
  return rotate(x, P, base, sign, [&s, T, H](std::int64_t r) {
    return s[static_cast<std::size_t>(r / (T * H))] + r / H % T;
  });
}

}  // namespace

Tensor rotary(const Tensor& x, std::int64_t start, double base) {
  ATTN_CHECK(x.dim() >= 2 && x.size(-1) % 2 == 0, ShapeError,
             "rotary: expected (..., T, D) with D even, got {}", shape_str(x.shape()));
  ATTN_CHECK(start >= 0, ValueError, "rotary: start must be >= 0, got {}", start);
  ATTN_CHECK(base > 1.0, ValueError, "rotary: base must be > 1, got {}", base);
  Tensor out = rotate_rows(x, start, base, 1);
  return record(out, "rotary", {x}, [start, base](const Tensor& g, const Needs&) {
    return Grads{rotate_rows(g, start, base, -1)};
  });
}

Tensor rotary_heads(const Tensor& x, const Tensor& start, double base) {
  ATTN_CHECK(x.dim() == 4 && x.size(-1) % 2 == 0, ShapeError,
             "rotary_heads: expected heads (B, T, H, D) with D even, got {}", shape_str(x.shape()));
  ATTN_CHECK(base > 1.0, ValueError, "rotary_heads: base must be > 1, got {}", base);
  Tensor s;
  if (start.defined()) {
    ATTN_CHECK(start.dim() == 1 && start.size(0) == x.size(0) && !is_floating(start.dtype()),
               ShapeError, "rotary_heads: start must be integers of shape [{}], got {} {}",
               x.size(0), dtype_name(start.dtype()), shape_str(start.shape()));
    s = start.detach().to(DType::i64).contiguous();
    for (std::int64_t b = 0; b < s.numel(); ++b)
      ATTN_CHECK(s.data<std::int64_t>()[b] >= 0, ValueError,
                 "rotary_heads: start[{}] = {} is negative", b, s.data<std::int64_t>()[b]);
  }
  Tensor out = rotate_heads(x, s, base, 1);
  return record(out, "rotary_heads", {x}, [s, base](const Tensor& g, const Needs&) {
    return Grads{rotate_heads(g, s, base, -1)};
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

Tensor alibi_bias(std::int64_t heads, std::int64_t K, DType dtype) {
  ATTN_CHECK(K >= 1, ValueError, "alibi_bias: needs at least one key, got {}", K);
  ATTN_CHECK(heads >= 1, ValueError, "alibi_bias: needs at least one head, got {}", heads);
  const std::vector<double> slopes = alibi_slopes(heads);
  Tensor out = Tensor::empty({heads, 2 * K - 1}, dtype);
  dispatch_float(dtype, "alibi_bias", [&]<class T_>() {
    for (std::int64_t h = 0; h < heads; ++h) {
      // Entry K - 1 + d and K - 1 - d hold the same -slope x |d|.
      T_* mid = out.data<T_>() + h * (2 * K - 1) + (K - 1);
      const double slope = slopes[static_cast<std::size_t>(h)];
      for (std::int64_t d = 0; d < K; ++d)
        mid[d] = mid[-d] = static_cast<T_>(-slope * static_cast<double>(d));
    }
  });
  return out;
}

Tensor alibi_bias_kept(std::int64_t heads, std::int64_t K, DType dtype) {
  ATTN_CHECK(K >= 1, ValueError, "alibi_bias_kept: needs at least one key, got {}", K);
  const auto keys = [](const Tensor& t) { return t.defined() ? (t.size(1) + 1) / 2 : 0; };
  const Tensor t = kept_table(std::pair{heads, dtype}, K, keys,
                              [&](std::int64_t n) { return alibi_bias(heads, n, dtype); });
  return t.narrow(1, keys(t) - K, 2 * K - 1);
}

namespace {

// T5's buckets of the offsets key - query in [-(K - 1), K - 1], entry
// offset + K - 1, for one (bidirectional, num_buckets, max_distance): kept
// for the largest K asked so far, grown geometrically (a decoder asks for
// one more key each step).
std::shared_ptr<const std::vector<std::int64_t>> t5_buckets(std::int64_t K, bool bidirectional,
                                                            std::int64_t num_buckets,
                                                            std::int64_t max_distance) {
  auto compute = [&](std::int64_t n) {
    auto v = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(2 * n - 1));
    for (std::int64_t i = 0; i < 2 * n - 1; ++i)
      (*v)[static_cast<std::size_t>(i)] =
          t5_bucket(i - (n - 1), bidirectional, num_buckets, max_distance);
    return std::shared_ptr<const std::vector<std::int64_t>>(std::move(v));
  };
  return kept_table(
      std::tuple{bidirectional, num_buckets, max_distance}, K,
      [](const std::shared_ptr<const std::vector<std::int64_t>>& v) {
        return v ? (static_cast<std::int64_t>(v->size()) + 1) / 2 : 0;
      },
      compute);
}

}  // namespace

Tensor t5_bias(const Tensor& table, std::int64_t K, bool bidirectional, std::int64_t max_distance) {
  ATTN_CHECK(table.defined() && table.dim() == 2, ShapeError,
             "t5_bias: expected a table (heads, buckets), got {}",
             table.defined() ? shape_str(table.shape()) : std::string("undefined"));
  ATTN_CHECK(K >= 1, ValueError, "t5_bias: needs at least one key, got {}", K);
  ATTN_CHECK(table.size(1) >= (bidirectional ? 4 : 2) && max_distance >= 1, ValueError,
             "t5_bias: {} buckets up to distance {} are too few", table.size(1), max_distance);
  const auto buckets = t5_buckets(K, bidirectional, table.size(1), max_distance);
  // Entry i of the bias: distance i - (K - 1) = query - key, offset key - query = K - 1 - i.
  const std::int64_t center = (static_cast<std::int64_t>(buckets->size()) - 1) / 2;
  Tensor index = Tensor::empty({2 * K - 1}, DType::i64);
  std::int64_t* ix = index.data<std::int64_t>();
  for (std::int64_t i = 0; i < 2 * K - 1; ++i)
    ix[i] = (*buckets)[static_cast<std::size_t>(center + (K - 1 - i))];
  return index_select(table, 1, index);
}

}  // namespace attn
