// d2l 10.2 Attention Pooling: Nadaraya–Watson kernel regression.
//
// 50 training points x sorted from rand * 5, y = 2 sin x + x^0.8 + N(0, 0.5);
// 50 test points 0, 0.1, ..., 4.9. Three estimators: average pooling, the
// nonparametric Gaussian kernel, and the kernel with one learned width w
// (trained with leave-one-out keys, SGD lr 0.5, 5 epochs).
#include <fmt/format.h>

#include <algorithm>

#include "attn/attn.h"
#include "attn/nn/nadaraya_watson.h"
#include "attn/optim/optimizer.h"
#include "attn/viz/heatmap.h"
#include "attn/viz/line_plot.h"
#include "examples.h"

namespace attn::examples {
namespace {

Tensor f(const Tensor& x) { return add(mul(sin(x), 2.0), pow(x, 0.8)); }

// d2l's plot_kernel_reg: truth and prediction as lines, training points as circles.
void plot_kernel_reg(const Options& o, const std::string& name, const Tensor& x_test,
                     const Tensor& y_truth, const Tensor& y_hat, const Tensor& x_train,
                     const Tensor& y_train) {
  viz::LinePlot plot({.xlabel = "x", .ylabel = "y", .xmin = 0, .xmax = 5, .ymin = -1, .ymax = 5});
  plot.plot("Truth", x_test, y_truth, "-");
  plot.plot("Pred", x_test, y_hat, "m--");
  plot.scatter("", to_vector<double>(x_train), to_vector<double>(y_train));
  std::string path = figure_path(o, name);
  plot.save(path);
  fmt::print("plot: {}.png\n", path);
}

void heatmap(const Options& o, const std::string& name, const Tensor& weights) {
  std::string path = figure_path(o, name);
  viz::Heatmaps(weights.unsqueeze(0).unsqueeze(0),
                {.xlabel = "Sorted training inputs", .ylabel = "Sorted testing inputs"})
      .save(path);
  fmt::print("heatmap: {}.png\n", path);
}

}  // namespace

int nadaraya_watson(const Options& o) {
  const std::int64_t n_train = 50;
  std::vector<float> xs = to_vector<float>(mul(rand({n_train}), 5.0));
  std::sort(xs.begin(), xs.end());
  Tensor x_train = from_vector(xs);
  Tensor y_train = add(f(x_train), normal(0.0, 0.5, {n_train}));
  Tensor x_test = arange(0.0, 5.0, 0.1, DType::f32);
  Tensor y_truth = f(x_test);
  const std::int64_t n_test = x_test.numel();
  fmt::print("n_train = {}, n_test = {}\n", n_train, n_test);

  // Average pooling: every prediction is the mean of y_train.
  Tensor y_avg = nn::nw_average_pooling(y_train, n_test);
  fmt::print("average pooling predicts {:.4f} everywhere\n", y_avg.at({0}));
  plot_kernel_reg(o, "nw_average_pooling", x_test, y_truth, y_avg, x_train, y_train);

  // Nonparametric attention pooling with a Gaussian kernel.
  auto np = nn::nw_nonparametric(x_test, x_train, y_train);
  plot_kernel_reg(o, "nw_nonparametric", x_test, y_truth, np.y_hat, x_train, y_train);
  heatmap(o, "nw_nonparametric_attention", np.attention_weights);

  // Parametric: keys and values of row i are all training points but the i-th.
  Tensor keys = Tensor::empty({n_train, n_train - 1}),
         values = Tensor::empty({n_train, n_train - 1});
  const float* px = x_train.data<float>();
  const float* py = y_train.data<float>();
  for (std::int64_t i = 0; i < n_train; ++i)
    for (std::int64_t j = 0, k = 0; j < n_train; ++j) {
      if (j == i) continue;
      keys.data<float>()[i * (n_train - 1) + k] = px[j];
      values.data<float>()[i * (n_train - 1) + k] = py[j];
      ++k;
    }
  nn::NWKernelRegression net;
  optim::SGD trainer(net.parameters(), 0.5);
  for (int epoch = 0; epoch < 5; ++epoch) {
    trainer.zero_grad();
    Tensor diff = sub(net.forward(x_train, keys, values), y_train);
    Tensor l = sum(mul(diff, diff));  // MSELoss(reduction='none'), summed
    l.backward();
    trainer.step();
    fmt::print("epoch {}, loss {:.6f}\n", epoch + 1, l.item<double>());
  }
  fmt::print("learned w = {:.4f}\n", net.w.item<double>());
  Tensor test_keys = x_train.unsqueeze(0).expand({n_test, n_train}).contiguous();
  Tensor test_values = y_train.unsqueeze(0).expand({n_test, n_train}).contiguous();
  Tensor y_param = net.forward(x_test, test_keys, test_values).detach();
  plot_kernel_reg(o, "nw_parametric", x_test, y_truth, y_param, x_train, y_train);
  heatmap(o, "nw_parametric_attention", net.attention_weights);
  return 0;
}

}  // namespace attn::examples

#ifdef ATTN_EXAMPLE_MAIN
int main(int argc, char** argv) {
  return attn::examples::run_main(argc, argv, attn::examples::nadaraya_watson);
}
#endif
