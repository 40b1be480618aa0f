// src/core/strided.h — internal: loops over strided tensors (used by core and ops).
//
// for_each_row walks N operands that share one shape, each with its own
// strides and offset (stride 0 = broadcast). Adjacent dims that are laid out
// contiguously in every operand are merged first, so a contiguous tensor is
// one long row and a transposed one a few long rows. The callback gets, per
// row, the offset of its first element in each operand, the row length and
// each operand's stride along the row; it runs in parallel over rows when the
// work is large.
#pragma once

#include <omp.h>

#include <array>
#include <cstdint>
#include <vector>

#include "attn/core/shape.h"
#include "attn/core/threads.h"

namespace attn::detail {

template <std::size_t N>
struct Layout {
  Shape shape;
  std::array<Shape, N> strides;
};

// Drops size-1 dims and merges dims that are contiguous in all operands.
template <std::size_t N>
Layout<N> coalesce(const Shape& shape, const std::array<Shape, N>& strides) {
  Layout<N> out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!out.shape.empty()) {
      bool mergeable = true;
      for (std::size_t k = 0; k < N; ++k)
        if (out.strides[k].back() != strides[k][d] * shape[d]) mergeable = false;
      if (mergeable) {
        out.shape.back() *= shape[d];
        for (std::size_t k = 0; k < N; ++k) out.strides[k].back() = strides[k][d];
        continue;
      }
    }
    out.shape.push_back(shape[d]);
    for (std::size_t k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
  }
  if (out.shape.empty()) {  // a scalar or all-ones shape: one row of one element
    out.shape.push_back(1);
    for (std::size_t k = 0; k < N; ++k) out.strides[k].push_back(0);
  }
  return out;
}

// f(const std::array<int64_t, N>& row_offsets, int64_t len, const std::array<int64_t, N>& step)
template <std::size_t N, class F>
void for_each_row(const Shape& shape, const std::array<Shape, N>& strides,
                  const std::array<std::int64_t, N>& offsets, F&& f, bool parallel = true) {
  const std::int64_t total = shape_numel(shape);
  if (total == 0) return;
  Layout<N> L = coalesce<N>(shape, strides);
  const std::int64_t nd = static_cast<std::int64_t>(L.shape.size());
  const std::int64_t len = L.shape[nd - 1];
  const std::int64_t rows = total / len;
  std::array<std::int64_t, N> step;
  for (std::size_t k = 0; k < N; ++k) step[k] = L.strides[k][nd - 1];

  auto run_rows = [&](std::int64_t r0, std::int64_t r1) {
    // Unravel r0 once, then count up like an odometer.
    std::vector<std::int64_t> idx(nd > 1 ? nd - 1 : 1, 0);
    std::int64_t rem = r0;
    for (std::int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = rem % L.shape[d];
      rem /= L.shape[d];
    }
    std::array<std::int64_t, N> off;
    for (std::size_t k = 0; k < N; ++k) {
      off[k] = offsets[k];
      for (std::int64_t d = 0; d < nd - 1; ++d) off[k] += idx[d] * L.strides[k][d];
    }
    for (std::int64_t r = r0; r < r1; ++r) {
      f(off, len, step);
      for (std::int64_t d = nd - 2; d >= 0; --d) {
        ++idx[d];
        for (std::size_t k = 0; k < N; ++k) off[k] += L.strides[k][d];
        if (idx[d] < L.shape[d]) break;
        for (std::size_t k = 0; k < N; ++k) off[k] -= L.strides[k][d] * L.shape[d];
        idx[d] = 0;
      }
    }
  };

  parallel = parallel && total >= parallel_grain() && fork_ok();
  if (!parallel || rows == 1) {
    if (rows == 1 && parallel) {
      // One long row: split it into chunks instead.
#pragma omp parallel
      {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        std::int64_t chunk = (len + nt - 1) / nt;
        std::int64_t b = t * chunk, e = std::min(len, b + chunk);
        if (b < e) {
          std::array<std::int64_t, N> off;
          for (std::size_t k = 0; k < N; ++k) off[k] = offsets[k] + b * step[k];
          f(off, e - b, step);
        }
      }
      return;
    }
    run_rows(0, rows);
    return;
  }
#pragma omp parallel
  {
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
    std::int64_t chunk = (rows + nt - 1) / nt;
    std::int64_t b = t * chunk, e = std::min(rows, b + chunk);
    if (b < e) run_rows(b, e);
  }
}

}  // namespace attn::detail
