// attn/ops/index.h — indexing: embedding lookup, cat/stack, index_select,
// gather, repeat_interleave.
//
// Index tensors are integer (i32 or i64) and are never differentiated; an
// index outside [0, size) is a ValueError (negative indices are not wrapped).
// Values may be f32 or f64 (differentiable) and, except for embedding, also
// i32 or i64 (not differentiable: token ids, valid_lens). Results are new
// contiguous tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "attn/core/tensor.h"

namespace attn {

// weight (V, D) float, ids (...) integer in [0, V) -> (..., D)
//   out[..., :] = weight[ids[...], :]
// Backward: grad_weight[v, :] = sum of grad_out[..., :] over every position
// where ids == v (repeated ids accumulate); rows never looked up get 0.
Tensor embedding(const Tensor& weight, const Tensor& ids);

// tensors t_0..t_{k-1}, same dtype and ndim, same shape except along `dim`
// (negative dims count from the end) -> the shape with size sum_i t_i.size(dim)
// along `dim`. Backward: each input gets its slice of the gradient.
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim);

// tensors t_0..t_{k-1}, all of one shape S and dtype -> S with a new dim of
// size k inserted at `dim` (in [-(ndim+1), ndim]); out.select(dim, i) == t_i.
Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim);

// x (..., n, ...) with n at `dim`, index (k) integer in [0, n) -> (..., k, ...)
// (a 0-dim index counts as k = 1)
//   out[..., j, ...] = x[..., index[j], ...]
// Backward (index_add): grad_x[..., index[j], ...] += grad_out[..., j, ...].
Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index);

// torch.gather: index has x's number of dims, index.size(d) <= x.size(d) for
// every d != dim, and entries in [0, x.size(dim)); out has index's shape:
//   out[i][j][k] = x[i][index[i][j][k]][k]   (dim = 1)
// Backward (scatter-add): grad_x[i][index[i][j][k]][k] += grad_out[i][j][k].
Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index);

// Each slice of x along `dim` repeated `repeats` (>= 0) times in a row:
//   x (..., n, ...) -> (..., n * repeats, ...), out[..., i, ...] = x[..., i / repeats, ...]
// repeat_interleave([2, 3], 2, 0) == [2, 2, 3, 3], as torch.repeat_interleave
// (d2l uses it to give every attention head its batch's valid_lens).
// Backward: grad_x[..., i, ...] = sum over r of grad_out[..., i * repeats + r, ...].
Tensor repeat_interleave(const Tensor& x, std::int64_t repeats, std::int64_t dim);

}  // namespace attn
