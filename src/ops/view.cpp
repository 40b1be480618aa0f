// Views (reshape, permute, narrow, expand, ...) and copies (contiguous, clone, to).
//
// A view shares storage with its input; its backward maps the gradient back to
// the input's geometry: reshape back, permute by the inverse, scatter a slice
// into zeros, sum an expansion.
#include <algorithm>
#include <numeric>

#include "attn/autograd/node.h"
#include "attn/ops/reduce.h"

namespace attn {

using autograd::record;

namespace {

Tensor view_of(const Tensor& x, Shape shape, Shape strides, std::int64_t offset) {
  return Tensor::make_view(x.storage(), std::move(shape), std::move(strides), offset, x.dtype());
}

// Resolves one -1 in `shape` against numel.
Shape infer_shape(const Shape& shape, std::int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  std::int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      ATTN_CHECK(infer < 0, ValueError, "{}: only one dim can be -1, got {}", op, shape_str(shape));
      infer = static_cast<std::int64_t>(i);
    } else {
      ATTN_CHECK(out[i] >= 0, ValueError, "{}: invalid size {} in {}", op, out[i],
                 shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    ATTN_CHECK(known != 0 && numel % known == 0, ShapeError,
               "{}: cannot reshape {} ({} elements) into {}", op, shape_str(from), numel,
               shape_str(shape));
    out[infer] = numel / known;
  }
  ATTN_CHECK(shape_numel(out) == numel, ShapeError, "{}: cannot reshape {} ({} elements) into {}",
             op, shape_str(from), numel, shape_str(shape));
  return out;
}

// Strides for viewing x as `shape` without a copy, if the layout allows it
// (PyTorch's rule: each run of merged input dims must be contiguous in itself).
bool view_strides(const Tensor& x, const Shape& shape, Shape& strides) {
  if (x.is_contiguous()) {
    strides = contiguous_strides(shape);
    return true;
  }
  const Shape& old_shape = x.shape();
  const Shape& old_strides = x.strides();
  strides.assign(shape.size(), 0);
  if (x.numel() == 0) {
    strides = contiguous_strides(shape);
    return true;
  }
  std::int64_t view_d = static_cast<std::int64_t>(shape.size()) - 1;
  std::int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (std::int64_t tensor_d = static_cast<std::int64_t>(old_shape.size()) - 1; tensor_d >= 0;
       --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    if (tensor_d == 0 || (old_shape[tensor_d - 1] != 1 &&
                          old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Tensor reshape_impl(const Tensor& x, const Shape& shape, bool allow_copy, const char* op) {
  Shape target = infer_shape(shape, x.numel(), op, x.shape());
  Shape strides;
  Tensor out;
  if (view_strides(x, target, strides)) {
    out = view_of(x, target, strides, x.offset());
  } else {
    ATTN_CHECK(allow_copy, ShapeError,
               "view: the strides of a {} tensor do not allow viewing it as {}; use reshape",
               shape_str(x.shape()), shape_str(target));
    out = x.contiguous().detach();
    out = view_of(out, target, contiguous_strides(target), out.offset());
  }
  Shape in_shape = x.shape();
  return record(out, op, {x}, [in_shape](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{g.reshape(in_shape)};
  });
}

// Backward of a view that selects part of its input: scatter g into zeros.
autograd::BackwardFn scatter_back(const Tensor& x, std::function<Tensor(const Tensor&)> select) {
  Shape in_shape = x.shape();
  DType dt = x.dtype();
  return [in_shape, dt, select](const Tensor& g, const std::vector<bool>&) {
    Tensor gx = zeros(in_shape, dt);
    copy_(select(gx), g);
    return std::vector<Tensor>{gx};
  };
}

}  // namespace

Tensor Tensor::reshape(const Shape& shape) const {
  return reshape_impl(*this, shape, true, "reshape");
}
Tensor Tensor::view(const Shape& shape) const { return reshape_impl(*this, shape, false, "view"); }

Tensor Tensor::flatten(std::int64_t start_dim, std::int64_t end_dim) const {
  std::int64_t n = dim();
  if (n == 0) return reshape({1});
  std::int64_t s = normalize_dim(start_dim, n, "flatten"), e = normalize_dim(end_dim, n, "flatten");
  ATTN_CHECK(s <= e, ValueError, "flatten: start_dim {} comes after end_dim {}", start_dim,
             end_dim);
  Shape out(shape().begin(), shape().begin() + s);
  std::int64_t m = 1;
  for (std::int64_t d = s; d <= e; ++d) m *= shape()[d];
  out.push_back(m);
  out.insert(out.end(), shape().begin() + e + 1, shape().end());
  return reshape(out);
}

Tensor Tensor::permute(const std::vector<std::int64_t>& dims) const {
  std::int64_t n = dim();
  ATTN_CHECK(static_cast<std::int64_t>(dims.size()) == n, ValueError,
             "permute: got {} dims for a tensor of {} dims", dims.size(), n);
  std::vector<std::int64_t> perm(n), inverse(n, -1);
  Shape sh(n), st(n);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t d = normalize_dim(dims[i], n, "permute");
    ATTN_CHECK(inverse[d] < 0, ValueError, "permute: dim {} appears twice", d);
    perm[i] = d;
    inverse[d] = i;
    sh[i] = shape()[d];
    st[i] = strides()[d];
  }
  Tensor out = view_of(*this, sh, st, offset());
  return record(out, "permute", {*this}, [inverse](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{g.permute(inverse)};
  });
}

Tensor Tensor::transpose(std::int64_t d0, std::int64_t d1) const {
  std::int64_t n = dim();
  d0 = normalize_dim(d0, n, "transpose");
  d1 = normalize_dim(d1, n, "transpose");
  std::vector<std::int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[d0], perm[d1]);
  return permute(perm);
}

Tensor Tensor::slice(std::int64_t d, std::int64_t start, std::int64_t end,
                     std::int64_t step) const {
  d = normalize_dim(d, dim(), "slice");
  ATTN_CHECK(step > 0, ValueError, "slice: step must be positive, got {}", step);
  std::int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  Shape sh = shape(), st = strides();
  sh[d] = (end - start + step - 1) / step;
  st[d] = strides()[d] * step;
  Tensor out = view_of(*this, sh, st, offset() + start * strides()[d]);
  return record(out, "slice", {*this}, scatter_back(*this, [=](const Tensor& gx) {
                  return gx.slice(d, start, end, step);
                }));
}

Tensor Tensor::narrow(std::int64_t d, std::int64_t start, std::int64_t length) const {
  d = normalize_dim(d, dim(), "narrow");
  std::int64_t n = shape()[d];
  ATTN_CHECK(start >= 0 && length >= 0 && start + length <= n, ValueError,
             "narrow: [{}, {}) is out of range for dim {} of size {}", start, start + length, d, n);
  return slice(d, start, start + length);
}

Tensor Tensor::select(std::int64_t d, std::int64_t index) const {
  d = normalize_dim(d, dim(), "select");
  std::int64_t n = shape()[d];
  ATTN_CHECK(index >= -n && index < n, ValueError,
             "select: index {} is out of range for dim {} of size {}", index, d, n);
  if (index < 0) index += n;
  return narrow(d, index, 1).squeeze(d);
}

Tensor Tensor::unsqueeze(std::int64_t d) const {
  d = normalize_dim(d, dim() + 1, "unsqueeze");
  Shape sh = shape();
  sh.insert(sh.begin() + d, 1);
  return reshape(sh);
}

Tensor Tensor::squeeze(std::int64_t d) const {
  d = normalize_dim(d, dim(), "squeeze");
  if (shape()[d] != 1) return *this;
  Shape sh = shape();
  sh.erase(sh.begin() + d);
  return reshape(sh);
}

Tensor Tensor::squeeze() const {
  Shape sh;
  for (auto s : shape())
    if (s != 1) sh.push_back(s);
  return reshape(sh);
}

Tensor Tensor::expand(const Shape& shape) const {
  std::int64_t n = static_cast<std::int64_t>(shape.size());
  ATTN_CHECK(n >= dim(), ShapeError, "expand: cannot expand {} to fewer dims {}",
             shape_str(this->shape()), shape_str(shape));
  Shape sh(n), st(n, 0);
  std::int64_t lead = n - dim();
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t want = shape[i];
    if (i < lead) {
      ATTN_CHECK(want >= 0, ValueError, "expand: size -1 not allowed in a new leading dim of {}",
                 shape_str(shape));
      sh[i] = want;
      continue;
    }
    std::int64_t have = this->shape()[i - lead];
    if (want == -1) want = have;
    ATTN_CHECK(have == want || have == 1, ShapeError,
               "expand: cannot expand {} to {} (dim {} has size {}, not 1)",
               shape_str(this->shape()), shape_str(shape), i - lead, have);
    sh[i] = want;
    st[i] = have == want ? strides()[i - lead] : 0;
  }
  Tensor out = view_of(*this, sh, st, offset());
  Shape in_shape = this->shape();
  return record(out, "expand", {*this}, [in_shape](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{sum_to(g, in_shape)};
  });
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = Tensor::empty(shape(), dtype());
  copy_(out, *this);
  return record(out, "clone", {*this},
                [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; });
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  Tensor out = Tensor::empty(shape(), dt);
  copy_(out, *this);
  if (!is_floating(dt)) return out;
  DType in_dt = dtype();
  return record(out, "to", {*this}, [in_dt](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{g.to(in_dt)};
  });
}

}  // namespace attn
