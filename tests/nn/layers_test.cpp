#include "attn/nn/layers.h"

#include <cmath>

#include "attn/nn/init.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;
using namespace attn::nn;
using attn::testing::leaf64;

namespace {
struct Net : Module {
  Net() {
    fc = register_module("fc", std::make_shared<Linear>(3, 2));
    ln = register_module("ln", std::make_shared<LayerNorm>(2));
  }
  std::shared_ptr<Linear> fc;
  std::shared_ptr<LayerNorm> ln;
};
}  // namespace

TEST(Module, NamesStateDictAndLoad) {
  Net a, b;
  auto names = a.named_parameters();
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0].first, "fc.weight");
  EXPECT_EQ(names[1].first, "fc.bias");
  EXPECT_EQ(names[2].first, "ln.weight");
  EXPECT_EQ(names[3].first, "ln.bias");
  EXPECT_EQ(a.num_parameters(), 6 + 2 + 2 + 2);
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(to_vector<float>(b.fc->weight), to_vector<float>(a.fc->weight));
  auto state = a.state_dict();
  state["fc.weight"] = zeros({3, 3});
  try {
    b.load_state_dict(state);
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(),
                 "load_state_dict: parameter 'fc.weight' has shape [2, 3] in the model but [3, 3] "
                 "in the state");
  }
  state = a.state_dict();
  state.erase("ln.bias");
  EXPECT_THROW(b.load_state_dict(state), ValueError);
  b.load_state_dict(state, /*strict=*/false);
  state = a.state_dict();
  state["extra"] = zeros({1});
  EXPECT_THROW(b.load_state_dict(state), ValueError);
}

// Adopting: parameters take the loaded tensors' memory (no copy) but stay
// the same tensors; a tensor another handle shares is copied instead.
TEST(Module, AdoptStateDictTakesSoleTensorsAndCopiesShared) {
  Net a, b;
  const Tensor weight = b.fc->weight;  // a handle kept, as a member or optimizer would
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : a.state_dict()) state[name] = t.clone();
  const void* fresh = state["fc.weight"].storage()->data();
  Tensor shared = state["ln.weight"];  // a second handle: must be copied
  b.adopt_state_dict(std::move(state));
  EXPECT_TRUE(state.empty());
  EXPECT_EQ(b.fc->weight.storage()->data(), fresh);
  EXPECT_EQ(weight.storage()->data(), fresh);  // the same tensor as before
  EXPECT_TRUE(b.fc->weight.requires_grad());
  EXPECT_NE(b.ln->weight.storage()->data(), shared.storage()->data());
  for (const auto& [name, t] : a.state_dict())
    EXPECT_EQ(to_vector<float>(b.state_dict()[name]), to_vector<float>(t)) << name;
  // Views of a's parameters (state_dict) are copied, never shared.
  Net c;
  c.adopt_state_dict(a.state_dict());
  EXPECT_NE(c.fc->weight.storage()->data(), a.fc->weight.storage()->data());
  std::map<std::string, Tensor> bad;
  EXPECT_THROW(c.adopt_state_dict(std::move(bad)), ValueError);  // strict: all missing
}

TEST(Module, TrainEvalPropagates) {
  Net n;
  EXPECT_TRUE(n.fc->is_training());
  n.eval();
  EXPECT_FALSE(n.fc->is_training());
  EXPECT_FALSE(n.ln->is_training());
}

TEST(Linear, ShapesAndGradcheck) {
  Linear fc(5, 3);
  EXPECT_EQ(fc.forward(ones({2, 7, 5})).shape(), (Shape{2, 7, 3}));
  EXPECT_THROW(fc.forward(ones({2, 4})), ShapeError);
  fc.to(DType::f64);
  Tensor x = leaf64({2, 3, 5}, 1);
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& v) { return fc.forward(v[0]); },
                   {x, fc.weight, fc.bias});
  Linear nobias(5, 2, false);
  nobias.to(DType::f64);
  EXPECT_EQ(nobias.parameters().size(), 1u);
  EXPECT_GRADCHECK(
      [&](const std::vector<Tensor>& v) { return nobias.forward(v[0].transpose(0, 1)); },
      {x, nobias.weight});
}

TEST(Embedding, LooksUpRows) {
  Embedding emb(10, 4);
  Tensor ids = from_vector(std::vector<std::int64_t>{3, 3, 9}, {1, 3});
  Tensor out = emb.forward(ids);
  EXPECT_EQ(out.shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(out.at({0, 2, 1}), emb.weight.at({9, 1}));
  EXPECT_THROW(emb.forward(from_vector(std::vector<std::int64_t>{10})), ValueError);
}

TEST(Embedding, InitEmbeddingsRedrawsEveryEmbeddingAndNothingElse) {
  struct Two : Module {
    Two() {
      a = register_module("a", std::make_shared<Embedding>(400, 50));
      b = register_module("b", std::make_shared<Embedding>(300, 64));
      fc = register_module("fc", std::make_shared<Linear>(5, 7));
    }
    std::shared_ptr<Embedding> a, b;
    std::shared_ptr<Linear> fc;
  } net;
  const std::vector<float> fc_before = to_vector<float>(net.fc->weight);
  init_embeddings(net, 0.125);
  // The sample standard deviation of 20,000 and 19,200 draws of N(0, 0.125^2):
  // within 3% (about 4 standard errors) of 0.125; the mean within 0.005.
  for (const Tensor& w : {net.a->weight, net.b->weight}) {
    const std::vector<float> v = to_vector<float>(w);
    double m = 0, ss = 0;
    for (float x : v) m += x;
    m /= static_cast<double>(v.size());
    for (float x : v) ss += (x - m) * (x - m);
    const double sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
    EXPECT_NEAR(m, 0.0, 0.005);
    EXPECT_NEAR(sd, 0.125, 0.125 * 0.03);
  }
  EXPECT_EQ(to_vector<float>(net.fc->weight), fc_before);
  EXPECT_THROW(init_embeddings(net, 0.0), ValueError);
  EXPECT_THROW(init_embeddings(net, std::nan("")), ValueError);
}

TEST(LayerNorm, NormalizesTrailingDimsAndGradchecks) {
  LayerNorm ln(std::vector<std::int64_t>{3, 4});
  Tensor x = attn::testing::rand32({2, 3, 4}, 9, -3, 5);
  Tensor y = ln.forward(x);
  Tensor m = mean(y.reshape({2, 12}), {1});
  for (double v : to_vector<double>(m)) EXPECT_NEAR(v, 0.0, 1e-5);
  EXPECT_THROW(ln.forward(ones({2, 4, 3})), ShapeError);
  ln.to(DType::f64);
  init::normal_(ln.weight);
  init::normal_(ln.bias);
  Tensor xd = leaf64({2, 3, 4}, 10);
  EXPECT_GRADCHECK([&](const std::vector<Tensor>& v) { return ln.forward(v[0]); },
                   {xd, ln.weight, ln.bias});
}

TEST(Dropout, TrainingDropsEvalIsIdentity) {
  Dropout d(0.5);
  Tensor x = ones({1000});
  Tensor y = d.forward(x);
  double kept = sum(gt(y, 0.0)).item<double>();
  EXPECT_GT(kept, 400);
  EXPECT_LT(kept, 600);
  EXPECT_EQ(sum(y).item<double>(), 2 * kept);
  d.eval();
  EXPECT_EQ(to_vector<float>(d.forward(x)), to_vector<float>(x));
  EXPECT_THROW(Dropout(1.5), ValueError);
}

TEST(Init, XavierUniformBounds) {
  Tensor w = zeros({30, 20});
  init::xavier_uniform_(w);
  double a = std::sqrt(6.0 / 50.0);
  auto v = to_vector<float>(w);
  double mx = 0;
  for (float x : v) mx = std::max(mx, static_cast<double>(std::fabs(x)));
  EXPECT_LE(mx, a);
  EXPECT_GT(mx, 0.8 * a);
}
