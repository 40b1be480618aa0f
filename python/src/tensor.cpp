// attn.Tensor: NumPy arrays in and out without copies (the buffer protocol
// both ways), autograd, and the creation functions.
#include <pybind11/numpy.h>
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "attn/autograd/node.h"
#include "attn/core/rng.h"
#include "attn/core/tensor.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"
#include "bindings.h"
#include "compute.h"
#include "convert.h"

namespace attn::python {
namespace {

const char* format_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f";
    case DType::f64: return "d";
    case DType::i32: return "i";
    case DType::i64: return "l";
  }
  return "?";
}

py::buffer_info buffer_of(const Tensor& t) {
  const std::int64_t item = static_cast<std::int64_t>(dtype_size(t.dtype()));
  std::vector<py::ssize_t> shape, strides;
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    shape.push_back(t.size(d));
    strides.push_back(t.stride(d) * item);
  }
  return py::buffer_info(t.raw_data(), item, format_of(t.dtype()), t.dim(), shape, strides,
                         /*readonly=*/false);
}

std::string repr(const Tensor& t) {
  std::string s = t.str();  // "tensor([...])", or "tensor([...], requires_grad=True)"
  if (!s.empty() && s.back() == ')') s.pop_back();
  const std::string grad = ", requires_grad=True";
  if (s.size() >= grad.size() && s.compare(s.size() - grad.size(), grad.size(), grad) == 0)
    s.resize(s.size() - grad.size());
  std::string shape;
  for (std::int64_t d = 0; d < t.dim(); ++d) shape += fmt::format("{}{}", d ? ", " : "", t.size(d));
  if (t.dim() == 1) shape += ",";
  s += fmt::format(", shape=({}), dtype={}", shape,
                   py::str(numpy_dtype(t.dtype())).cast<std::string>());
  if (t.requires_grad()) s += ", requires_grad=True";
  return s + ")";
}

// attn.tensor(data): always a copy, in `dtype` when given.
Tensor tensor_copy(const py::object& data, const py::object& dtype, bool requires_grad) {
  Tensor src = to_tensor(data, "tensor");
  DType dt = dtype.is_none() ? src.dtype() : dtype_from_object(dtype, "tensor");
  Tensor out = compute([&] { return src.to(dt).clone(); });
  if (requires_grad) out.requires_grad_(true);
  return out;
}

Tensor from_numpy(const py::object& array) {
  return *wrap_buffer(array, /*writable=*/true, /*strict=*/true, "from_numpy");
}

DType dtype_arg(const py::object& dtype) {
  return dtype.is_none() ? DType::f32 : dtype_from_object(dtype, "dtype");
}

// attn.no_grad(): a context manager (and decorator-free) around NoGradGuard.
class NoGrad {
 public:
  NoGrad() = default;
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;
  void enter() { guards_.push_back(std::make_unique<autograd::NoGradGuard>()); }
  void exit() {
    if (!guards_.empty()) guards_.pop_back();
  }

 private:
  std::vector<std::unique_ptr<autograd::NoGradGuard>> guards_;
};

// A binary op whose right operand may be a Python number.
template <class TensorFn, class ScalarFn>
auto binary(TensorFn tensor_fn, ScalarFn scalar_fn) {
  return [tensor_fn, scalar_fn](const Tensor& a, const py::object& b) -> Tensor {
    if (py::isinstance<py::float_>(b) || py::isinstance<py::int_>(b)) {
      const double v = b.cast<double>();
      return compute([&] { return scalar_fn(a, v); });
    }
    Tensor tb = to_tensor(b, "other");
    return compute([&] { return tensor_fn(a, tb); });
  };
}

void bind_methods(py::class_<Tensor>& c) {
  c.def("__add__", binary([](auto& a, auto& b) { return add(a, b); },
                          [](auto& a, double b) { return add(a, b); }))
      .def("__radd__", binary([](auto& a, auto& b) { return add(b, a); },
                              [](auto& a, double b) { return add(a, b); }))
      .def("__sub__", binary([](auto& a, auto& b) { return sub(a, b); },
                             [](auto& a, double b) { return sub(a, b); }))
      .def("__rsub__", binary([](auto& a, auto& b) { return sub(b, a); },
                              [](auto& a, double b) { return rsub(b, a); }))
      .def("__mul__", binary([](auto& a, auto& b) { return mul(a, b); },
                             [](auto& a, double b) { return mul(a, b); }))
      .def("__rmul__", binary([](auto& a, auto& b) { return mul(b, a); },
                              [](auto& a, double b) { return mul(a, b); }))
      .def("__truediv__", binary([](auto& a, auto& b) { return div(a, b); },
                                 [](auto& a, double b) { return div(a, b); }))
      .def("__rtruediv__", binary([](auto& a, auto& b) { return div(b, a); },
                                  [](auto& a, double b) { return rdiv(b, a); }))
      .def("__neg__", [](const Tensor& a) { return compute([&] { return neg(a); }); })
      .def("__matmul__",
           [](const Tensor& a, const py::object& b) {
             Tensor tb = to_tensor(b, "other");
             return compute([&] { return matmul(a, tb); });
           })
      .def("__rmatmul__", [](const Tensor& a, const py::object& b) {
        Tensor tb = to_tensor(b, "other");
        return compute([&] { return matmul(tb, a); });
      });
  c.def(
       "sum",
       [](const Tensor& t, const py::object& dim, bool keepdim) {
         std::vector<std::int64_t> dims;
         if (!dim.is_none()) dims = std::vector<std::int64_t>(shape_from(dim, "sum"));
         return compute([&] { return sum(t, dims, keepdim); });
       },
       py::arg("dim") = py::none(), py::arg("keepdim") = false,
       "Sum over `dim` (an int or a tuple; None: every dim).")
      .def(
          "mean",
          [](const Tensor& t, const py::object& dim, bool keepdim) {
            std::vector<std::int64_t> dims;
            if (!dim.is_none()) dims = std::vector<std::int64_t>(shape_from(dim, "mean"));
            return compute([&] { return mean(t, dims, keepdim); });
          },
          py::arg("dim") = py::none(), py::arg("keepdim") = false,
          "Mean over `dim` (an int or a tuple; None: every dim).")
      .def("exp", [](const Tensor& t) { return compute([&] { return exp(t); }); })
      .def("log", [](const Tensor& t) { return compute([&] { return log(t); }); })
      .def("sqrt", [](const Tensor& t) { return compute([&] { return sqrt(t); }); })
      .def("abs", [](const Tensor& t) { return compute([&] { return abs(t); }); })
      .def("sin", [](const Tensor& t) { return compute([&] { return sin(t); }); })
      .def("cos", [](const Tensor& t) { return compute([&] { return cos(t); }); })
      .def("tanh", [](const Tensor& t) { return compute([&] { return tanh(t); }); })
      .def("sigmoid", [](const Tensor& t) { return compute([&] { return sigmoid(t); }); })
      .def("relu", [](const Tensor& t) { return compute([&] { return relu(t); }); })
      .def("__pow__", [](const Tensor& t,
                         double exponent) { return compute([&] { return pow(t, exponent); }); })
      .def(
          "reshape",
          [](const Tensor& t, const py::args& shape) {
            Shape s =
                shape.size() == 1 ? shape_from(shape[0], "reshape") : shape_from(shape, "reshape");
            return compute([&] { return t.reshape(s); });
          },
          "A view with this shape when the strides allow it, else a copy; one -1 allowed.")
      .def(
          "permute",
          [](const Tensor& t, const py::args& dims) {
            Shape s =
                dims.size() == 1 ? shape_from(dims[0], "permute") : shape_from(dims, "permute");
            return t.permute(std::vector<std::int64_t>(s));
          },
          "A view with the dims in this order.")
      .def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"))
      .def("contiguous", [](const Tensor& t) { return compute([&] { return t.contiguous(); }); })
      .def("clone", [](const Tensor& t) { return compute([&] { return t.clone(); }); })
      .def(
          "to",
          [](const Tensor& t, const py::object& dtype) {
            DType dt = dtype_from_object(dtype, "to");
            return compute([&] { return t.to(dt); });
          },
          py::arg("dtype"), "A copy in `dtype` (the tensor itself when it has it already).")
      .def("detach", &Tensor::detach, "The same data, cut from the autograd graph.")
      .def(
          "backward",
          [](const Tensor& t, const py::object& gradient) {
            Tensor g = to_optional_tensor(gradient, "backward: gradient");
            compute([&] { t.backward(g); });
          },
          py::arg("gradient") = py::none(),
          "Backpropagates from this tensor, accumulating into the .grad of every leaf that "
          "requires one. Without `gradient`, the tensor must hold one element.")
      .def(
          "requires_grad_",
          [](const Tensor& t, bool on) {
            t.requires_grad_(on);
            return t;
          },
          py::arg("requires_grad") = true, "Marks a leaf as requiring a gradient; returns it.")
      .def("zero_grad", &Tensor::zero_grad, "Drops the accumulated gradient (.grad becomes None).")
      .def(
          "numpy", [](const Tensor& t) { return to_numpy(t); },
          "A NumPy array sharing this tensor's memory (no copy); it keeps the tensor alive.")
      .def(
          "item",
          [](const Tensor& t) -> py::object {
            if (is_floating(t.dtype())) return py::float_(t.item<double>());
            return py::int_(t.item<std::int64_t>());
          },
          "The value of a one-element tensor as a Python number.")
      .def("tolist", [](const Tensor& t) { return to_numpy(t).attr("tolist")(); })
      .def("__len__",
           [](const Tensor& t) {
             ATTN_CHECK(t.dim() > 0, ValueError, "len() of a 0-dim tensor");
             return t.size(0);
           })
      .def("__repr__", &repr)
      .def("__str__", &Tensor::str);
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::class_<Tensor> c(m, "Tensor", py::buffer_protocol(), R"doc(
An n-dimensional array of float32, float64, int32 or int64: a view (shape,
strides, offset) onto reference-counted memory, row-major and batch-first,
with autograd state (requires_grad, grad).

attn.Tensor(array) and attn.from_numpy(array) share the array's memory (no
copy; the tensor keeps the array alive); np.asarray(tensor) and
tensor.numpy() share the tensor's (the array keeps the tensor alive).
attn.tensor(data) copies.)doc");
  c.def(py::init([](const py::object& array, bool requires_grad) {
          Tensor t = from_numpy(array);
          if (requires_grad) t.requires_grad_(true);
          return t;
        }),
        py::arg("array"), py::arg("requires_grad") = false,
        "A tensor over the memory of `array` (writable, float32/float64/int32/int64, strides "
        "of whole items, none negative), without copying.")
      .def_buffer(&buffer_of)
      .def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def_property_readonly(
          "strides", [](const Tensor& t) { return shape_tuple(t.strides()); },
          "In elements (NumPy's are in bytes).")
      .def_property_readonly("dtype", [](const Tensor& t) { return numpy_dtype(t.dtype()); })
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property_readonly(
          "data_ptr",
          [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.raw_data()); },
          "The address of the first element.")
      .def("numel", &Tensor::numel)
      .def("dim", &Tensor::dim)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def_property(
          "requires_grad", &Tensor::requires_grad,
          [](const Tensor& t, bool on) { t.requires_grad_(on); },
          "Whether backward() computes a gradient for this tensor (leaves: settable).")
      .def_property_readonly(
          "grad",
          [](const Tensor& t) -> py::object {
            Tensor g = t.grad();
            if (!g.defined()) return py::none();
            return py::cast(g);
          },
          "The gradient accumulated by backward(), or None.");
  bind_methods(c);

  m.def("from_numpy", &from_numpy, py::arg("array"),
        "A tensor sharing `array`'s memory (no copy); ValueError for a read-only array, an "
        "unsupported dtype or negative strides.");
  m.def("tensor", &tensor_copy, py::arg("data"), py::arg("dtype") = py::none(),
        py::arg("requires_grad") = false,
        "A new tensor with a copy of `data` (an array, a list, a number), in `dtype` if given.");
  m.def(
      "zeros",
      [](const py::object& shape, const py::object& dtype) {
        return zeros(shape_from(shape, "zeros"), dtype_arg(dtype));
      },
      py::arg("shape"), py::arg("dtype") = py::none());
  m.def(
      "ones",
      [](const py::object& shape, const py::object& dtype) {
        return ones(shape_from(shape, "ones"), dtype_arg(dtype));
      },
      py::arg("shape"), py::arg("dtype") = py::none());
  m.def(
      "arange",
      [](double start, const py::object& end, double step, const py::object& dtype) {
        if (end.is_none()) return arange(0.0, start, step, dtype_arg(dtype));
        return arange(start, end.cast<double>(), step, dtype_arg(dtype));
      },
      py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1.0,
      py::arg("dtype") = py::none(),
      "[start, end) in steps of `step` (arange(n): 0..n-1), float32 unless `dtype` says.");
  m.def("manual_seed", &manual_seed, py::arg("seed"),
        "Seeds the generator (Philox) that rand, randn, normal, parameter initialization and "
        "dropout draw from: the same seed gives the same numbers as the C++ library.");
  m.def(
      "rand",
      [](const py::object& shape, const py::object& dtype) {
        return rand(shape_from(shape, "rand"), dtype_arg(dtype));
      },
      py::arg("shape"), py::arg("dtype") = py::none(), "U[0, 1) from the default generator.");
  m.def(
      "randn",
      [](const py::object& shape, const py::object& dtype) {
        return randn(shape_from(shape, "randn"), dtype_arg(dtype));
      },
      py::arg("shape"), py::arg("dtype") = py::none(), "N(0, 1) from the default generator.");
  m.def(
      "normal",
      [](double mean, double std, const py::object& shape, const py::object& dtype) {
        return normal(mean, std, shape_from(shape, "normal"), dtype_arg(dtype));
      },
      py::arg("mean"), py::arg("std"), py::arg("shape"), py::arg("dtype") = py::none(),
      "N(mean, std^2) from the default generator.");

  py::class_<NoGrad>(m, "no_grad", R"doc(
Gradient recording off in this thread while the block runs:

    with attn.no_grad():
        y = net(x)          # no graph is built, y.requires_grad is False)doc")
      .def(py::init<>())
      .def("__enter__",
           [](NoGrad& g) {
             g.enter();
             return &g;
           })
      .def("__exit__", [](NoGrad& g, const py::object&, const py::object&, const py::object&) {
        g.exit();
        return false;
      });
  m.def("is_grad_enabled", &autograd::grad_enabled,
        "Whether operations record the autograd graph in this thread.");
}

}  // namespace attn::python
