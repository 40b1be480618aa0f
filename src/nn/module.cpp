#include "attn/nn/module.h"

#include <set>

#include "attn/core/error.h"

namespace attn::nn {

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  for (const auto& [n, _] : params_)
    ATTN_CHECK(n != name, InternalError, "Module: parameter '{}' registered twice", name);
  t.requires_grad_(true);
  params_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  ATTN_CHECK(m != nullptr, InternalError, "Module: child '{}' is null", name);
  for (const auto& [n, _] : children_)
    ATTN_CHECK(n != name, InternalError, "Module: child '{}' registered twice", name);
  m->train(training_);
  children_.emplace_back(name, std::move(m));
}

void Module::collect(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [n, t] : params_) out.emplace_back(prefix + n, t);
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

std::int64_t Module::num_parameters() const {
  std::int64_t n = 0;
  for (auto& [_, t] : named_parameters()) n += t.numel();
  return n;
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto& [n, t] : named_parameters()) out.emplace(n, t);
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  load_state_dict(state, strict, /*adopt=*/false);
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict, bool adopt) {
  auto params = named_parameters();
  std::set<std::string> used;
  for (auto& [name, p] : params) {
    auto it = state.find(name);
    if (it == state.end()) {
      ATTN_CHECK(!strict, ValueError, "load_state_dict: missing parameter '{}'", name);
      continue;
    }
    ATTN_CHECK(it->second.shape() == p.shape(), ShapeError,
               "load_state_dict: parameter '{}' has shape {} in the model but {} in the state",
               name, shape_str(p.shape()), shape_str(it->second.shape()));
    const Tensor& t = it->second;
    // Adopted: the parameter keeps its identity (members, optimizers) and
    // takes t's memory; t's storage must be t's alone, in p's layout.
    if (adopt && t.dtype() == p.dtype() && t.is_contiguous() && t.offset() == 0 &&
        t.impl_ptr().use_count() == 1 && t.storage().use_count() == 1 && p.is_contiguous()) {
      TensorImpl& impl = p.impl();
      impl.storage = t.storage();
      impl.strides = t.strides();
      impl.offset = 0;
    } else {
      copy_(p, t);
    }
    used.insert(name);
  }
  if (strict) {
    for (const auto& [name, _] : state)
      ATTN_CHECK(used.count(name), ValueError, "load_state_dict: unexpected parameter '{}'", name);
  }
}

void Module::adopt_state_dict(std::map<std::string, Tensor>&& state, bool strict) {
  const std::map<std::string, Tensor>& view = state;
  load_state_dict(view, strict, /*adopt=*/true);
  state.clear();  // no tensor of the caller's shares a parameter's memory
}

void Module::train(bool on) {
  if (training_ != on) training_ = on;  // no write when unchanged: see translate_texts
  for (auto& [_, c] : children_) c->train(on);
}

void Module::to(DType dtype) {
  for (auto& [name, p] : named_parameters()) {
    if (p.dtype() == dtype) continue;
    Tensor converted = Tensor::empty(p.shape(), dtype);
    copy_(converted, p);
    TensorImpl& impl = p.impl();
    impl.storage = converted.storage();
    impl.strides = converted.strides();
    impl.offset = 0;
    impl.dtype = dtype;
    impl.grad.reset();
  }
}

void Module::apply(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (auto& [_, c] : children_) c->apply(fn);
}

void Module::zero_grad() {
  for (auto& [_, t] : named_parameters()) t.zero_grad();
}

}  // namespace attn::nn
