// python/src/bindings.h — the parts of the module attn._core, one function
// per source file, called in this order by module.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace attn::python {

namespace py = pybind11;

void bind_tensor(py::module_& m);  // tensor.cpp: attn.Tensor, creation, no_grad
void bind_ops(py::module_& ops);  // ops.cpp: attn.ops
void bind_nn(py::module_& nn);  // nn.cpp: attn.nn's module base, layers, attention
void bind_nn_blocks(py::module_& nn);  // nn_blocks.cpp: Transformer blocks, NW, Bahdanau
void bind_optim(py::module_& optim);  // nn.cpp: attn.optim
void bind_translator(py::module_& m);  // translator_binding.cpp: Translator, evaluate
void bind_train(py::module_& m);  // train.cpp: attn.train, attn.hyperparameters

}  // namespace attn::python
