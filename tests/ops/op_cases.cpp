#include "op_cases.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include "attn/attn.h"

namespace attn::cases {

namespace {

using In = std::vector<Tensor>;

// linear's reference: the plain product with the weight transposed, plus the bias.
Tensor linear_reference(const In& x) {
  Tensor y = matmul_reference(x[0].reshape({-1, x[0].size(-1)}), x[1].transpose(0, 1));
  Shape s = x[0].shape();
  s.back() = x[1].size(0);
  return add(y, x[2]).reshape(s);
}

AttentionOptions attention_options(const In& x, bool causal) {
  AttentionOptions o;
  if (x.size() > 3) o.valid_lens = x[3];
  o.causal = causal;
  o.training = false;
  return o;
}

// The fused op (or, with `decode`, the decode kernel) against the
// materialized reference, its options drawn from the inputs.
OpCase attention_case_with(std::string variant, std::vector<Input> inputs,
                           std::function<AttentionOptions(const In&)> opts, bool decode = false) {
  OpCase c{decode ? "attention_decode" : "scaled_dot_product_attention", std::move(variant),
           std::move(inputs)};
  c.fn = [opts, decode](const In& x) {
    return decode ? attention_decode(x[0], x[1], x[2], opts(x))
                  : scaled_dot_product_attention(x[0], x[1], x[2], opts(x));
  };
  c.reference = [opts](const In& x) {
    return scaled_dot_product_attention_reference(x[0], x[1], x[2], opts(x));
  };
  c.tol = 2e-5;
  c.differentiable = !decode;
  return c;
}

OpCase attention_case(std::string variant, std::vector<Input> inputs, bool causal,
                      double tol = 2e-5) {
  OpCase c = attention_case_with(std::move(variant), std::move(inputs),
                                 [causal](const In& x) { return attention_options(x, causal); });
  c.tol = tol;
  return c;
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> v;
  // ---- elementwise, with broadcasting ----
  v.push_back({"add",
               "broadcast",
               {real({3, 5, 7}, {64, 256, 512}), real({5, 7}, {256, 512})},
               [](const In& x) { return add(x[0], x[1]); }});
  v.push_back({"mul",
               "broadcast",
               {real({3, 5, 7}, {64, 256, 512}), real({3, 1, 7}, {64, 1, 512})},
               [](const In& x) { return mul(x[0], x[1]); }});
  v.push_back(
      {"tanh", "", {real({5, 13}, {512, 1024}, -3, 3)}, [](const In& x) { return tanh(x[0]); }});
  v.push_back({"relu", "", {real({5, 13}, {512, 1024})}, [](const In& x) { return relu(x[0]); }});
  v.push_back({"sigmoid", "", {real({5, 13}, {512, 1024}, -4, 4)}, [](const In& x) {
                 return sigmoid(x[0]);
               }});
  // ---- positions ----
  v.push_back(
      {"rotary", "from position 3", {real({2, 3, 7, 10}, {8, 8, 128, 64})}, [](const In& x) {
         return rotary(x[0], 3);
       }});
  // ---- reductions ----
  v.push_back({"sum", "dims 0, 2", {real({3, 5, 7}, {64, 256, 512})}, [](const In& x) {
                 return sum(x[0], {0, 2});
               }});
  v.push_back({"mean", "last dim", {real({3, 5, 7}, {64, 256, 512})}, [](const In& x) {
                 return mean(x[0], {-1});
               }});
  v.push_back({"max", "dim 1", {real({3, 5, 7}, {64, 256, 512})}, [](const In& x) {
                 return max(x[0], 1);
               }});
  // ---- products ----
  {
    OpCase c{"matmul",
             "",
             {real({13, 17}, {512, 512}), real({17, 19}, {512, 512})},
             [](const In& x) { return matmul(x[0], x[1]); },
             [](const In& x) { return matmul_reference(x[0], x[1]); }};
    c.tol = 2e-5;
    v.push_back(c);
  }
  {
    OpCase c{"matmul",
             "batched",
             {real({3, 7, 9}, {16, 128, 64}), real({3, 9, 5}, {16, 64, 128})},
             [](const In& x) { return bmm(x[0], x[1]); },
             [](const In& x) { return matmul_reference(x[0], x[1]); }};
    c.tol = 2e-5;
    v.push_back(c);
  }
  {
    OpCase c{"linear",
             "",
             {real({2, 7, 13}, {32, 64, 256}), real({11, 13}, {1024, 256}), real({11}, {1024})},
             [](const In& x) { return linear(x[0], x[1], x[2]); },
             linear_reference};
    c.tol = 2e-5;
    v.push_back(c);
  }
  {
    OpCase c{"linear_relu",
             "",
             {real({2, 7, 13}, {32, 64, 256}), real({11, 13}, {1024, 256}), real({11}, {1024})},
             [](const In& x) { return linear_relu(x[0], x[1], x[2]); },
             [](const In& x) { return relu(linear_reference(x)); }};
    c.tol = 2e-5;
    v.push_back(c);
  }
  // ---- softmax family ----
  v.push_back({"softmax",
               "",
               {real({3, 5, 17}, {64, 64, 1001}, -4, 4)},
               [](const In& x) { return softmax(x[0]); },
               [](const In& x) { return softmax_reference(x[0]); }});
  v.push_back({"log_softmax",
               "",
               {real({3, 5, 17}, {64, 64, 1001}, -4, 4)},
               [](const In& x) { return log_softmax(x[0]); },
               [](const In& x) { return log_softmax_reference(x[0]); }});
  v.push_back({"masked_softmax",
               "lengths per query",
               {real({2, 3, 9}, {64, 64, 257}, -4, 4), integer({2, 3}, 9, {64, 64})},
               [](const In& x) { return masked_softmax_lengths(x[0], x[1]); }});
  // ---- norms, losses, lookups ----
  v.push_back({"layer_norm",
               "",
               {real({3, 5, 33}, {64, 64, 256}), real({33}, {256}), real({33}, {256})},
               [](const In& x) { return layer_norm(x[0], x[1], x[2]); }});
  {
    OpCase c{"dropout_add_layer_norm",
             "eval",
             {real({3, 5, 33}, {64, 64, 256}), real({3, 5, 33}, {64, 64, 256}), real({33}, {256}),
              real({33}, {256})},
             [](const In& x) {
               Generator gen(7);
               return dropout_add_layer_norm(x[0], x[1], 0.1, /*training=*/false, gen, x[2], x[3]);
             }};
    v.push_back(c);
  }
  v.push_back(
      {"cross_entropy",
       "mean, label smoothing 0.1",
       {real({6, 11}, {2048, 8000}, -3, 3), integer({6}, 10, {2048})},
       [](const In& x) { return cross_entropy(x[0], x[1], Tensor(), Reduction::mean, 0.1); }});
  v.push_back({"embedding",
               "",
               {real({13, 7}, {8000, 256}), integer({2, 5}, 12, {64, 64})},
               [](const In& x) { return embedding(x[0], x[1]); }});
  v.push_back({"index_select",
               "dim 1",
               {real({3, 9, 4}, {64, 512, 256}), integer({5}, 8, {256})},
               [](const In& x) { return index_select(x[0], 1, x[1]); }});
  v.push_back({"repeat_interleave", "dim 0", {real({3, 5}, {64, 4096})}, [](const In& x) {
                 return repeat_interleave(x[0], 3, 0);
               }});
  // ---- attention (d2l's DotProductAttention, fused against materialized) ----
  v.push_back(attention_case("3-D, lengths",
                             {real({4, 5, 8}, {32, 128, 64}), real({4, 7, 8}, {32, 128, 64}),
                              real({4, 7, 6}, {32, 128, 64}), integer({4}, 7, {32})},
                             false));
  v.push_back(
      attention_case("4-D, causal",
                     {real({2, 7, 3, 8}, {8, 128, 4, 64}), real({2, 7, 3, 8}, {8, 128, 4, 64}),
                      real({2, 7, 3, 8}, {8, 128, 4, 64})},
                     true));
  v.push_back(
      attention_case("4-D, lengths per query",
                     {real({2, 5, 3, 8}, {8, 64, 4, 64}), real({2, 9, 3, 8}, {8, 256, 4, 64}),
                      real({2, 9, 3, 8}, {8, 256, 4, 64}), integer({2, 5}, 9, {8, 64})},
                     false));
  v.push_back(attention_case_with(
      "decode, 1 query",
      {real({3, 1, 2, 16}, {12, 1, 4, 64}), real({3, 11, 2, 16}, {12, 256, 4, 64}),
       real({3, 11, 2, 16}, {12, 256, 4, 64})},
      [](const In& x) { return attention_options(x, false); }, /*decode=*/true));
  // ---- relative positions and grouped heads (ops/positions.h) ----
  // A learned bias by distance (T5's, ALiBi's form), causal: the bias a real input.
  v.push_back(
      attention_case_with("position bias, causal",
                          {real({2, 7, 3, 8}, {8, 128, 4, 64}), real({2, 7, 3, 8}, {8, 128, 4, 64}),
                           real({2, 7, 3, 8}, {8, 128, 4, 64}), real({3, 13}, {4, 255})},
                          [](const In& x) {
                            AttentionOptions o = attention_options({}, true);
                            o.position_bias = x[3];
                            return o;
                          }));
  // Queries at their own positions among more keys, with lengths; and keys
  // and values of 2 heads for 4 query heads.
  v.push_back(
      attention_case_with("position bias, query_start, grouped heads",
                          {real({2, 3, 4, 8}, {8, 64, 4, 64}), real({2, 9, 2, 8}, {8, 256, 2, 64}),
                           real({2, 9, 2, 6}, {8, 256, 2, 64}), real({4, 17}, {4, 511}),
                           integer({2}, 6, {8}), integer({2}, 9, {8})},
                          [](const In& x) {
                            AttentionOptions o = attention_options({}, false);
                            o.position_bias = x[3];
                            o.query_start = x[4];
                            o.valid_lens = x[5];
                            return o;
                          }));
  v.push_back(attention_case_with(
      "position bias, query_start, grouped heads",
      {real({3, 1, 4, 16}, {12, 1, 8, 64}), real({3, 11, 2, 16}, {12, 256, 2, 64}),
       real({3, 11, 2, 16}, {12, 256, 2, 64}), real({4, 21}, {8, 511}), integer({3}, 10, {12})},
      [](const In& x) {
        AttentionOptions o = attention_options({}, false);
        o.position_bias = x[3];
        o.query_start = x[4];
        // Each row sees its keys up to its own position.
        std::vector<std::int64_t> lens = to_vector<std::int64_t>(x[4]);
        for (auto& l : lens) ++l;
        o.valid_lens = from_vector<std::int64_t>(lens);
        return o;
      },
      /*decode=*/true));
  // Rotary inside the kernels: queries at their own positions, keys turned too.
  v.push_back(
      attention_case_with("rotary queries and keys",
                          {real({2, 5, 3, 8}, {8, 64, 4, 64}), real({2, 9, 3, 8}, {8, 128, 4, 64}),
                           real({2, 9, 3, 6}, {8, 128, 4, 64}), integer({2}, 4, {8})},
                          [](const In& x) {
                            AttentionOptions o = attention_options({}, false);
                            o.rotary_queries = o.rotary_keys = true;
                            o.query_start = x[3];
                            return o;
                          }));
  v.push_back({"rotary_heads",
               "per-row starts",
               {real({2, 5, 3, 6}, {8, 128, 4, 64}), integer({2}, 9, {8})},
               [](const In& x) { return rotary_heads(x[0], x[1]); }});
  // ---- the book's other layers ----
  {
    OpCase c{"conv1d",
             "",
             {real({2, 11, 3}, {16, 256, 64}), real({5, 3, 3}, {64, 64, 3}), real({5}, {64})},
             [](const In& x) { return conv1d(x[0], x[1], x[2]); },
             [](const In& x) { return conv1d_reference(x[0], x[1], x[2]); }};
    c.tol = 2e-5;
    v.push_back(c);
  }
  {
    // Weights as PyTorch starts them, U(-1/sqrt(H), 1/sqrt(H)) (about 0.1 at
    // H = 128): with U(-1, 1) the recurrence is chaotic, and two correct
    // summation orders part after a few steps.
    const double w = 0.1;
    OpCase c{
        "gru",
        "",
        {real({4, 2, 5}, {32, 16, 64}), real({2, 6}, {16, 128}), real({18, 5}, {384, 64}, -w, w),
         real({18, 6}, {384, 128}, -w, w), real({18}, {384}, -w, w), real({18}, {384}, -w, w)},
        [](const In& x) { return gru(x[0], x[1], x[2], x[3], x[4], x[5]); },
        [](const In& x) { return gru_reference(x[0], x[1], x[2], x[3], x[4], x[5]); }};
    c.tol = 2e-5;
    v.push_back(c);
  }
  return v;
}

Shape shape_of(const Input& in, bool perf) {
  return perf && !in.perf_shape.empty() ? in.perf_shape : in.shape;
}

std::string shape_text(const Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0) out += 'x';
    out += std::to_string(s[i]);
  }
  return out.empty() ? "scalar" : out;
}

}  // namespace

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = all_cases();
  return cases;
}

std::string case_name(const OpCase& c) { return c.variant.empty() ? c.op : c.op + "/" + c.variant; }

std::string case_shapes(const OpCase& c, bool perf) {
  std::string out;
  for (const Input& in : c.inputs)
    out += (out.empty() ? "" : ", ") + shape_text(shape_of(in, perf));
  return out;
}

std::vector<Tensor> make_inputs(const OpCase& c, DType dtype, std::uint64_t seed, bool perf) {
  std::vector<Tensor> out;
  Generator gen(seed);
  for (const Input& in : c.inputs) {
    const Shape s = shape_of(in, perf);
    if (in.kind == Input::Kind::real) {
      out.push_back(uniform(in.lo, in.hi, s, gen, DType::f64).to(dtype));
    } else {
      // Integers in [0, hi]: the uniform draw's floor.
      std::vector<double> u = to_vector<double>(uniform(0.0, in.hi + 1.0, s, gen, DType::f64));
      std::vector<std::int64_t> ids(u.size());
      for (std::size_t i = 0; i < u.size(); ++i)
        ids[i] = std::min(static_cast<std::int64_t>(in.hi), static_cast<std::int64_t>(u[i]));
      out.push_back(from_vector<std::int64_t>(ids, s));
    }
  }
  return out;
}

std::string check_against_reference(const OpCase& c, std::uint64_t seed) {
  const std::vector<Tensor> x32 = make_inputs(c, DType::f32, seed, false);
  const Tensor got = c.fn(x32).to(DType::f64);
  const Tensor want =
      c.reference ? c.reference(x32).to(DType::f64) : c.fn(make_inputs(c, DType::f64, seed, false));
  if (got.shape() != want.shape())
    return fmt::format("{}: shape {} against the reference's {}", case_name(c),
                       shape_text(got.shape()), shape_text(want.shape()));
  const std::vector<double> g = to_vector<double>(got), w = to_vector<double>(want);
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double excess = std::abs(g[i] - w[i]) / (1 + std::abs(w[i]));
    if (!(excess <= worst)) worst = excess, at = i;  // NaN counts as the worst
  }
  if (worst <= c.tol) return "";
  return fmt::format(
      "{} at {}: element {}: {} against the reference's {} (error {:.3g} of the "
      "bound's {:.3g} x (1 + |reference|))",
      case_name(c), case_shapes(c, false), at, g[at], w[at], worst, c.tol);
}

std::string check_gradients(const OpCase& c, std::uint64_t seed) {
  if (!c.differentiable) return "";
  std::vector<Tensor> x = make_inputs(c, DType::f64, seed, false);
  for (std::size_t i = 0; i < x.size(); ++i)
    if (c.inputs[i].kind == Input::Kind::real) x[i].requires_grad_();
  autograd::GradcheckOptions o;
  o.atol = c.grad_atol;
  o.rtol = c.grad_rtol;
  const auto r = autograd::gradcheck(c.fn, x, o);
  return r.ok ? "" : case_name(c) + ": " + r.message;
}

Timing time_case(const OpCase& c, int reps) {
  using clock = std::chrono::steady_clock;
  std::vector<Tensor> x = make_inputs(c, DType::f32, 3, true);
  std::vector<double> fwd, bwd;
  for (int r = 0; r <= reps; ++r) {  // run 0 warms up
    for (std::size_t i = 0; i < x.size(); ++i)
      if (c.inputs[i].kind == Input::Kind::real && c.differentiable)
        x[i] = x[i].detach(), x[i].requires_grad_();
    const auto t0 = clock::now();
    Tensor y = c.fn(x);
    const auto t1 = clock::now();
    if (c.differentiable) y.backward(ones_like(y));
    const auto t2 = clock::now();
    if (r == 0) continue;
    fwd.push_back(std::chrono::duration<double>(t1 - t0).count());
    bwd.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  return {median(fwd), c.differentiable ? median(bwd) : 0.0};
}

int run_perf(const std::string& filter, int reps) {
  std::printf("| case | shapes (f32) | forward, us | backward, us |\n|---|---|---:|---:|\n");
  int n = 0;
  for (const OpCase& c : op_cases()) {
    if (case_name(c).find(filter) == std::string::npos) continue;
    const Timing t = time_case(c, reps);
    std::printf("| %s | %s | %.1f | %s |\n", case_name(c).c_str(), case_shapes(c, true).c_str(),
                t.forward_s * 1e6,
                c.differentiable ? fmt::format("{:.1f}", t.backward_s * 1e6).c_str() : "-");
    ++n;
  }
  if (n == 0) {
    std::fprintf(stderr, "ops_cases_test --perf: no case matches '%s'\n", filter.c_str());
    return 1;
  }
  return 0;
}

}  // namespace attn::cases
