// python/src/convert.h — attn tensors to and from NumPy arrays (the buffer
// protocol, no copies) and Python values.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>

#include "attn/core/tensor.h"

namespace attn::python {

namespace py = pybind11;

// The NumPy dtype of an attn dtype (f32 -> float32, ...), and back from any
// dtype-like object (np.float32, "float32", "f32", ...). ValueError for
// another dtype.
py::dtype numpy_dtype(DType dtype);
DType dtype_from_object(const py::handle& obj, const char* what);

// A tensor over the memory of `obj` (an object with the buffer protocol: a
// NumPy array, a memoryview...), without copying: the tensor holds the
// buffer (and so the object) until its storage goes. Element types f32,
// f64, i32, i64, native byte order, strides multiples of the element size
// and not negative. `writable`: refuse a read-only buffer (ValueError).
// Returns nullopt where the buffer is not of that kind (and `strict` is
// false); with `strict`, a ValueError saying why.
std::optional<Tensor> wrap_buffer(const py::handle& obj, bool writable, bool strict,
                                  const char* what);

// An argument of an op: an attn.Tensor as it is, an array wrapped as above,
// anything else (a list, a scalar, an array with negative strides) through
// numpy.asarray first. `what` names the argument in errors.
Tensor to_tensor(const py::handle& obj, const char* what);
// The same, None giving an undefined tensor (an optional argument).
Tensor to_optional_tensor(const py::handle& obj, const char* what);

// Python's view of a shape: a tuple of ints.
py::tuple shape_tuple(const Shape& shape);
Shape shape_from(const py::handle& obj, const char* what);

// A tensor as a NumPy array sharing its memory (the array keeps the tensor
// alive); None for an undefined tensor.
py::object to_numpy(const Tensor& t);

}  // namespace attn::python
