// attn._core: the compiled part of the Python package `attn` (python/attn/).
// Bindings only: every rule and default comes from the library.
#include <pybind11/pybind11.h>

#include <exception>

#include "attn/core/error.h"
#include "attn/version.h"
#include "bindings.h"
#include "compute.h"

namespace attn::python {
namespace {

// The library's errors as Python exceptions, with its one-line message:
// bad shapes, dtypes and argument values are ValueError; files and
// everything else RuntimeError.
void translate_errors() {
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const ShapeError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const DTypeError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
}

}  // namespace

}  // namespace attn::python

PYBIND11_MODULE(_core, m) {
  using namespace attn::python;
  m.doc() = "attn's compiled bindings; import attn, not this module.";
  translate_errors();
  m.attr("__version__") = ATTN_VERSION_STRING;
  m.def("version", &attn::version, "The version of the attn library linked into the module.");
  m.def("set_num_threads", &set_thread_count, py::arg("n"),
        "The threads every computation of attn uses, from any Python thread (as `attn "
        "--threads N`; the default is ATTN_NUM_THREADS, else one per core).");
  m.def("get_num_threads", &thread_count);
  thread_count();  // reads ATTN_NUM_THREADS now, on the importing thread

  bind_tensor(m);
  py::module_ ops = m.def_submodule("ops", "The chapter's operations on tensors and arrays.");
  bind_ops(ops);
  py::module_ nn = m.def_submodule("nn", "The chapter's modules, with d2l's PyTorch names.");
  bind_nn(nn);
  bind_nn_blocks(nn);
  py::module_ optim = m.def_submodule("optim", "Optimizers over a module's parameters.");
  bind_optim(optim);
  bind_translator(m);
  bind_train(m);
}
