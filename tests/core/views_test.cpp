#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;

TEST(Views, ShareStorageAndHaveRightStrides) {
  Tensor a = arange(0.0, 24.0, 1.0, DType::f32).reshape({2, 3, 4});
  Tensor p = a.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_EQ(p.storage(), a.storage());
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(p.at({3, 1, 2}), a.at({1, 2, 3}));
  Tensor s = a.slice(2, 1, 4, 2);
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(to_vector<float>(s.select(0, 1).select(0, 0)), (std::vector<float>{13, 15}));
  EXPECT_EQ(a.narrow(1, 1, 2).shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(a.unsqueeze(1).shape(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(a.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(a.unsqueeze(0).squeeze().shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(tensor({1, 2}).expand({3, 2}).strides(), (Shape{0, 1}));
  EXPECT_EQ(a.reshape({-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_EQ(a.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(a.transpose(0, 1).reshape({6, 4}).contiguous().at({1, 0}), 12.0);
  EXPECT_THROW(a.transpose(1, 2).view({24}), ShapeError);
  EXPECT_THROW(a.reshape({5, -1}), ShapeError);
  EXPECT_THROW(a.permute({0, 0, 1}), ValueError);
  EXPECT_THROW(a.narrow(1, 2, 2), ValueError);
  EXPECT_THROW(a.expand({2, 5, 4}), ShapeError);
}

TEST(Views, ToConvertsDtypes) {
  Tensor a = tensor({1.5f, -2.5f});
  EXPECT_EQ(to_vector<std::int64_t>(a.to(DType::i64)), (std::vector<std::int64_t>{1, -2}));
  EXPECT_EQ(a.to(DType::f64).dtype(), DType::f64);
}

TEST(Views, Gradcheck) {
  Tensor x = leaf64({3, 4, 5}, 31);
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& v) {
        return v[0].permute({1, 2, 0}).reshape({4, 15});
      },
      {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return v[0].slice(2, 1, 5, 2) * 1.5; }, {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return v[0].narrow(0, 1, 2).select(1, 3); },
                   {x});
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& v) {
        return v[0].select(2, 0).unsqueeze(0).expand({2, 3, 4});
      },
      {x});
  EXPECT_GRADCHECK(
      [](const std::vector<Tensor>& v) { return v[0].transpose(0, 2).contiguous().flatten(); },
      {x});
  EXPECT_GRADCHECK([](const std::vector<Tensor>& v) { return v[0].clone().to(DType::f64); }, {x});
}

TEST(Random, SeededAndReproducible) {
  Generator g1(42), g2(42), g3(43);
  EXPECT_EQ(to_vector<float>(rand({10}, g1)), to_vector<float>(rand({10}, g2)));
  EXPECT_NE(to_vector<float>(rand({10}, g1)), to_vector<float>(rand({10}, g3)));
  Generator g(7);
  Tensor n = randn({100000}, g, DType::f64);
  double m = mean(n).item<double>();
  double var = mean(n * n).item<double>() - m * m;
  EXPECT_NEAR(m, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.02);
  Tensor u = rand({100000}, g);
  EXPECT_GE(to_vector<float>(u).front(), 0.0f);
  EXPECT_NEAR(mean(u).item<float>(), 0.5, 0.01);
  // Element i of a draw can be regenerated from (seed, offset, i).
  Generator h(5);
  h.reserve(3);
  std::uint64_t off = h.offset();
  Tensor v = rand({9}, h);
  EXPECT_EQ(to_vector<float>(v)[6], philox_uniform(5, off, 6));
}

TEST(Creation, Basics) {
  EXPECT_EQ(to_vector<float>(eye(3)), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(to_vector<std::int64_t>(arange(5)), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(0.0, 1.0, 0.1, DType::f32).numel(), 10);
  EXPECT_EQ(full({2}, 7.0).at({1}), 7.0);
  EXPECT_THROW(zeros({-1, 2}), ValueError);
  EXPECT_THROW(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), ShapeError);
}
