// tests/testing.h — helpers shared by the tests.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attn/attn.h"

namespace attn::testing {

// A random f64 leaf that requires grad (for gradcheck).
inline Tensor leaf64(const Shape& shape, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator gen(seed);
  Tensor t = uniform(lo, hi, shape, gen, DType::f64);
  t.requires_grad_();
  return t;
}

inline Tensor rand32(const Shape& shape, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator gen(seed);
  return uniform(lo, hi, shape, gen, DType::f32);
}

// The same shape, dtype and bits (NaN included).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.numel() * dtype_size(a.dtype())) == 0;
}

// A fresh, empty directory per test (under the system temp dir), removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("attn_") + info->test_suite_name() + "_" + std::to_string(::getpid()) +
            "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The names in the directory, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::filesystem::path dir_;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void expect_gradcheck(const autograd::Function& fn, const std::vector<Tensor>& inputs,
                             const autograd::GradcheckOptions& options = {}) {
  auto r = autograd::gradcheck(fn, inputs, options);
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace attn::testing

// EXPECT_GRADCHECK(fn, {inputs...}): the f64 gradient check passes.
#define EXPECT_GRADCHECK(...)                       \
  do {                                              \
    SCOPED_TRACE("gradcheck");                      \
    ::attn::testing::expect_gradcheck(__VA_ARGS__); \
  } while (false)
