// attn demo <section> — short guided tours that print what the library does.
//
// This file holds the `demo` group and its first section, `core`. The
// chapter's sections (cues, nadaraya-watson, scoring, ...) register under the
// parent "demo" from cmd_demo_chapter.cpp, one loop over their table:
//   const attn::cli::Registration reg{"demo", "", 20, setup_every_section};
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "attn/attn.h"
#include "commands.h"

namespace attn::cli {
namespace {

void heading(const std::string& title) { fmt::print("\n== {} ==\n", title); }

// Prints "name:" and the tensor below it, indented like PyTorch's REPL output.
void show(const std::string& name, const Tensor& t) { fmt::print("{}\n{}\n", name, t.str()); }

// Prints the comparison and throws when autograd disagrees with the closed form.
void check_gradient(const std::string& what, const Tensor& autograd_grad, const Tensor& closed) {
  double diff = max_abs_diff(autograd_grad, closed);
  bool ok = diff <= 1e-5;
  fmt::print("{}: {} (max |autograd - closed form| = {:.2g})\n", what, ok ? "matches" : "DIFFERS",
             diff);
  ATTN_CHECK(ok, InternalError, "demo core: the gradient of {} differs from its closed form by {}",
             what, diff);
}

void tour_tensors() {
  heading("1. Tensors");
  Tensor x = arange(12, DType::f32);
  show("x = arange(12, f32)", x);
  fmt::print("x.shape = {}, numel = {}, dtype = {}\n", shape_str(x.shape()), x.numel(),
             dtype_name(x.dtype()));
  show("x.reshape({3, 4})", x.reshape({3, 4}));
  show("zeros({2, 3})", zeros({2, 3}));
  show("randn({2, 4})  (Philox, seeded by --seed)", randn({2, 4}));
  show("tensor({2, 1, 4, 3}) * 2 + 1", tensor({2, 1, 4, 3}) * 2.0 + 1.0);
  show("exp(tensor({0, 1, 2}))", exp(tensor({0, 1, 2})));
}

void tour_broadcasting() {
  heading("2. Broadcasting");
  Tensor a = arange(3, DType::f32).reshape({3, 1});
  Tensor b = arange(2, DType::f32).reshape({1, 2});
  show("a = arange(3, f32).reshape({3, 1})", a);
  show("b = arange(2, f32).reshape({1, 2})", b);
  show("a + b  (shapes [3, 1] and [1, 2] broadcast to [3, 2])", a + b);
}

void tour_views() {
  heading("3. Views share storage");
  Tensor y = arange(24, DType::f32).reshape({2, 3, 4});
  Tensor z = y.permute({2, 0, 1});
  fmt::print("y = arange(24, f32).reshape({{2, 3, 4}}): strides {}\n", shape_str(y.strides()));
  fmt::print("z = y.permute({{2, 0, 1}}): shape {}, strides {}, contiguous: {}, same storage: {}\n",
             shape_str(z.shape()), shape_str(z.strides()), z.is_contiguous() ? "yes" : "no",
             z.storage() == y.storage() ? "yes" : "no");
  fill_(z.select(0, 0), -1.0);  // z[0] is y[:, :, 0]
  show("after fill_(z.select(0, 0), -1), y is", y);
  // reshape is a view when the merged dims are contiguous among themselves, else a copy.
  fmt::print("reshape gives a view when the strides allow it, else a copy:\n");
  Tensor merged = z.reshape({4, 6});
  Tensor flat = z.reshape({24});
  fmt::print("  z.reshape({{4, 6}}): strides {}, same storage: {}\n", shape_str(merged.strides()),
             merged.storage() == y.storage() ? "yes" : "no");
  fmt::print("  z.reshape({{24}}):   strides {}, same storage: {}\n", shape_str(flat.strides()),
             flat.storage() == y.storage() ? "yes" : "no");
  show("z.reshape({4, 6})", merged);
}

void tour_autograd() {
  heading("4. Automatic differentiation");
  Tensor x = arange(4, DType::f32);
  x.requires_grad_();
  Tensor y = 2.0 * sum(x * x);  // d2l 2.5: y = 2 x^T x
  show("x = arange(4, f32).requires_grad_()", x);
  show("y = 2 * sum(x * x)", y);
  y.backward();
  show("after y.backward(), x.grad", x.grad());
  check_gradient("dy/dx vs 4x", x.grad(), 4.0 * x.detach());

  x.zero_grad();
  Tensor z = sum(x * exp(-x));
  z.backward();
  show("z = sum(x * exp(-x)); after z.backward(), x.grad", x.grad());
  Tensor xd = x.detach();
  check_gradient("dz/dx vs (1 - x) exp(-x)", x.grad(), (1.0 - xd) * exp(-xd));
}

// d2l 3.4, "Linear Regression Implementation from Scratch", with one feature.
void tour_linear_regression() {
  heading("5. Linear regression from scratch");
  const std::int64_t n = 1000, batch_size = 10, num_epochs = 3;
  const double lr = 0.03, true_w = 2.0, true_b = -3.4;
  Tensor x = randn({n});
  Tensor y = true_w * x + true_b + normal(0.0, 0.01, {n});
  fmt::print("data: {} examples of y = {} x - {} + noise, x ~ N(0, 1), noise ~ N(0, 0.01^2)\n", n,
             true_w, -true_b);
  fmt::print("model: y_hat = w x + b, w ~ N(0, 0.01^2), b = 0; loss mean((y_hat - y)^2) / 2\n");
  fmt::print("training: minibatch SGD, batch size {}, lr {}, {} epochs\n", batch_size, lr,
             num_epochs);

  Tensor w = normal(0.0, 0.01, {1});
  Tensor b = zeros({1});
  w.requires_grad_();
  b.requires_grad_();
  auto loss_fn = [&](const Tensor& xs, const Tensor& ys) {
    Tensor err = w * xs + b - ys;
    return mean(err * err) / 2.0;
  };
  // The examples are i.i.d., so consecutive slices serve as random minibatches.
  for (std::int64_t epoch = 1; epoch <= num_epochs; ++epoch) {
    for (std::int64_t start = 0; start < n; start += batch_size) {
      std::int64_t len = std::min(batch_size, n - start);
      Tensor loss = loss_fn(x.narrow(0, start, len), y.narrow(0, start, len));
      loss.backward();
      autograd::NoGradGuard no_grad;
      for (const Tensor& p : {w, b}) {
        copy_(p, p - lr * p.grad());
        p.zero_grad();
      }
    }
    autograd::NoGradGuard no_grad;
    fmt::print("epoch {}, loss {:.6f}\n", epoch, loss_fn(x, y).item<double>());
  }
  double w_hat = w.item<double>(), b_hat = b.item<double>();
  fmt::print("learned w = {:.4f} (true {}, error {:.1e})\n", w_hat, true_w,
             std::fabs(w_hat - true_w));
  fmt::print("learned b = {:.4f} (true {}, error {:.1e})\n", b_hat, true_b,
             std::fabs(b_hat - true_b));
}

int run_core(const Context& ctx) {
  fmt::print("attn demo core: a tour of the tensor and autograd core (d2l chapter 2 and 3.4)\n");
  fmt::print("threads: {}, seed: {}\n", get_num_threads(), ctx.global.seed);
  tour_tensors();
  tour_broadcasting();
  tour_views();
  tour_autograd();
  tour_linear_regression();
  return 0;
}

void setup_demo(CLI::App& parent, Context& ctx) {
  CLI::App* demo =
      parent.add_subcommand("demo", "Short guided tours of the library; pick a section");
  add_registered(*demo, "demo", ctx);
}

void setup_demo_core(CLI::App& parent, Context& ctx) {
  CLI::App* sub = parent.add_subcommand(
      "core", "Tensors, broadcasting, views, autograd and a linear regression trained by SGD");
  set_action(sub, ctx, run_core);
}

const Registration demo_registration{"", "demo", 50, setup_demo};
const Registration demo_core_registration{"demo", "core", 0, setup_demo_core};

}  // namespace
}  // namespace attn::cli
