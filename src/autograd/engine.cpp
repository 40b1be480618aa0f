// The backward engine: reverse topological walk, gradient accumulation.
#include <unordered_map>
#include <unordered_set>

#include "attn/autograd/node.h"
#include "core/strided.h"

namespace attn::autograd {
namespace {

thread_local bool g_grad_enabled = true;

// a + b for two tensors of one shape and floating dtype, as a new contiguous tensor.
Tensor add_same_shape(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), a.dtype());
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

void accumulate(Tensor& slot, const Tensor& g) {
  if (!slot.defined()) {
    slot = g;
  } else {
    slot = add_same_shape(slot, g);
  }
}

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
  std::vector<TensorImpl*> order;
  std::unordered_set<TensorImpl*> seen;
  std::vector<std::pair<TensorImpl*, std::size_t>> stack;
  stack.emplace_back(&root.impl(), 0);
  seen.insert(&root.impl());
  while (!stack.empty()) {
    auto& [impl, next] = stack.back();
    const auto& fn = impl->grad_fn;
    if (fn && next < fn->inputs.size()) {
      const Tensor& in = fn->inputs[next++];
      if (in.defined() && in.requires_grad() && seen.insert(&in.impl()).second)
        stack.emplace_back(&in.impl(), 0);
      continue;
    }
    order.push_back(impl);
    stack.pop_back();
  }

  NoGradGuard no_grad;
  std::unordered_map<TensorImpl*, Tensor> grads;
  grads[&root.impl()] = grad_root;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    TensorImpl* impl = *it;
    auto found = grads.find(impl);
    if (found == grads.end()) continue;
    Tensor g = std::move(found->second);
    grads.erase(found);
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
      accumulate(grads[&in.impl()], in_grads[i]);
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
