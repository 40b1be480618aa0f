// attn/core/tensor.h — the n-dimensional array everything is built on.
//
// A Tensor is a shared handle to a TensorImpl: a view (shape, strides in
// elements, offset) onto a reference-counted Storage. Copying a Tensor copies
// the handle, not the data. Layout is row-major and batch-first everywhere.
//
// Autograd state lives in the same TensorImpl (requires_grad, grad, grad_fn);
// the graph machinery is in attn/autograd, the differentiable view and math
// operations in attn/ops. Methods declared here that record autograd nodes
// (reshape, permute, ..., backward) are defined by those layers; the include
// graph still points downwards (see docs/design/core.md).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "attn/core/dtype.h"
#include "attn/core/error.h"
#include "attn/core/shape.h"
#include "attn/core/storage.h"

namespace attn {

namespace autograd {
struct Node;
}

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  // in elements
  std::int64_t offset = 0;  // in elements
  DType dtype = DType::f32;

  // Autograd: a leaf has requires_grad and no grad_fn; an op's output that
  // depends on such a leaf has grad_fn set.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // A new contiguous tensor with uninitialized contents.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  // A view with the given geometry onto an existing storage (no checks on autograd).
  static Tensor make_view(std::shared_ptr<Storage> storage, Shape shape, Shape strides,
                          std::int64_t offset, DType dtype);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  std::int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  std::int64_t dim() const { return static_cast<std::int64_t>(impl().shape.size()); }
  std::int64_t size(std::int64_t d) const;  // d may be negative
  std::int64_t stride(std::int64_t d) const;
  std::int64_t numel() const { return shape_numel(impl().shape); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }

  // Pointer to the first element; T must match dtype().
  template <class T>
  T* data() const {
    check_dtype(dtype_v<T>, "Tensor::data");
    return static_cast<T*>(impl().storage->data()) + impl().offset;
  }
  void* raw_data() const;

  // The single value of a one-element tensor, converted to T.
  template <class T>
  T item() const;

  // Element at a full index, converted to double (slow; for tests and printing).
  double at(const std::vector<std::int64_t>& index) const;

  // ---- autograd (attn/autograd) ----
  bool requires_grad() const { return impl().requires_grad; }
  // Marks a leaf as requiring a gradient. Returns *this.
  const Tensor& requires_grad_(bool on = true) const;
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  void zero_grad() const;  // drops the accumulated gradient
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  // Backpropagates from this tensor. Without `gradient`, this must hold one element.
  void backward(const Tensor& gradient = Tensor()) const;
  // The same data, cut from the graph.
  Tensor detach() const;

  // ---- views and copies (attn/ops, differentiable) ----
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy; one -1 allowed
  Tensor view(const Shape& shape) const;  // a view; throws if the strides do not allow it
  Tensor permute(const std::vector<std::int64_t>& dims) const;
  Tensor transpose(std::int64_t d0, std::int64_t d1) const;
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;  // removes dim
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor squeeze() const;  // all size-1 dims
  Tensor expand(const Shape& shape) const;  // broadcast view; -1 keeps a dim
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;
  Tensor contiguous() const;  // *this if already contiguous
  Tensor clone() const;  // always a fresh contiguous copy
  Tensor to(DType dtype) const;

  // PyTorch-style text: tensor([[1.0000, 2.0000], ...])
  std::string str() const;

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  void check_dtype(DType expected, const char* op) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- creation ----
Tensor zeros(const Shape& shape, DType dtype = DType::f32);
Tensor ones(const Shape& shape, DType dtype = DType::f32);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// [start, end) in steps of `step`; i64 by default, like torch.arange on ints.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::i64);
Tensor arange(std::int64_t end, DType dtype = DType::i64);
Tensor eye(std::int64_t n, DType dtype = DType::f32);
// Copies `values` (row-major) into a new tensor of `shape` (default: 1-D of
// values.size(); use scalar() for a 0-dim tensor).
template <class T>
Tensor from_vector(const std::vector<T>& values, Shape shape = {});
Tensor tensor(std::initializer_list<float> values);
Tensor scalar(double value, DType dtype = DType::f32);  // a 0-dim tensor

// Fills every element of `t` (any layout) with `value`.
void fill_(const Tensor& t, double value);
// Copies src into dst elementwise (same shape; dtype converted).
void copy_(const Tensor& dst, const Tensor& src);

// Convenience: the elements of `t` in row-major order, converted to T.
template <class T>
std::vector<T> to_vector(const Tensor& t);

}  // namespace attn
