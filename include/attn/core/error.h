// attn/core/error.h — the exceptions the library throws.
//
// Every message names the function that failed, what it expected and what it
// got: "matmul: inner dimensions differ: a is [2, 3], b is [4, 5]".
// The CLI catches attn::Error at main and prints the message on one line.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace attn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Tensor shapes that do not fit together.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// An operation called on a dtype it does not support.
class DTypeError : public Error {
 public:
  using Error::Error;
};

// An argument out of its allowed range (negative size, bad dim, bad length...).
class ValueError : public Error {
 public:
  using Error::Error;
};

// A file that is missing, unreadable, truncated or malformed.
class IOError : public Error {
 public:
  using Error::Error;
};

// A bug inside attn: an invariant that should always hold did not.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace attn

// ATTN_CHECK(cond, ErrorType, "fmt {}", args...): throw ErrorType with the
// formatted message when cond is false.
#define ATTN_CHECK(cond, ErrorType, ...)           \
  do {                                             \
    if (!(cond)) [[unlikely]] {                    \
      throw ErrorType(::fmt::format(__VA_ARGS__)); \
    }                                              \
  } while (false)
