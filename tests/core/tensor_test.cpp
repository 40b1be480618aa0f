#include <gtest/gtest.h>

#include "attn/attn.h"

using namespace attn;

TEST(Tensor, ZerosHasShapeStridesAndAlignment) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64, 0u);
  for (float v : to_vector<float>(t)) EXPECT_EQ(v, 0.0f);
}

TEST(Tensor, PrintsLikePyTorch) {
  EXPECT_EQ(tensor({1.0f, 2.5f}).str(), "tensor([1.0000, 2.5000])");
  EXPECT_EQ(arange(0.0, 6.0, 1.0, DType::f32).reshape({2, 3}).str(),
            "tensor([[0., 1., 2.],\n        [3., 4., 5.]])");
  EXPECT_EQ(arange(3).str(), "tensor([0, 1, 2])");
  EXPECT_EQ(scalar(3.5, DType::f64).str(), "tensor(3.5000, dtype=f64)");
}
