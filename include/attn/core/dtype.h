// attn/core/dtype.h — element types.
//
// f32 is for training and inference, f64 for gradient checks and reference
// computations, i32/i64 for token ids and lengths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attn/core/error.h"

namespace attn {

enum class DType : std::uint8_t { f32, f64, i32, i64 };

constexpr std::size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType dt) {
  switch (dt) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

constexpr bool is_floating(DType dt) { return dt == DType::f32 || dt == DType::f64; }

// The DType of a C++ element type.
template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of<std::int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct dtype_of<std::int64_t> {
  static constexpr DType value = DType::i64;
};
template <class T>
inline constexpr DType dtype_v = dtype_of<T>::value;

// Dtype dispatch, in one place. `fn` is a lambda templated on the element
// type: dispatch_float(dt, "softmax", [&]<class T>() { ... });
template <class Fn>
decltype(auto) dispatch_float(DType dt, std::string_view op, Fn&& fn) {
  switch (dt) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f64: return fn.template operator()<double>();
    default: break;
  }
  throw DTypeError(
      fmt::format("{}: expected a floating dtype (f32 or f64), got {}", op, dtype_name(dt)));
}

template <class Fn>
decltype(auto) dispatch_int(DType dt, std::string_view op, Fn&& fn) {
  switch (dt) {
    case DType::i32: return fn.template operator()<std::int32_t>();
    case DType::i64: return fn.template operator()<std::int64_t>();
    default: break;
  }
  throw DTypeError(
      fmt::format("{}: expected an integer dtype (i32 or i64), got {}", op, dtype_name(dt)));
}

template <class Fn>
decltype(auto) dispatch_all(DType dt, std::string_view op, Fn&& fn) {
  switch (dt) {
    case DType::f32: return fn.template operator()<float>();
    case DType::f64: return fn.template operator()<double>();
    case DType::i32: return fn.template operator()<std::int32_t>();
    case DType::i64: return fn.template operator()<std::int64_t>();
  }
  throw DTypeError(fmt::format("{}: unknown dtype", op));
}

}  // namespace attn
