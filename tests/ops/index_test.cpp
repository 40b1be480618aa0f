#include "attn/ops/index.h"

#include <string>

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
#include "testing.h"

using namespace attn;
using attn::testing::leaf64;
using attn::testing::rand32;

namespace {

using Fn = autograd::Function;
using V = std::vector<Tensor>;
using I64 = std::vector<std::int64_t>;

// Index tensors; 1-D unless a shape is given (also for a single value).
Tensor ids64(const I64& v, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(v.size())};
  return from_vector<std::int64_t>(v, shape);
}
Tensor ids32(const std::vector<std::int32_t>& v, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(v.size())};
  return from_vector<std::int32_t>(v, shape);
}

// Expects `f` to throw E with exactly `message`.
template <class E, class F>
void expect_error(F f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no throw; expected: " << message;
  } catch (const E& e) {
    EXPECT_EQ(std::string(e.what()), message);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

// ---- plain reference kernels: one element at a time, row-major arithmetic ----

I64 unravel(std::int64_t flat, const Shape& shape) {
  I64 idx(shape.size());
  for (std::int64_t d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

std::int64_t ravel(const I64& idx, const Shape& shape) {
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

Tensor ref_embedding(const Tensor& w, const Tensor& ids) {
  auto pw = to_vector<double>(w);
  auto pi = to_vector<std::int64_t>(ids);
  std::int64_t D = w.shape()[1];
  std::vector<double> out;
  for (auto id : pi)
    for (std::int64_t c = 0; c < D; ++c) out.push_back(pw[id * D + c]);
  Shape s = ids.shape();
  s.push_back(D);
  return from_vector<double>(out, s);
}

Tensor ref_embedding_backward(const Tensor& g, const Tensor& ids, std::int64_t V) {
  auto pg = to_vector<double>(g);
  auto pi = to_vector<std::int64_t>(ids);
  std::int64_t D = g.shape().back();
  std::vector<double> gw(V * D, 0.0);
  for (std::size_t i = 0; i < pi.size(); ++i)
    for (std::int64_t c = 0; c < D; ++c) gw[pi[i] * D + c] += pg[i * D + c];
  return from_vector<double>(gw, {V, D});
}

Tensor ref_index_select(const Tensor& x, std::int64_t d, const Tensor& index) {
  auto px = to_vector<double>(x);
  auto pi = to_vector<std::int64_t>(index);
  Shape s = x.shape();
  s[d] = static_cast<std::int64_t>(pi.size());
  std::vector<double> out(shape_numel(s));
  for (std::int64_t f = 0; f < shape_numel(s); ++f) {
    I64 p = unravel(f, s);
    p[d] = pi[p[d]];
    out[f] = px[ravel(p, x.shape())];
  }
  return from_vector<double>(out, s);
}

Tensor ref_gather(const Tensor& x, std::int64_t d, const Tensor& index) {
  auto px = to_vector<double>(x);
  auto pi = to_vector<std::int64_t>(index);
  std::vector<double> out(pi.size());
  for (std::size_t f = 0; f < pi.size(); ++f) {
    I64 p = unravel(static_cast<std::int64_t>(f), index.shape());
    p[d] = pi[f];
    out[f] = px[ravel(p, x.shape())];
  }
  return from_vector<double>(out, index.shape());
}

Tensor ref_gather_backward(const Tensor& g, const Shape& x_shape, std::int64_t d,
                           const Tensor& index) {
  auto pg = to_vector<double>(g);
  auto pi = to_vector<std::int64_t>(index);
  std::vector<double> gx(shape_numel(x_shape), 0.0);
  for (std::size_t f = 0; f < pi.size(); ++f) {
    I64 p = unravel(static_cast<std::int64_t>(f), index.shape());
    p[d] = pi[f];
    gx[ravel(p, x_shape)] += pg[f];
  }
  return from_vector<double>(gx, x_shape);
}

Tensor ref_cat(const std::vector<Tensor>& ts, std::int64_t d) {
  Shape s = ts[0].shape();
  s[d] = 0;
  for (const auto& t : ts) s[d] += t.shape()[d];
  std::vector<double> out(shape_numel(s));
  for (std::int64_t f = 0; f < shape_numel(s); ++f) {
    I64 p = unravel(f, s);
    std::size_t k = 0;
    while (p[d] >= ts[k].shape()[d]) p[d] -= ts[k++].shape()[d];
    out[f] = ts[k].at(p);
  }
  return from_vector<double>(out, s);
}

Tensor to64(const Tensor& t) { return t.to(DType::f64); }

}  // namespace

// ---------------------------------------------------------------- embedding

TEST(Embedding, LooksUpRowsWithI32AndI64Ids) {
  Tensor w = arange(0.0, 12.0, 1.0, DType::f32).reshape({4, 3});
  std::vector<float> want = {3, 4, 5, 9, 10, 11, 3, 4, 5, 0, 1, 2};
  Tensor a = embedding(w, ids64({1, 3, 1, 0}, {2, 2}));
  Tensor b = embedding(w, ids32({1, 3, 1, 0}, {2, 2}));
  EXPECT_EQ(a.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(to_vector<float>(a), want);
  EXPECT_EQ(to_vector<float>(b), want);
  // A 0-dim id gives one row.
  EXPECT_EQ(to_vector<float>(embedding(w, ids64({2}).reshape({}))), (std::vector<float>{6, 7, 8}));
  EXPECT_EQ(embedding(w.to(DType::f64), ids64({2})).dtype(), DType::f64);
}

TEST(Embedding, RepeatedIdsAccumulateInBackward) {
  Tensor w = zeros({4, 2}, DType::f32);
  w.requires_grad_();
  Tensor out = embedding(w, ids64({1, 3, 1, 1}));
  sum(out * arange(0.0, 8.0, 1.0, DType::f32).reshape({4, 2})).backward();
  // Row 1 gets g rows 0, 2, 3: [0+4+6, 1+5+7]; row 3 gets g row 1; rows 0, 2 nothing.
  EXPECT_EQ(to_vector<float>(w.grad()), (std::vector<float>{0, 0, 10, 13, 0, 0, 2, 3}));
}

TEST(Embedding, Gradcheck) {
  Tensor w = leaf64({7, 5}, 1), wt = leaf64({5, 7}, 2);
  Tensor ids = ids64({6, 0, 3, 3, 6, 1, 3, 0, 2}, {3, 3});
  EXPECT_GRADCHECK([ids](const V& v) { return embedding(v[0], ids); }, {w});
  // A transposed (non-contiguous) table and i32 ids.
  Tensor ids_i32 = ids.to(DType::i32);
  EXPECT_GRADCHECK([ids_i32](const V& v) { return embedding(v[0].transpose(0, 1), ids_i32); },
                   {wt});
}

TEST(Embedding, ErrorsNameTheProblem) {
  Tensor w = zeros({10, 4});
  expect_error<ValueError>(
      [&] {
        embedding(w, ids64({3, 12}));
      },
      "embedding: id 12 is out of range for a table of 10 rows");
  expect_error<ValueError>([&] { embedding(w, ids32({-1})); },
                           "embedding: id -1 is out of range for a table of 10 rows");
  expect_error<DTypeError>([&] { embedding(w, tensor({1.0f})); },
                           "embedding: ids must be an integer tensor (i32 or i64), got f32");
  expect_error<ShapeError>(
      [&] { embedding(zeros({10}), ids64({1})); },
      "embedding: weight must be 2-D (num_embeddings, embedding_dim), got [10]");
  expect_error<DTypeError>(
      [&] {
        embedding(zeros({10, 4}, DType::i64), ids64({1}));
      },
      "embedding: weight must be f32 or f64, got i64");
}

TEST(Embedding, LargeMatchesReferenceForwardAndBackward) {
  // 3 * 331 * 257 elements: above kParallelGrain, so the parallel paths run.
  const std::int64_t Vn = 1001, D = 257;
  Generator gen(7);
  Tensor ids = randint(0, 50, {3, 331}, gen);  // few distinct ids: many repeats
  Tensor w = rand32({Vn, D}, 8);
  w.requires_grad_();
  Tensor out = embedding(w, ids);
  EXPECT_EQ(max_abs_diff(to64(out), ref_embedding(w.detach(), ids)), 0.0);
  Tensor g = rand32({3, 331, D}, 9);
  out.backward(g);
  EXPECT_LT(max_abs_diff(to64(w.grad()), ref_embedding_backward(g, ids, Vn)), 1e-4);
}

// ---------------------------------------------------------------- cat / stack

TEST(Cat, ValuesAlongEachDim) {
  Tensor a = arange(0.0, 6.0, 1.0, DType::f32).reshape({2, 3});
  Tensor b = tensor({10.0f, 20.0f}).reshape({2, 1});
  Tensor c = tensor({7.0f, 8.0f, 9.0f}).reshape({1, 3});
  Tensor ab = cat({a, b}, 1);
  EXPECT_EQ(ab.shape(), (Shape{2, 4}));
  EXPECT_EQ(to_vector<float>(ab), (std::vector<float>{0, 1, 2, 10, 3, 4, 5, 20}));
  EXPECT_EQ(to_vector<float>(cat({a, b}, -1)), to_vector<float>(ab));
  EXPECT_EQ(to_vector<float>(cat({c, a, c}, 0)),
            (std::vector<float>{7, 8, 9, 0, 1, 2, 3, 4, 5, 7, 8, 9}));
  // Integer tensors and a transposed input.
  Tensor i = arange(6).reshape({3, 2});
  EXPECT_EQ(to_vector<std::int64_t>(cat({i.transpose(0, 1), arange(3).reshape({1, 3})}, 0)),
            (I64{0, 2, 4, 1, 3, 5, 0, 1, 2}));
  // One tensor: a copy.
  EXPECT_EQ(to_vector<float>(cat({a}, 0)), to_vector<float>(a));
}

TEST(Cat, LargeMatchesReference) {
  Tensor a = rand32({5, 3, 41, 7}, 1), b = rand32({5, 3, 29, 7}, 2);
  Tensor c = rand32({7, 3, 5, 17}, 3).permute({2, 1, 3, 0});  // (5, 3, 17, 7), non-contiguous
  V ts = {a, c, b};
  EXPECT_EQ(max_abs_diff(to64(cat(ts, 2)), ref_cat(ts, 2)), 0.0);
  V big = {rand32({101, 257}, 4), rand32({101, 300}, 5).slice(1, 0, 300, 2)};
  EXPECT_EQ(max_abs_diff(to64(cat(big, 1)), ref_cat(big, 1)), 0.0);
}

TEST(Cat, GradcheckWithPermutedAndRepeatedInputs) {
  Tensor a = leaf64({3, 5}, 1), b = leaf64({7, 3}, 2), c = leaf64({2, 5}, 3);
  EXPECT_GRADCHECK([](const V& v) { return cat({v[0], v[1].transpose(0, 1)}, 1); }, (V{a, b}));
  EXPECT_GRADCHECK([](const V& v) { return cat({v[0], v[1], v[0]}, 0); }, (V{a, c}));
  EXPECT_GRADCHECK([](const V& v) { return cat({v[1], v[0]}, -2) * 2.0; }, (V{a, c}));
  // Only one input requires grad.
  Tensor fixed = leaf64({3, 4}, 4).detach();
  EXPECT_GRADCHECK([fixed](const V& v) { return cat({fixed, v[0]}, 1); }, (V{a}));
}

TEST(Cat, MismatchedShapesAndDtypesAreErrors) {
  expect_error<ShapeError>(
      [] {
        cat({zeros({2, 3}), zeros({3, 3})}, 1);
      },
      "cat: tensor 1 has shape [3, 3] but tensor 0 has [2, 3]; shapes must "
      "match except in dim 1");
  expect_error<ShapeError>(
      [] {
        cat({zeros({2, 3}), zeros({2, 3, 1})}, 0);
      },
      "cat: tensor 1 has shape [2, 3, 1] but tensor 0 has [2, 3]; shapes "
      "must match except in dim 0");
  expect_error<DTypeError>(
      [] {
        cat({zeros({2}), zeros({2}, DType::f64)}, 0);
      },
      "cat: tensor 1 has dtype f64, tensor 0 has f32");
  expect_error<ValueError>([] { cat({}, 0); }, "cat: expected at least one tensor, got none");
  expect_error<ShapeError>(
      [] {
        cat({scalar(1.0), scalar(2.0)}, 0);
      },
      "cat: cannot concatenate 0-dim tensors");
  EXPECT_THROW(cat({zeros({2, 3})}, 2), ValueError);
}

TEST(Stack, ValuesGradcheckAndErrors) {
  Tensor a = tensor({1.0f, 2.0f, 3.0f}), b = tensor({4.0f, 5.0f, 6.0f});
  Tensor s0 = stack({a, b}, 0), s1 = stack({a, b}, -1);
  EXPECT_EQ(s0.shape(), (Shape{2, 3}));
  EXPECT_EQ(to_vector<float>(s0), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(s1.shape(), (Shape{3, 2}));
  EXPECT_EQ(to_vector<float>(s1), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(to_vector<float>(stack({scalar(1.0), scalar(2.0)}, 0)), (std::vector<float>{1, 2}));

  Tensor x = leaf64({3, 5}, 1), y = leaf64({5, 3}, 2);
  EXPECT_GRADCHECK(
      [](const V& v) {
        return stack({v[0], v[1].transpose(0, 1), v[0]}, 1);
      },
      (V{x, y}));
  EXPECT_GRADCHECK([](const V& v) { return stack({v[0], v[1].transpose(0, 1)}, 2); }, (V{x, y}));

  expect_error<ShapeError>(
      [] {
        stack({zeros({3}), zeros({4})}, 0);
      },
      "stack: tensor 1 has shape [4] but tensor 0 has [3]; all must have one "
      "shape");
  expect_error<ValueError>([] { stack({}, 0); }, "stack: expected at least one tensor, got none");
  EXPECT_THROW(stack({zeros({3})}, 2), ValueError);
}

// ---------------------------------------------------------------- index_select

TEST(IndexSelect, ValuesAlongEachDim) {
  Tensor x = arange(0.0, 12.0, 1.0, DType::f32).reshape({3, 4});
  Tensor c = index_select(x, 1, ids64({3, 0, 3}));
  EXPECT_EQ(c.shape(), (Shape{3, 3}));
  EXPECT_EQ(to_vector<float>(c), (std::vector<float>{3, 0, 3, 7, 4, 7, 11, 8, 11}));
  EXPECT_EQ(to_vector<float>(index_select(x, 0, ids32({2, 0}))),
            (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
  EXPECT_EQ(to_vector<float>(index_select(x, -1, ids32({1}))), (std::vector<float>{1, 5, 9}));
  // Integer values, a transposed x, an empty index.
  EXPECT_EQ(to_vector<std::int64_t>(
                index_select(arange(6).reshape({2, 3}).transpose(0, 1), 0, ids64({2, 2}))),
            (I64{2, 5, 2, 5}));
  EXPECT_EQ(index_select(x, 1, ids64({}, {0})).shape(), (Shape{3, 0}));
  // A 0-dim index counts as one index (as in torch); the dim stays.
  EXPECT_EQ(index_select(x, 1, ids64({2}).reshape({})).shape(), (Shape{3, 1}));
}

TEST(IndexSelect, GradcheckWithRepeatedIndicesAndPermutedInput) {
  Tensor x = leaf64({3, 5, 4}, 1);  // permuted {2, 0, 1}: (4, 3, 5)
  Tensor i3 = ids64({2, 0, 2, 1}), i4 = ids32({3, 3, 0}), i5 = ids64({4, 1, 4, 0, 4, 2, 1});
  EXPECT_GRADCHECK([i3](const V& v) { return index_select(v[0], 0, i3); }, {x});
  EXPECT_GRADCHECK([i5](const V& v) { return index_select(v[0], 1, i5); }, {x});
  EXPECT_GRADCHECK([i4](const V& v) { return index_select(v[0], -1, i4); }, {x});
  EXPECT_GRADCHECK([i4](const V& v) { return index_select(v[0].permute({2, 0, 1}), 0, i4); }, {x});
  EXPECT_GRADCHECK([i3](const V& v) { return index_select(v[0].permute({2, 0, 1}), 1, i3); }, {x});
  EXPECT_GRADCHECK([i5](const V& v) { return index_select(v[0].permute({2, 0, 1}), 2, i5); }, {x});
}

TEST(IndexSelect, LargeMatchesReferenceForwardAndBackward) {
  Tensor base = rand32({23, 97, 31}, 3);
  base.requires_grad_();
  Tensor x = base.permute({1, 0, 2});  // (97, 23, 31), non-contiguous
  Generator gen(4);
  Tensor idx = randint(0, 23, {57}, gen, DType::i32);
  Tensor out = index_select(x, 1, idx);
  EXPECT_EQ(max_abs_diff(to64(out), ref_index_select(x.detach(), 1, idx)), 0.0);
  // The backward is gather's scatter-add with the index broadcast to out's shape.
  Tensor g = rand32(out.shape(), 5);
  out.backward(g);
  Tensor full_idx = idx.to(DType::i64).reshape({1, 57, 1}).expand({97, 57, 31}).contiguous();
  Tensor want = ref_gather_backward(g, x.shape(), 1, full_idx).permute({1, 0, 2});
  EXPECT_LT(max_abs_diff(to64(base.grad()), want), 1e-5);
  // dim 0 (outer == 1): the serial index-add path.
  Tensor y = rand32({41, 800}, 6);
  y.requires_grad_();
  Tensor i0 = randint(0, 41, {60}, gen);
  Tensor o0 = index_select(y, 0, i0);
  EXPECT_EQ(max_abs_diff(to64(o0), ref_index_select(y.detach(), 0, i0)), 0.0);
  Tensor g0 = rand32(o0.shape(), 7);
  o0.backward(g0);
  Tensor fi0 = i0.reshape({60, 1}).expand({60, 800}).contiguous();
  EXPECT_LT(max_abs_diff(to64(y.grad()), ref_gather_backward(g0, y.shape(), 0, fi0)), 1e-5);
}

TEST(IndexSelect, ErrorsNameTheProblem) {
  Tensor x = zeros({3, 4});
  expect_error<ValueError>(
      [&] {
        index_select(x, 1, ids64({0, 4}));
      },
      "index_select: index 4 is out of range for dim 1 of size 4");
  expect_error<ValueError>([&] { index_select(x, 0, ids32({-1})); },
                           "index_select: index -1 is out of range for dim 0 of size 3");
  expect_error<DTypeError>([&] { index_select(x, 0, tensor({0.0f})); },
                           "index_select: index must be an integer tensor (i32 or i64), got f32");
  expect_error<ShapeError>(
      [&] {
        index_select(x, 0, ids64({0, 1}, {1, 2}));
      },
      "index_select: index must be 1-D, got shape [1, 2]");
  EXPECT_THROW(index_select(x, 2, ids64({0})), ValueError);
}

// ---------------------------------------------------------------- gather

TEST(Gather, ValuesLikeTorch) {
  // torch.gather(torch.tensor([[1, 2], [3, 4]]), 1, torch.tensor([[0, 0], [1, 0]])) == [[1, 1], [4,
  // 3]]
  Tensor t = tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2});
  EXPECT_EQ(to_vector<float>(gather(t, 1, ids64({0, 0, 1, 0}, {2, 2}))),
            (std::vector<float>{1, 1, 4, 3}));
  // dim 0: out[i][j] = t[index[i][j]][j]
  EXPECT_EQ(to_vector<float>(gather(t, 0, ids32({1, 0, 1, 1, 0, 0}, {3, 2}))),
            (std::vector<float>{3, 2, 3, 4, 1, 2}));
  // An index smaller than x in the other dim, and integer values.
  Tensor x = arange(12).reshape({3, 4});
  EXPECT_EQ(to_vector<std::int64_t>(gather(x, -1, ids64({3, 2, 0}, {3, 1}))), (I64{3, 6, 8}));
  EXPECT_EQ(to_vector<std::int64_t>(gather(x.transpose(0, 1), 1, ids64({2, 0}, {2, 1}))),
            (I64{8, 1}));
}

TEST(Gather, GradcheckWithRepeatedIndicesAndPermutedInput) {
  Tensor x = leaf64({3, 5, 4}, 1);
  Generator gen(2);
  Tensor i1 = randint(0, 5, {3, 7, 3}, gen);  // larger than x along dim 1: repeats
  Tensor i0 = randint(0, 3, {5, 2, 4}, gen, DType::i32);
  Tensor i2 = randint(0, 4, {2, 5, 6}, gen);
  EXPECT_GRADCHECK([i1](const V& v) { return gather(v[0], 1, i1); }, {x});
  EXPECT_GRADCHECK([i0](const V& v) { return gather(v[0], 0, i0); }, {x});
  EXPECT_GRADCHECK([i2](const V& v) { return gather(v[0], -1, i2); }, {x});
  // x permuted to (4, 3, 5) and a permuted (non-contiguous) index.
  Tensor ip = randint(0, 3, {5, 4, 2}, gen).permute({1, 2, 0});  // (4, 2, 5)
  EXPECT_GRADCHECK([ip](const V& v) { return gather(v[0].permute({2, 0, 1}), 1, ip); }, {x});
}

TEST(Gather, LargeMatchesReferenceForwardAndBackward) {
  Tensor base = rand32({37, 61, 29}, 6);
  base.requires_grad_();
  Tensor x = base.permute({2, 0, 1});  // (29, 37, 61)
  Generator gen(7);
  Tensor idx = randint(0, 37, {29, 53, 47}, gen);
  Tensor out = gather(x, 1, idx);
  EXPECT_EQ(max_abs_diff(to64(out), ref_gather(x.detach(), 1, idx)), 0.0);
  Tensor g = rand32(out.shape(), 8);
  out.backward(g.transpose(0, 2).contiguous().transpose(0, 2));  // a non-contiguous gradient
  Tensor want = ref_gather_backward(g, x.shape(), 1, idx).permute({1, 2, 0});
  EXPECT_LT(max_abs_diff(to64(base.grad()), want), 1e-5);
}

TEST(Gather, ErrorsNameTheProblem) {
  Tensor x = zeros({3, 4});
  expect_error<ValueError>(
      [&] {
        gather(x, 1, ids64({0, 4}, {1, 2}));
      },
      "gather: index 4 is out of range for dim 1 of size 4");
  expect_error<ShapeError>(
      [&] {
        gather(x, 1, ids64({0, 1}));
      },
      "gather: index must have as many dims as x: index is [2], x is [3, 4]");
  expect_error<ShapeError>(
      [&] {
        gather(x, 1, zeros({4, 1}, DType::i64));
      },
      "gather: index [4, 1] is larger than x [3, 4] in dim 0 (only dim 1 may "
      "be larger)");
  expect_error<DTypeError>(
      [&] {
        gather(x, 1, zeros({1, 1}, DType::f64));
      },
      "gather: index must be an integer tensor (i32 or i64), got f64");
}

// ---------------------------------------------------------------- repeat_interleave

TEST(RepeatInterleave, Values) {
  EXPECT_EQ(to_vector<std::int64_t>(repeat_interleave(ids64({2, 3}), 2, 0)), (I64{2, 2, 3, 3}));
  // d2l: valid_lens (B) -> (B * num_heads), each batch's length once per head.
  Tensor lens = repeat_interleave(ids32({3, 1}), 3, 0);
  EXPECT_EQ(lens.dtype(), DType::i32);
  EXPECT_EQ(to_vector<std::int32_t>(lens), (std::vector<std::int32_t>{3, 3, 3, 1, 1, 1}));
  Tensor x = tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2});
  Tensor r1 = repeat_interleave(x, 3, 1);
  EXPECT_EQ(r1.shape(), (Shape{2, 6}));
  EXPECT_EQ(to_vector<float>(r1), (std::vector<float>{1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}));
  EXPECT_EQ(to_vector<float>(repeat_interleave(x, 2, -2)),
            (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_EQ(to_vector<float>(repeat_interleave(x.transpose(0, 1), 2, 1)),
            (std::vector<float>{1, 1, 3, 3, 2, 2, 4, 4}));
  EXPECT_EQ(repeat_interleave(x, 0, 1).shape(), (Shape{2, 0}));
}

TEST(RepeatInterleave, NeverAliasesItsInput) {
  for (Tensor x : {tensor({1.0f, 2.0f}), tensor({5.0f})}) {
    for (std::int64_t r : {1, 3}) {
      Tensor out = repeat_interleave(x, r, 0);
      EXPECT_NE(out.storage(), x.storage());
      EXPECT_TRUE(out.is_contiguous());
    }
  }
}

TEST(RepeatInterleave, GradcheckSumsEachGroup) {
  Tensor x = leaf64({3, 4, 5}, 1), one = leaf64({1, 4}, 2);
  for (std::int64_t d : {0, 1, 2, -1}) {
    SCOPED_TRACE(d);
    EXPECT_GRADCHECK([d](const V& v) { return repeat_interleave(v[0], 3, d); }, {x});
    EXPECT_GRADCHECK(
        [d](const V& v) {
          return repeat_interleave(v[0].permute({1, 2, 0}), 2, d);
        },
        {x});
  }
  EXPECT_GRADCHECK([](const V& v) { return repeat_interleave(v[0], 5, 0); }, {one});
  EXPECT_GRADCHECK([](const V& v) { return repeat_interleave(v[0], 1, 1); }, {one});
  // The gradient of each input element is the sum of its group.
  Tensor y = zeros({2}, DType::f32);
  y.requires_grad_();
  repeat_interleave(y, 3, 0).backward(tensor({1.0f, 2.0f, 3.0f, 10.0f, 20.0f, 30.0f}));
  EXPECT_EQ(to_vector<float>(y.grad()), (std::vector<float>{6, 60}));
}

TEST(RepeatInterleave, ErrorsNameTheProblem) {
  expect_error<ValueError>(
      [] {
        repeat_interleave(ids64({1, 2}), -1, 0);
      },
      "repeat_interleave: repeats must be non-negative, got -1");
  expect_error<ShapeError>([] { repeat_interleave(scalar(1.0), 2, 0); },
                           "repeat_interleave: x must have at least 1 dim, got a 0-dim tensor");
  EXPECT_THROW(repeat_interleave(zeros({2, 2}), 2, 2), ValueError);
}
