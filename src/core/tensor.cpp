#include "attn/core/tensor.h"

#include <cmath>
#include <cstring>

#include "core/strided.h"

namespace attn {

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  for (auto s : shape)
    ATTN_CHECK(s >= 0, ValueError, "empty: negative size in shape {}", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(shape_numel(shape) * dtype_size(dtype));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::make_view(std::shared_ptr<Storage> storage, Shape shape, Shape strides,
                         std::int64_t offset, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

TensorImpl& Tensor::impl() const {
  if (!impl_) throw Error("Tensor: use of an undefined tensor");
  return *impl_;
}

std::int64_t Tensor::size(std::int64_t d) const {
  return impl().shape[normalize_dim(d, dim(), "Tensor::size")];
}

std::int64_t Tensor::stride(std::int64_t d) const {
  return impl().strides[normalize_dim(d, dim(), "Tensor::stride")];
}

bool Tensor::is_contiguous() const {
  const auto& sh = impl().shape;
  const auto& st = impl().strides;
  std::int64_t expected = 1;
  for (std::size_t i = sh.size(); i-- > 0;) {
    if (sh[i] == 1) continue;
    if (st[i] != expected) return false;
    expected *= sh[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage->data()) + impl().offset * dtype_size(dtype());
}

void Tensor::check_dtype(DType expected, const char* op) const {
  ATTN_CHECK(dtype() == expected, DTypeError, "{}: tensor has dtype {}, asked for {}", op,
             dtype_name(dtype()), dtype_name(expected));
}

double Tensor::at(const std::vector<std::int64_t>& index) const {
  ATTN_CHECK(static_cast<std::int64_t>(index.size()) == dim(), ValueError,
             "Tensor::at: got {} indices for a tensor of {} dims", index.size(), dim());
  std::int64_t off = 0;
  for (std::size_t i = 0; i < index.size(); ++i) {
    ATTN_CHECK(index[i] >= 0 && index[i] < shape()[i], ValueError,
               "Tensor::at: index {} is out of range for dim {} of size {}", index[i], i,
               shape()[i]);
    off += index[i] * strides()[i];
  }
  return dispatch_all(dtype(), "Tensor::at", [&]<class T>() {
    return static_cast<double>(static_cast<const T*>(impl().storage->data())[impl().offset + off]);
  });
}

template <class T>
T Tensor::item() const {
  ATTN_CHECK(numel() == 1, ValueError,
             "Tensor::item: expected a tensor with one element, got shape {}", shape_str(shape()));
  return dispatch_all(dtype(), "Tensor::item", [&]<class U>() {
    return static_cast<T>(*(static_cast<const U*>(impl().storage->data()) + impl().offset));
  });
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template std::int32_t Tensor::item<std::int32_t>() const;
template std::int64_t Tensor::item<std::int64_t>() const;

// ---- autograd state ----

const Tensor& Tensor::requires_grad_(bool on) const {
  ATTN_CHECK(!on || is_floating(dtype()), DTypeError,
             "requires_grad_: only floating tensors can require gradients, got {}",
             dtype_name(dtype()));
  ATTN_CHECK(on || is_leaf(), ValueError,
             "requires_grad_: cannot turn gradients off for a non-leaf tensor; use detach()");
  impl().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return Tensor(impl().grad); }

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined())
    ATTN_CHECK(g.shape() == shape(), ShapeError, "set_grad: gradient shape {} != tensor shape {}",
               shape_str(g.shape()), shape_str(shape()));
  impl().grad = g.impl_ptr();
}

void Tensor::zero_grad() const { impl().grad.reset(); }

Tensor Tensor::detach() const {
  const auto& i = impl();
  return make_view(i.storage, i.shape, i.strides, i.offset, i.dtype);
}

// ---- creation ----

void fill_(const Tensor& t, double value) {
  dispatch_all(t.dtype(), "fill_", [&]<class T>() {
    T v = static_cast<T>(value);
    T* base = static_cast<T*>(t.storage()->data());
    detail::for_each_row<1>(t.shape(), {t.strides()}, {t.offset()},
                            [&](const std::array<std::int64_t, 1>& off, std::int64_t n,
                                const std::array<std::int64_t, 1>& st) {
                              T* p = base + off[0];
                              if (st[0] == 1) {
                                for (std::int64_t i = 0; i < n; ++i) p[i] = v;
                              } else {
                                for (std::int64_t i = 0; i < n; ++i) p[i * st[0]] = v;
                              }
                            });
  });
}

void copy_(const Tensor& dst, const Tensor& src) {
  ATTN_CHECK(dst.shape() == src.shape(), ShapeError,
             "copy_: destination shape {} != source shape {}", shape_str(dst.shape()),
             shape_str(src.shape()));
  dispatch_all(dst.dtype(), "copy_", [&]<class D>() {
    dispatch_all(src.dtype(), "copy_", [&]<class S>() {
      D* d = static_cast<D*>(dst.storage()->data());
      const S* s = static_cast<const S*>(src.storage()->data());
      detail::for_each_row<2>(dst.shape(), {dst.strides(), src.strides()},
                              {dst.offset(), src.offset()},
                              [&](const std::array<std::int64_t, 2>& off, std::int64_t n,
                                  const std::array<std::int64_t, 2>& st) {
                                D* pd = d + off[0];
                                const S* ps = s + off[1];
                                if (st[0] == 1 && st[1] == 1) {
                                  if constexpr (std::is_same_v<D, S>) {
                                    std::memcpy(pd, ps, n * sizeof(D));
                                  } else {
                                    for (std::int64_t i = 0; i < n; ++i)
                                      pd[i] = static_cast<D>(ps[i]);
                                  }
                                } else {
                                  for (std::int64_t i = 0; i < n; ++i)
                                    pd[i * st[0]] = static_cast<D>(ps[i * st[1]]);
                                }
                              });
    });
  });
}

Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_(t, value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype()); }

Tensor arange(double start, double end, double step, DType dtype) {
  ATTN_CHECK(step != 0, ValueError, "arange: step must be non-zero");
  ATTN_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step), ValueError,
             "arange: start, end and step must be finite");
  double span = (end - start) / step;
  std::int64_t n = span > 0 ? static_cast<std::int64_t>(std::ceil(span)) : 0;
  Tensor t = Tensor::empty({n}, dtype);
  dispatch_all(dtype, "arange", [&]<class T>() {
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

Tensor arange(std::int64_t end, DType dtype) {
  return arange(0.0, static_cast<double>(end), 1.0, dtype);
}

Tensor eye(std::int64_t n, DType dtype) {
  ATTN_CHECK(n >= 0, ValueError, "eye: n must be >= 0, got {}", n);
  Tensor t = zeros({n, n}, dtype);
  dispatch_all(dtype, "eye", [&]<class T>() {
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < n; ++i) p[i * n + i] = T(1);
  });
  return t;
}

template <class T>
Tensor from_vector(const std::vector<T>& values, Shape shape) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(values.size())};
  ATTN_CHECK(shape_numel(shape) == static_cast<std::int64_t>(values.size()), ShapeError,
             "from_vector: {} values do not fill shape {}", values.size(), shape_str(shape));
  Tensor t = Tensor::empty(shape, dtype_v<T>);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}
template Tensor from_vector<float>(const std::vector<float>&, Shape);
template Tensor from_vector<double>(const std::vector<double>&, Shape);
template Tensor from_vector<std::int32_t>(const std::vector<std::int32_t>&, Shape);
template Tensor from_vector<std::int64_t>(const std::vector<std::int64_t>&, Shape);

Tensor tensor(std::initializer_list<float> values) {
  return from_vector(std::vector<float>(values), {static_cast<std::int64_t>(values.size())});
}

Tensor scalar(double value, DType dtype) { return full({}, value, dtype); }

template <class T>
std::vector<T> to_vector(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), dtype_v<T>);
  copy_(c, t);
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> to_vector<float>(const Tensor&);
template std::vector<double> to_vector<double>(const Tensor&);
template std::vector<std::int32_t> to_vector<std::int32_t>(const Tensor&);
template std::vector<std::int64_t> to_vector<std::int64_t>(const Tensor&);

}  // namespace attn
