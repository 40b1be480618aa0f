// The measurements of `attn demo complexity`: power-law fits, path lengths by
// breadth-first search, graph depths, and the timed layers (complexity.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "attn/attn.h"
#include "attn/autograd/node.h"
#include "attn/core/storage.h"
#include "attn/nn/conv.h"
#include "attn/nn/rnn.h"
#include "attn/ops/attention.h"
#include "attn/ops/rnn.h"
#include "complexity.h"

namespace attn::examples::cnn_rnn_attention {

const char* layer_name(Layer layer) {
  switch (layer) {
    case Layer::cnn: return "CNN";
    case Layer::rnn: return "RNN (GRU)";
    case Layer::attention_fused: return "self-attention, fused";
    case Layer::attention_materialized: return "self-attention, materialized";
  }
  return "?";
}

double PowerFit::operator()(double x) const { return std::exp(log_coeff + exponent * std::log(x)); }

PowerFit fit_power_law(const std::vector<double>& x, const std::vector<double>& y) {
  ATTN_CHECK(x.size() == y.size() && x.size() >= 2, ValueError,
             "fit_power_law: expected two or more (x, y) points, got {} x and {} y", x.size(),
             y.size());
  const double m = static_cast<double>(x.size());
  double sx = 0, sy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    ATTN_CHECK(x[i] > 0 && y[i] > 0 && std::isfinite(x[i]) && std::isfinite(y[i]), ValueError,
               "fit_power_law: point {} is ({}, {}); both must be positive", i, x[i], y[i]);
    sx += std::log(x[i]);
    sy += std::log(y[i]);
  }
  const double mx = sx / m, my = sy / m;
  double sxx = 0, sxy = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double dx = std::log(x[i]) - mx, dy = std::log(y[i]) - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  ATTN_CHECK(sxx > 0, ValueError, "fit_power_law: every x is the same ({})", x[0]);
  PowerFit f;
  f.exponent = sxy / sxx;
  f.log_coeff = my - f.exponent * mx;
  f.r2 = syy > 0 ? sxy * sxy / (sxx * syy) : 1.0;
  return f;
}

Dependencies dependencies(Layer layer, std::int64_t t, std::int64_t n, std::int64_t k) {
  Dependencies d;
  switch (layer) {
    case Layer::cnn: {
      const std::int64_t p = (k - 1) / 2;
      for (std::int64_t j = 0; j < k; ++j)
        if (t + j - p >= 0 && t + j - p < n) d.below.push_back(t + j - p);
      break;
    }
    case Layer::rnn:
      d.below = {t};
      if (t > 0) d.same_layer = {t - 1};
      break;
    case Layer::attention_fused:
    case Layer::attention_materialized:
      for (std::int64_t s = 0; s < n; ++s) d.below.push_back(s);
      break;
  }
  return d;
}

std::int64_t max_path_length(Layer layer, std::int64_t n, std::int64_t k) {
  ATTN_CHECK(n >= 1 && k >= 1, ValueError, "max_path_length: need n >= 1 and k >= 1, got {}, {}", n,
             k);
  // Who reads position s: from the layer above, and from its own layer.
  std::vector<std::vector<std::int64_t>> up(n), along(n);
  for (std::int64_t t = 0; t < n; ++t) {
    Dependencies d = dependencies(layer, t, n, k);
    for (std::int64_t s : d.below) up[s].push_back(t);
    for (std::int64_t s : d.same_layer) along[s].push_back(t);
  }
  // For these layers no shortest path is longer than n edges (a kernel that
  // spreads at least one position a layer needs at most n - 1 layers, the
  // RNN n edges, attention one), so the search stops at distance n: a pair
  // not reached by then is not connected (the RNN's i < j; i != j for k = 1).
  std::int64_t worst = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    std::vector<std::vector<std::int64_t>> dist;  // dist[l][t], -1 unseen
    std::vector<std::int64_t> best(n, -1);  // shortest to (l >= 1, i)
    std::int64_t found = 0;
    std::deque<std::pair<std::int64_t, std::int64_t>> queue;  // (layer, position)
    auto visit = [&](std::int64_t l, std::int64_t t, std::int64_t dd) {
      while (static_cast<std::int64_t>(dist.size()) <= l) dist.emplace_back(n, -1);
      if (dist[l][t] >= 0) return;
      dist[l][t] = dd;
      if (l >= 1 && best[t] < 0) {
        best[t] = dd;
        ++found;
      }
      queue.emplace_back(l, t);
    };
    visit(0, j, 0);
    while (!queue.empty() && found < n) {
      auto [l, s] = queue.front();
      queue.pop_front();
      const std::int64_t dd = dist[l][s] + 1;
      if (dd > n) break;
      for (std::int64_t t : up[s]) visit(l + 1, t, dd);
      if (l >= 1)
        for (std::int64_t t : along[s]) visit(l, t, dd);
    }
    for (std::int64_t b : best) worst = std::max(worst, b);
  }
  return worst;
}

std::int64_t max_path_length_formula(Layer layer, std::int64_t n, std::int64_t k) {
  switch (layer) {
    case Layer::cnn: {
      ATTN_CHECK(k >= 3 && k % 2 == 1, ValueError,
                 "max_path_length_formula: the closed form is for odd k >= 3, got {}", k);
      const std::int64_t p = (k - 1) / 2;
      return std::max<std::int64_t>(1, (n - 1 + p - 1) / p);
    }
    case Layer::rnn: return n;
    default: return 1;
  }
}

namespace {

bool is_view(std::string_view name) {
  static const std::set<std::string_view> views = {"reshape", "view",   "permute", "transpose",
                                                   "slice",   "narrow", "select",  "unsqueeze",
                                                   "squeeze", "expand", "flatten"};
  return views.count(name) != 0;
}

}  // namespace

std::int64_t graph_depth(const Tensor& out) {
  std::unordered_map<const autograd::Node*, std::int64_t> memo;
  // Iterative post-order: graphs of long sequences are deeper than the stack.
  std::vector<const autograd::Node*> stack;
  auto node_of = [](const Tensor& t) -> const autograd::Node* {
    return t.defined() ? t.impl().grad_fn.get() : nullptr;
  };
  const autograd::Node* root = node_of(out);
  if (root == nullptr) return 0;
  stack.push_back(root);
  while (!stack.empty()) {
    const autograd::Node* node = stack.back();
    if (memo.count(node) != 0) {
      stack.pop_back();
      continue;
    }
    bool ready = true;
    std::int64_t deepest = 0;
    for (const Tensor& in : node->inputs) {
      const autograd::Node* child = node_of(in);
      if (child == nullptr) continue;
      auto it = memo.find(child);
      if (it == memo.end()) {
        stack.push_back(child);
        ready = false;
      } else {
        deepest = std::max(deepest, it->second);
      }
    }
    if (!ready) continue;
    memo[node] = deepest + (is_view(node->name) ? 0 : 1);
    stack.pop_back();
  }
  return memo[root];
}

namespace {

// One layer, built once, run on its input as many times as wanted.
struct Runner {
  std::vector<Tensor> leaves;  // input first, then the parameters
  std::function<Tensor()> forward;
  std::shared_ptr<nn::Module> module;
};

Runner make_runner(Layer layer, std::int64_t B, std::int64_t n, std::int64_t d, std::int64_t k,
                   bool reference_rnn = false) {
  Runner r;
  Generator gen(1234);
  switch (layer) {
    case Layer::cnn: {
      auto conv = std::make_shared<nn::Conv1d>(d, d, k);
      Tensor X = uniform(-1.0, 1.0, {B, n, d}, gen);
      r.module = conv;
      r.leaves = {X, conv->weight, conv->bias};
      r.forward = [conv, X] { return conv->forward(X); };
      break;
    }
    case Layer::rnn: {
      auto gru = std::make_shared<nn::GRU>(d, d);
      Tensor X = uniform(-1.0, 1.0, {n, B, d}, gen);  // time-major, as nn.GRU
      r.module = gru;
      r.leaves = {X};
      for (const Tensor& p : gru->parameters()) r.leaves.push_back(p);
      if (reference_rnn) {
        const auto& w = gru->layers[0];
        Tensor h0 = zeros({B, d});
        r.forward = [X, w, h0] { return gru_reference(X, h0, w[0], w[1], w[2], w[3]); };
      } else {
        r.forward = [gru, X] { return gru->forward(X).outputs; };
      }
      break;
    }
    case Layer::attention_fused:
    case Layer::attention_materialized: {
      Tensor X = uniform(-1.0, 1.0, {B, n, d}, gen);
      r.leaves = {X};
      if (layer == Layer::attention_fused)
        r.forward = [X] { return scaled_dot_product_attention(X, X, X); };
      else
        r.forward = [X] { return scaled_dot_product_attention_materialized(X, X, X).output; };
      break;
    }
  }
  return r;
}

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double median(std::vector<double> v) {
  ATTN_CHECK(!v.empty(), ValueError, "median: no values");
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::int64_t sequential_ops(Layer layer, std::int64_t n, std::int64_t d, std::int64_t k) {
  Runner r = make_runner(layer, 1, n, d, k, /*reference_rnn=*/true);
  for (const Tensor& t : r.leaves) t.requires_grad_();
  return graph_depth(r.forward());
}

struct LayerRun::State {
  Runner runner;
  Tensor grad_output;
};

LayerRun::LayerRun(Layer layer, std::int64_t B, std::int64_t n, std::int64_t d, std::int64_t k)
    : state_(std::make_unique<State>()) {
  state_->runner = make_runner(layer, B, n, d, k);
  autograd::NoGradGuard no_grad;
  Generator gen(99);
  state_->grad_output = uniform(-1.0, 1.0, state_->runner.forward().shape(), gen);
}

LayerRun::~LayerRun() = default;

double LayerRun::forward_seconds() {
  autograd::NoGradGuard no_grad;
  return seconds([&] { state_->runner.forward(); });
}

double LayerRun::train_seconds(std::size_t* peak_bytes) {
  Runner& r = state_->runner;
  for (const Tensor& t : r.leaves) {
    t.requires_grad_();
    t.zero_grad();
  }
  const std::size_t before = storage_stats().live_bytes;
  reset_storage_peak();
  const double s = seconds([&] { r.forward().backward(state_->grad_output); });
  if (peak_bytes != nullptr) *peak_bytes = storage_stats().peak_bytes - before;
  for (const Tensor& t : r.leaves) t.zero_grad();
  return s;
}

std::vector<Cost> measure_interleaved(const std::vector<LayerRun*>& runs, int repeats) {
  ATTN_CHECK(repeats >= 1, ValueError, "measure: repeats must be >= 1, got {}", repeats);
  std::vector<Cost> costs(runs.size());
  std::vector<std::vector<double>> fwd(runs.size()), train(runs.size());
  for (int round = 0; round <= repeats; ++round) {  // round 0 warms up
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const double f = runs[i]->forward_seconds();
      std::size_t bytes = 0;
      const double t = runs[i]->train_seconds(&bytes);
      costs[i].train_bytes = std::max(costs[i].train_bytes, bytes);
      if (round == 0) continue;
      fwd[i].push_back(f);
      train[i].push_back(t);
    }
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    costs[i].forward_s = median(fwd[i]);
    costs[i].train_s = median(train[i]);
  }
  return costs;
}

Cost measure(Layer layer, std::int64_t B, std::int64_t n, std::int64_t d, std::int64_t k,
             int repeats) {
  LayerRun run(layer, B, n, d, k);
  return measure_interleaved({&run}, repeats)[0];
}

}  // namespace attn::examples::cnn_rnn_attention
