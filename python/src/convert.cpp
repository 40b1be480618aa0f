#include "convert.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "attn/core/error.h"
#include "attn/core/storage.h"

namespace attn::python {
namespace {

// The attn dtype of a buffer's struct format and item size, or nullopt.
std::optional<DType> dtype_of_format(std::string format, py::ssize_t itemsize) {
  if (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == '<'))
    format = format.substr(1);
  if (format.size() != 1) return std::nullopt;
  switch (format[0]) {
    case 'f': return itemsize == 4 ? std::optional(DType::f32) : std::nullopt;
    case 'd': return itemsize == 8 ? std::optional(DType::f64) : std::nullopt;
    case 'i':
    case 'l':
    case 'q':
      if (itemsize == 4) return DType::i32;
      if (itemsize == 8) return DType::i64;
      return std::nullopt;
    default: return std::nullopt;
  }
}

// The buffer of `obj`, kept alive by the storage made over it; released with
// the GIL held, on whichever thread drops the storage.
std::shared_ptr<Storage> storage_over(py::buffer_info&& info, std::size_t nbytes) {
  auto* held = new py::buffer_info(std::move(info));
  void* data = held->ptr;
  return std::make_shared<Storage>(data, nbytes, [held] {
    if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing to hand back
    py::gil_scoped_acquire gil;
    delete held;
  });
}

}  // namespace

py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return py::dtype::of<float>();
    case DType::f64: return py::dtype::of<double>();
    case DType::i32: return py::dtype::of<std::int32_t>();
    case DType::i64: return py::dtype::of<std::int64_t>();
  }
  throw InternalError("numpy_dtype: unknown dtype");
}

DType dtype_from_object(const py::handle& obj, const char* what) {
  if (py::isinstance<py::str>(obj)) {
    const std::string name = obj.cast<std::string>();
    for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64})
      if (name == dtype_name(d)) return d;
  }
  py::dtype dt;
  try {
    dt = py::dtype::from_args(py::reinterpret_borrow<py::object>(obj));
  } catch (const py::error_already_set&) {
    throw ValueError(fmt::format("{}: {} is not a dtype (float32, float64, int32 or int64)", what,
                                 py::repr(obj).cast<std::string>()));
  }
  for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64})
    if (dt.equal(numpy_dtype(d))) return d;
  throw ValueError(fmt::format("{}: dtype {} is not supported (float32, float64, int32, int64)",
                               what, py::str(dt).cast<std::string>()));
}

std::optional<Tensor> wrap_buffer(const py::handle& obj, bool writable, bool strict,
                                  const char* what) {
  auto refuse = [&](const std::string& why) -> std::optional<Tensor> {
    if (strict) throw ValueError(fmt::format("{}: {}", what, why));
    return std::nullopt;
  };
  if (!PyObject_CheckBuffer(obj.ptr())) return refuse("not an array (no buffer protocol)");
  py::buffer_info info;
  try {
    info = py::reinterpret_borrow<py::buffer>(obj).request(writable);
  } catch (const py::error_already_set& e) {
    if (!strict) return std::nullopt;
    throw ValueError(fmt::format(
        "{}: {}", what, writable ? "the array is read-only (attn.tensor(a) copies it)" : e.what()));
  }
  const std::optional<DType> dtype = dtype_of_format(info.format, info.itemsize);
  if (!dtype)
    return refuse(
        fmt::format("an array of '{}' items is not supported (float32, float64, int32, "
                    "int64, native byte order)",
                    info.format));
  const std::int64_t item = info.itemsize;
  const std::size_t ndim = static_cast<std::size_t>(info.ndim);
  std::vector<std::int64_t> shape(ndim), strides(ndim);
  std::int64_t numel = 1, extent = 0, dense = 1;
  for (std::size_t d = ndim; d-- > 0;) {
    const std::int64_t n = info.shape[d], s = info.strides[d];
    shape[d] = n;
    numel *= n;
    if (n <= 1) {  // never stepped over: any stride will do
      strides[d] = dense;
    } else {
      if (s < 0 || s % item != 0)
        return refuse("an array with negative strides or strides that are not whole items");
      strides[d] = s / item;
      extent += (n - 1) * (s / item);
    }
    dense *= std::max<std::int64_t>(n, 1);
  }
  const std::size_t nbytes = numel == 0 ? 0 : static_cast<std::size_t>((extent + 1) * item);
  return Tensor::make_view(storage_over(std::move(info), nbytes), Shape(shape), Shape(strides), 0,
                           *dtype);
}

Tensor to_tensor(const py::handle& obj, const char* what) {
  if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();
  if (obj.is_none()) throw ValueError(fmt::format("{}: expected an array, got None", what));
  if (auto t = wrap_buffer(obj, /*writable=*/false, /*strict=*/false, what)) return *t;
  py::object array = py::module_::import("numpy").attr("ascontiguousarray")(obj);
  return *wrap_buffer(array, false, /*strict=*/true, what);
}

Tensor to_optional_tensor(const py::handle& obj, const char* what) {
  return obj.is_none() ? Tensor() : to_tensor(obj, what);
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple t(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) t[i] = py::int_(shape[i]);
  return t;
}

Shape shape_from(const py::handle& obj, const char* what) {
  Shape s;
  if (py::isinstance<py::int_>(obj)) return Shape{obj.cast<std::int64_t>()};
  try {
    for (auto v : py::reinterpret_borrow<py::iterable>(obj)) s.push_back(v.cast<std::int64_t>());
  } catch (const py::cast_error&) {
    throw ValueError(fmt::format("{}: expected a shape (a tuple of ints), got {}", what,
                                 py::repr(obj).cast<std::string>()));
  } catch (const py::error_already_set&) {
    throw ValueError(fmt::format("{}: expected a shape (a tuple of ints), got {}", what,
                                 py::repr(obj).cast<std::string>()));
  }
  return s;
}

py::object to_numpy(const Tensor& t) {
  if (!t.defined()) return py::none();
  return py::module_::import("numpy").attr("asarray")(py::cast(t));
}

}  // namespace attn::python
