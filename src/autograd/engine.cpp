// The backward engine: reverse topological walk, gradient accumulation.
#include <cstdint>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/core/threads.h"
#include "core/parallel.h"
#include "core/strided.h"

namespace attn::autograd {
namespace {

thread_local bool g_grad_enabled = true;

// out = a + b over n contiguous elements (out may be a), shared by the team
// from parallel_grain() elements on: element by element, so the bits do
// not depend on the split.
void add_contiguous(const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_float(a.dtype(), "backward", [&]<class T>() {
    T* po = out.data<T>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const std::int64_t n = out.numel();
    detail::parallel_ranges(n, detail::loop_threads(n >= parallel_grain()),
                            [&](std::int64_t i0, std::int64_t i1) {
#pragma omp simd
                              for (std::int64_t i = i0; i < i1; ++i) po[i] = pa[i] + pb[i];
                            });
  });
}

// a + b for two tensors of one shape and floating dtype, as a new contiguous tensor.
Tensor add_same_shape(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  if (a.is_contiguous() && b.is_contiguous()) {  // one pass (the usual case)
    add_contiguous(out, a, b);
    return out;
  }
  copy_(out, a);
  dispatch_float(a.dtype(), "backward", [&]<class T>() {
    T* po = static_cast<T*>(out.storage()->data());
    const T* pb = static_cast<const T*>(b.storage()->data());
    detail::for_each_row<2>(out.shape(), {out.strides(), b.strides()}, {out.offset(), b.offset()},
                            [&](const std::array<std::int64_t, 2>& off, std::int64_t n,
                                const std::array<std::int64_t, 2>& st) {
                              for (std::int64_t i = 0; i < n; ++i)
                                po[off[0] + i * st[0]] += pb[off[1] + i * st[1]];
                            });
  });
  return out;
}

// slot += g. A slot that nothing else references (no other tensor, no view
// of its storage: the sum of two gradients made here) takes the sum in
// place; any other gets a new tensor, so that a gradient handed on unchanged
// (a reshape's, an addition's) is never written through.
void accumulate(Tensor& slot, const Tensor& g) {
  if (!slot.defined()) {
    slot = g;
  } else if (slot.impl_ptr().use_count() == 1 && slot.storage().use_count() == 1 &&
             slot.is_contiguous() && g.is_contiguous() && slot.dtype() == g.dtype()) {
    add_contiguous(slot, slot, g);
  } else {
    slot = add_same_shape(slot, g);
  }
}

// The tensors a backward pass reaches, each numbered in the order it was
// first reached: open addressing over a power-of-two table, so that a graph
// of a thousand tensors costs a few allocations, not two per tensor (as the
// node-based std::unordered_set and _map did; they showed among the
// allocator's callers in a profile of d2l's toy training).
class Reached {
 public:
  // The number of t, inserted with the next number if new; `added` says which.
  std::uint32_t insert(TensorImpl* t, bool& added) {
    if (2 * (count_ + 1) > slots_.size()) grow();
    std::size_t i = home(t);
    while (slots_[i].key != nullptr) {
      if (slots_[i].key == t) {
        added = false;
        return slots_[i].index;
      }
      i = (i + 1) & (slots_.size() - 1);
    }
    slots_[i] = {t, count_};
    added = true;
    return count_++;
  }
  // The number of a tensor inserted before.
  std::uint32_t find(TensorImpl* t) const {
    std::size_t i = home(t);
    while (slots_[i].key != t) i = (i + 1) & (slots_.size() - 1);
    return slots_[i].index;
  }
  std::uint32_t size() const { return count_; }

 private:
  struct Slot {
    TensorImpl* key = nullptr;
    std::uint32_t index = 0;
  };
  std::size_t home(TensorImpl* t) const {
    // Fibonacci hashing of the address (its low bits are alignment).
    const auto h =
        static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(t)) * 0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>(h >> 32) & (slots_.size() - 1);
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 256 : 2 * old.size(), Slot{});
    for (const Slot& s : old)
      if (s.key != nullptr) {
        std::size_t i = home(s.key);
        while (slots_[i].key != nullptr) i = (i + 1) & (slots_.size() - 1);
        slots_[i] = s;
      }
  }
  std::vector<Slot> slots_;
  std::uint32_t count_ = 0;
};

}  // namespace

bool grad_enabled() { return g_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Tensor record(Tensor output, std::string name, std::vector<Tensor> inputs, BackwardFn fn) {
  if (!any_requires_grad(inputs)) return output;
  auto node = std::make_shared<Node>();
  node->name = std::move(name);
  node->inputs = std::move(inputs);
  node->backward = std::move(fn);
  output.impl().requires_grad = true;
  output.impl().grad_fn = std::move(node);
  return output;
}

void run_backward(const Tensor& root, const Tensor& grad_root) {
  ATTN_CHECK(root.requires_grad(), ValueError,
             "backward: the tensor does not require grad and has no grad_fn");
  ATTN_CHECK(grad_root.shape() == root.shape(), ShapeError,
             "backward: gradient shape {} != tensor shape {}", shape_str(grad_root.shape()),
             shape_str(root.shape()));
  ATTN_CHECK(grad_root.dtype() == root.dtype(), DTypeError,
             "backward: gradient dtype {} != tensor dtype {}", dtype_name(grad_root.dtype()),
             dtype_name(root.dtype()));

  // Reverse postorder of a depth-first walk: every tensor comes before the
  // tensors it was computed from, so its gradient is complete when reached.
  // Each tensor's gradient sits at its number in `seen` (Reached).
  std::vector<TensorImpl*> order;
  Reached seen;
  std::vector<std::pair<TensorImpl*, std::size_t>> stack;
  stack.emplace_back(&root.impl(), 0);
  bool added = false;
  seen.insert(&root.impl(), added);
  while (!stack.empty()) {
    auto& [impl, next] = stack.back();
    const auto& fn = impl->grad_fn;
    if (fn && next < fn->inputs.size()) {
      const Tensor& in = fn->inputs[next++];
      if (in.defined() && in.requires_grad()) {
        seen.insert(&in.impl(), added);
        if (added) stack.emplace_back(&in.impl(), 0);
      }
      continue;
    }
    order.push_back(impl);
    stack.pop_back();
  }

  NoGradGuard no_grad;
  std::vector<Tensor> grads(seen.size());
  grads[seen.find(&root.impl())] = grad_root;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    TensorImpl* impl = *it;
    Tensor& slot = grads[seen.find(impl)];
    if (!slot.defined()) continue;
    Tensor g = std::move(slot);
    slot = Tensor();  // freed once used, as the tensors' own references go
    if (!impl->grad_fn) {  // a leaf: accumulate into .grad
      Tensor slot(impl->grad);
      accumulate(slot, g.is_contiguous() ? g : g.clone());
      impl->grad = slot.impl_ptr();
      continue;
    }
    Node& node = *impl->grad_fn;
    ATTN_CHECK(node.backward != nullptr, Error,
               "backward: the graph through '{}' was already used; run the forward pass again",
               node.name);
    std::vector<bool> needs(node.inputs.size());
    for (std::size_t i = 0; i < node.inputs.size(); ++i)
      needs[i] = node.inputs[i].defined() && node.inputs[i].requires_grad();
    std::vector<Tensor> in_grads = node.backward(g, needs);
    node.backward = nullptr;  // frees what the closure saved
    ATTN_CHECK(in_grads.size() == node.inputs.size(), InternalError,
               "backward of {}: returned {} gradients for {} inputs", node.name, in_grads.size(),
               node.inputs.size());
    for (std::size_t i = 0; i < in_grads.size(); ++i) {
      if (!needs[i] || !in_grads[i].defined()) continue;
      const Tensor& in = node.inputs[i];
      ATTN_CHECK(in_grads[i].shape() == in.shape(), InternalError,
                 "backward of {}: gradient {} has shape {}, input has shape {}", node.name, i,
                 shape_str(in_grads[i].shape()), shape_str(in.shape()));
      accumulate(grads[seen.find(&in.impl())], in_grads[i]);
    }
  }
}

}  // namespace attn::autograd

namespace attn {

void Tensor::backward(const Tensor& gradient) const {
  if (gradient.defined()) {
    autograd::run_backward(*this, gradient);
  } else {
    ATTN_CHECK(numel() == 1, ShapeError,
               "backward: a gradient must be given for a non-scalar tensor of shape {}",
               shape_str(shape()));
    autograd::run_backward(*this, ones(shape(), dtype()));
  }
}

}  // namespace attn
