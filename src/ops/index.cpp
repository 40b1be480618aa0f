// Indexing: embedding, cat, stack, index_select, gather, repeat_interleave.
//
//   embedding           out[p, :] = W[ids[p], :]            dW[v, :] = sum_{p: ids[p] = v} g[p, :]
//   cat                 out = [t_0 | t_1 | ...] along dim     dt_i = g's slice i
//   index_select        out[o, j, i] = x[o, idx[j], i]        dx[o, idx[j], i] += g[o, j, i]
//   gather (dim d)      out[p] = x[p with p_d := idx[p]]      dx[p with p_d := idx[p]] += g[p]
//   repeat_interleave   unsqueeze + expand + reshape, so its backward is expand's: a sum
//                       over each group of repeats.
//
// index_select views x as [outer, n, inner] (dims before, at and after `dim`).
// Forwards write each output element once and run in parallel over output
// rows. Backwards that add into a table are race-free by construction:
// embedding splits the columns D among threads (every thread sees every id),
// index_select splits `outer` (disjoint slabs of dx), gather's scatter-add is
// serial. The plain element-by-element reference of each kernel lives in
// tests/ops/index_test.cpp and is compared with these on odd sizes.
#include "attn/ops/index.h"

#include <algorithm>
#include <cstring>

#include "attn/autograd/node.h"
#include "core/parallel.h"
#include "ops/loops.h"

namespace attn {

using autograd::Grads;
using autograd::Needs;
using autograd::record;

namespace {

// An integer index tensor's entries as a contiguous i64 tensor (detached).
Tensor index_as_i64(const Tensor& index, const char* op, const char* what) {
  ATTN_CHECK(index.defined(), ValueError, "{}: {} is an undefined tensor", op, what);
  ATTN_CHECK(!is_floating(index.dtype()), DTypeError,
             "{}: {} must be an integer tensor (i32 or i64), got {}", op, what,
             dtype_name(index.dtype()));
  return index.detach().to(DType::i64).contiguous();
}

// Position of the first entry outside [0, size), or -1.
std::int64_t first_out_of_range(const Tensor& idx, std::int64_t size) {
  const std::int64_t* p = idx.data<std::int64_t>();
  for (std::int64_t i = 0, n = idx.numel(); i < n; ++i)
    if (p[i] < 0 || p[i] >= size) return i;
  return -1;
}

std::int64_t prod(const Shape& s, std::size_t b, std::size_t e) {
  std::int64_t p = 1;
  for (std::size_t i = b; i < e; ++i) p *= s[i];
  return p;
}

// ---- embedding ----

// gw (V, D) += rows of g (n, D) at ids. Threads own column blocks, so
// repeated ids never write the same element from two threads.
template <class T>
void embedding_backward_kernel(T* gw, const T* g, const std::int64_t* ids, std::int64_t n,
                               std::int64_t D) {
  constexpr std::int64_t kBlock = 64;
  const std::int64_t blocks = (D + kBlock - 1) / kBlock;
  detail::parallel_for(blocks, detail::loop_threads(n * D >= parallel_grain() && D > kBlock),
                       [&](std::int64_t blk) {
                         const std::int64_t c0 = blk * kBlock, c1 = std::min(D, c0 + kBlock);
                         for (std::int64_t i = 0; i < n; ++i) {
                           T* dst = gw + ids[i] * D;
                           const T* src = g + i * D;
#pragma omp simd
                           for (std::int64_t c = c0; c < c1; ++c) dst[c] += src[c];
                         }
                       });
}

// ---- index_select ----

// dx [outer, n, inner] += g [outer, k, inner] at rows idx; threads own slabs of `outer`.
template <class T>
void index_add_kernel(T* gx, const T* g, const std::int64_t* idx, std::int64_t outer,
                      std::int64_t n, std::int64_t k, std::int64_t inner) {
  detail::parallel_for(outer,
                       detail::loop_threads(outer * k * inner >= parallel_grain() && outer > 1),
                       [&](std::int64_t o) {
                         for (std::int64_t j = 0; j < k; ++j) {
                           T* dst = gx + (o * n + idx[j]) * inner;
                           const T* src = g + (o * k + j) * inner;
#pragma omp simd
                           for (std::int64_t i = 0; i < inner; ++i) dst[i] += src[i];
                         }
                       });
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  ATTN_CHECK(weight.dim() == 2, ShapeError,
             "embedding: weight must be 2-D (num_embeddings, embedding_dim), got {}",
             shape_str(weight.shape()));
  ATTN_CHECK(is_floating(weight.dtype()), DTypeError,
             "embedding: weight must be f32 or f64, got {}", dtype_name(weight.dtype()));
  Tensor idx = index_as_i64(ids, "embedding", "ids");
  const std::int64_t V = weight.shape()[0], D = weight.shape()[1], n = idx.numel();
  if (std::int64_t bad = first_out_of_range(idx, V); bad >= 0)
    throw ValueError(fmt::format("embedding: id {} is out of range for a table of {} rows",
                                 idx.data<std::int64_t>()[bad], V));
  Shape out_shape = ids.shape();
  out_shape.push_back(D);
  Tensor out = Tensor::empty(out_shape, weight.dtype());
  if (out.numel() > 0) {
    Tensor w = weight.detach().contiguous();
    const std::size_t row_bytes = static_cast<std::size_t>(D) * dtype_size(weight.dtype());
    const char* pw = static_cast<const char*>(w.raw_data());
    char* po = static_cast<char*>(out.raw_data());
    const std::int64_t* pi = idx.data<std::int64_t>();
    detail::parallel_for(n, detail::loop_threads(n * D >= parallel_grain()), [&](std::int64_t i) {
      std::memcpy(po + i * row_bytes, pw + pi[i] * row_bytes, row_bytes);
    });
  }
  return record(out, "embedding", {weight}, [idx, V, D](const Tensor& g, const Needs&) {
    Tensor gw = zeros({V, D}, g.dtype());
    Tensor gc = g.contiguous();
    dispatch_float(g.dtype(), "embedding backward", [&]<class T>() {
      embedding_backward_kernel<T>(gw.data<T>(), gc.data<T>(), idx.data<std::int64_t>(),
                                   idx.numel(), D);
    });
    return Grads{gw};
  });
}

Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  ATTN_CHECK(!tensors.empty(), ValueError, "cat: expected at least one tensor, got none");
  const Tensor& t0 = tensors[0];
  ATTN_CHECK(t0.dim() >= 1, ShapeError, "cat: cannot concatenate 0-dim tensors");
  const std::int64_t d = normalize_dim(dim, t0.dim(), "cat");
  Shape out_shape = t0.shape();
  out_shape[d] = 0;
  std::vector<std::int64_t> sizes;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    ATTN_CHECK(t.dtype() == t0.dtype(), DTypeError, "cat: tensor {} has dtype {}, tensor 0 has {}",
               i, dtype_name(t.dtype()), dtype_name(t0.dtype()));
    bool fits = t.dim() == t0.dim();
    for (std::int64_t e = 0; fits && e < t0.dim(); ++e)
      fits = e == d || t.shape()[e] == t0.shape()[e];
    ATTN_CHECK(
        fits, ShapeError,
        "cat: tensor {} has shape {} but tensor 0 has {}; shapes must match except in dim {}", i,
        shape_str(t.shape()), shape_str(t0.shape()), d);
    sizes.push_back(t.shape()[d]);
    out_shape[d] += t.shape()[d];
  }
  Tensor out = Tensor::empty(out_shape, t0.dtype());
  std::int64_t start = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    copy_(out.narrow(d, start, sizes[i]), tensors[i].detach());
    start += sizes[i];
  }
  return record(out, "cat", tensors, [d, sizes](const Tensor& g, const Needs& needs) {
    Grads grads(sizes.size());
    std::int64_t s = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (needs[i]) grads[i] = g.narrow(d, s, sizes[i]);
      s += sizes[i];
    }
    return grads;
  });
}

Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim) {
  ATTN_CHECK(!tensors.empty(), ValueError, "stack: expected at least one tensor, got none");
  const Tensor& t0 = tensors[0];
  const std::int64_t d = normalize_dim(dim, t0.dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    ATTN_CHECK(tensors[i].shape() == t0.shape(), ShapeError,
               "stack: tensor {} has shape {} but tensor 0 has {}; all must have one shape", i,
               shape_str(tensors[i].shape()), shape_str(t0.shape()));
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index) {
  ATTN_CHECK(x.dim() >= 1, ShapeError,
             "index_select: x must have at least 1 dim, got a 0-dim tensor");
  const std::int64_t d = normalize_dim(dim, x.dim(), "index_select");
  Tensor idx = index_as_i64(index, "index_select", "index");
  ATTN_CHECK(index.dim() <= 1, ShapeError, "index_select: index must be 1-D, got shape {}",
             shape_str(index.shape()));
  const Shape& xs = x.shape();
  const std::int64_t n = xs[d], k = idx.numel();
  if (std::int64_t bad = first_out_of_range(idx, n); bad >= 0)
    throw ValueError(fmt::format("index_select: index {} is out of range for dim {} of size {}",
                                 idx.data<std::int64_t>()[bad], d, n));
  const std::int64_t outer = prod(xs, 0, d), inner = prod(xs, d + 1, xs.size());
  Shape out_shape = xs;
  out_shape[d] = k;
  Tensor out = Tensor::empty(out_shape, x.dtype());
  if (out.numel() > 0) {
    Tensor xc = x.detach().contiguous();
    const std::size_t row_bytes = static_cast<std::size_t>(inner) * dtype_size(x.dtype());
    const char* px = static_cast<const char*>(xc.raw_data());
    char* po = static_cast<char*>(out.raw_data());
    const std::int64_t* pi = idx.data<std::int64_t>();
    const int threads = detail::loop_threads(out.numel() >= parallel_grain());
    // Single elements (along the last dim) copied as values: a memcpy call
    // per 4 bytes cost T5's bias lookup (8 x 511 elements) 13 us.
    auto elements = [&]<class E>() {
      const E* ex = reinterpret_cast<const E*>(px);
      E* eo = reinterpret_cast<E*>(po);
      detail::parallel_ranges(outer * k, threads, [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r) eo[r] = ex[r / k * n + pi[r % k]];
      });
    };
    if (row_bytes == 4) {
      elements.template operator()<std::uint32_t>();
    } else if (row_bytes == 8) {
      elements.template operator()<std::uint64_t>();
    } else {
      detail::parallel_for(outer * k, threads, [&](std::int64_t r) {
        const std::int64_t o = r / k, j = r % k;
        std::memcpy(po + r * row_bytes, px + (o * n + pi[j]) * row_bytes, row_bytes);
      });
    }
  }
  Shape in_shape = xs;
  return record(out, "index_select", {x},
                [idx, in_shape, outer, n, k, inner](const Tensor& g, const Needs&) {
                  Tensor gx = zeros(in_shape, g.dtype());
                  Tensor gc = g.contiguous();
                  dispatch_float(g.dtype(), "index_select backward", [&]<class T>() {
                    index_add_kernel<T>(gx.data<T>(), gc.data<T>(), idx.data<std::int64_t>(), outer,
                                        n, k, inner);
                  });
                  return Grads{gx};
                });
}

Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index) {
  ATTN_CHECK(x.dim() >= 1, ShapeError, "gather: x must have at least 1 dim, got a 0-dim tensor");
  const std::int64_t d = normalize_dim(dim, x.dim(), "gather");
  Tensor idx = index_as_i64(index, "gather", "index");
  ATTN_CHECK(index.dim() == x.dim(), ShapeError,
             "gather: index must have as many dims as x: index is {}, x is {}",
             shape_str(index.shape()), shape_str(x.shape()));
  for (std::int64_t e = 0; e < x.dim(); ++e)
    ATTN_CHECK(e == d || index.shape()[e] <= x.shape()[e], ShapeError,
               "gather: index {} is larger than x {} in dim {} (only dim {} may be larger)",
               shape_str(index.shape()), shape_str(x.shape()), e, d);
  const std::int64_t n = x.shape()[d];
  if (std::int64_t bad = first_out_of_range(idx, n); bad >= 0)
    throw ValueError(fmt::format("gather: index {} is out of range for dim {} of size {}",
                                 idx.data<std::int64_t>()[bad], d, n));

  // Walk index's shape; x is read with its own strides, dim d's stride zeroed
  // and replaced by idx * stride_d.
  Tensor out = Tensor::empty(index.shape(), x.dtype());
  Shape x_strides = x.strides();
  const std::int64_t x_step = x_strides[d];
  x_strides[d] = 0;
  dispatch_all(x.dtype(), "gather", [&]<class T>() {
    T* po = out.data<T>();
    const T* px = detail::base_ptr<T>(x);
    const std::int64_t* pi = idx.data<std::int64_t>();
    detail::for_each_row<3>(
        index.shape(), {out.strides(), idx.strides(), x_strides}, {0, 0, x.offset()},
        [&](const std::array<std::int64_t, 3>& off, std::int64_t len,
            const std::array<std::int64_t, 3>& st) {
          for (std::int64_t i = 0; i < len; ++i)
            po[off[0] + i * st[0]] = px[off[2] + i * st[2] + pi[off[1] + i * st[1]] * x_step];
        });
  });

  Shape in_shape = x.shape();
  return record(out, "gather", {x}, [idx, in_shape, d](const Tensor& g, const Needs&) {
    Tensor gx = zeros(in_shape, g.dtype());
    Shape gx_strides = gx.strides();
    const std::int64_t gx_step = gx_strides[d];
    gx_strides[d] = 0;
    dispatch_float(g.dtype(), "gather backward", [&]<class T>() {
      T* px = gx.data<T>();
      const T* pg = detail::base_ptr<T>(g);
      const std::int64_t* pi = idx.data<std::int64_t>();
      // Serial: two positions may scatter into the same element.
      detail::for_each_row<3>(
          idx.shape(), {g.strides(), idx.strides(), gx_strides}, {g.offset(), 0, 0},
          [&](const std::array<std::int64_t, 3>& off, std::int64_t len,
              const std::array<std::int64_t, 3>& st) {
            for (std::int64_t i = 0; i < len; ++i)
              px[off[2] + i * st[2] + pi[off[1] + i * st[1]] * gx_step] += pg[off[0] + i * st[0]];
          },
          /*parallel=*/false);
    });
    return Grads{gx};
  });
}

Tensor repeat_interleave(const Tensor& x, std::int64_t repeats, std::int64_t dim) {
  ATTN_CHECK(repeats >= 0, ValueError, "repeat_interleave: repeats must be non-negative, got {}",
             repeats);
  ATTN_CHECK(x.dim() >= 1, ShapeError,
             "repeat_interleave: x must have at least 1 dim, got a 0-dim tensor");
  const std::int64_t d = normalize_dim(dim, x.dim(), "repeat_interleave");
  Shape expanded = x.shape();
  expanded.insert(expanded.begin() + d + 1, repeats);
  Shape out_shape = x.shape();
  out_shape[d] *= repeats;
  Tensor out = x.unsqueeze(d + 1).expand(expanded).reshape(out_shape);
  // reshape returns a view when it can (repeats == 1, or a size-1 dim): copy
  // so that the result never aliases x.
  if (out.storage() == x.storage()) out = out.clone();
  return out;
}

}  // namespace attn
