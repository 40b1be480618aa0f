// python/src/module_binding.h — what every attn.nn module shares in Python:
// state_dict() / load_state_dict() of NumPy arrays under d2l's PyTorch
// names, parameters, train() / eval().
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "attn/nn/module.h"

namespace attn::python {

namespace py = pybind11;

template <class M>
using ModuleClass = py::class_<M, nn::Module, std::shared_ptr<M>>;

// The base class attn.nn.Module (bound once, in nn.cpp).
void bind_module_base(py::module_& nn);

// module(...) is module.forward(...), as in PyTorch.
template <class C>
void call_is_forward(C& c) {
  c.attr("__call__") = c.attr("forward");
}

}  // namespace attn::python
