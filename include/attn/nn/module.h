// attn/nn/module.h — the base of every layer: named parameters, submodules,
// state dicts with d2l's PyTorch names, train/eval mode.
//
// A module registers its parameters and children under the names d2l's
// PyTorch code gives them, so `state_dict()` of attn's Transformer has the
// same keys as `net.state_dict()` in d2l ("encoder.blks.block0.attention.W_q.weight").
// Each module has its own `forward(...)` with the arguments it needs; there
// is no virtual forward.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter of this module and its children, in registration order,
  // with dotted names ("W_q.weight").
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::int64_t num_parameters() const;

  // name -> parameter (the same tensors, not copies).
  std::map<std::string, Tensor> state_dict() const;
  // Copies each tensor of `state` into the parameter of that name. With
  // strict, a missing or unexpected key is an error; a shape mismatch always is
  // (the message names the parameter and both shapes). Dtypes are converted.
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);
  // load_state_dict for tensors just read from a file: each parameter takes
  // over the memory of its tensor in `state` instead of a copy, where that
  // tensor is contiguous, of the parameter's dtype and held by `state` alone
  // (no other handle, no view shares its memory; else it is copied). `state`
  // is left empty.
  void adopt_state_dict(std::map<std::string, Tensor>&& state, bool strict = true);

  // Training mode (dropout active) for this module and all children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void zero_grad();

  // Converts every parameter to `dtype` in place (the same tensors, so the
  // module's members and an optimizer built later see the change). f64 is for
  // gradient checks.
  void to(DType dtype);

  // Calls fn on this module and every descendant, parents first.
  void apply(const std::function<void(Module&)>& fn);

  // Children, in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }

 protected:
  // Registers a parameter (marks it requires_grad) and returns it.
  Tensor register_parameter(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  void add_child(const std::string& name, std::shared_ptr<Module> m);

 private:
  void collect(const std::string& prefix, NamedTensors& out) const;
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict, bool adopt);

  NamedTensors params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace attn::nn
