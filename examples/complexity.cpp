// d2l 10.6.2 "Comparing CNNs, RNNs, and Self-Attention", measured: one layer
// of each kind mapping n tokens of d dimensions to n tokens, timed over
// growing n and growing d, the exponents fitted on log-log axes and printed
// beside the book's table; sequential operations counted in the autograd
// graph; maximum path lengths found by breadth-first search over each
// layer's dependencies; the memory of the fused attention kernel (O(n))
// against the materialized scores (O(n^2)). The measurements themselves
// are in complexity_measure.cpp.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>

#include "attn/attn.h"
#include "attn/viz/line_plot.h"
#include "complexity.h"
#include "examples.h"

namespace attn::examples {
namespace {

using cnn_rnn_attention::Cost;
using cnn_rnn_attention::Layer;
using cnn_rnn_attention::Plan;
using cnn_rnn_attention::PowerFit;

constexpr Layer kLayers[] = {Layer::cnn, Layer::rnn, Layer::attention_fused,
                             Layer::attention_materialized};
const char* const kColor[] = {"b", "g", "r", "m"};  // per layer, for the plots

struct Sweep {
  std::vector<double> x;
  std::vector<Cost> costs;
  PowerFit forward, train, memory;
};

std::vector<double> column(const Sweep& s, double Cost::*field) {
  std::vector<double> v;
  for (const Cost& c : s.costs) v.push_back(c.*field);
  return v;
}
// MiB (at least one byte, for the log axis).
std::vector<double> memory_column(const Sweep& s) {
  std::vector<double> v;
  for (const Cost& c : s.costs)
    v.push_back(std::max<double>(1.0, static_cast<double>(c.train_bytes)) / (1 << 20));
  return v;
}

Sweep run_sweep(Layer layer, const std::vector<std::int64_t>& sizes, bool sizes_are_n,
                std::int64_t fixed, const Plan& plan) {
  const bool attention = layer == Layer::attention_fused || layer == Layer::attention_materialized;
  const std::int64_t batch = attention     ? plan.attention_batch
                             : sizes_are_n ? plan.batch_for_n
                                           : plan.batch_for_d;
  Sweep s;
  std::vector<std::unique_ptr<cnn_rnn_attention::LayerRun>> runs;
  std::vector<cnn_rnn_attention::LayerRun*> ptrs;
  for (std::int64_t size : sizes) {
    const std::int64_t n = sizes_are_n ? size : fixed, d = sizes_are_n ? fixed : size;
    s.x.push_back(static_cast<double>(size));
    runs.push_back(std::make_unique<cnn_rnn_attention::LayerRun>(layer, batch, n, d, plan.kernel));
    ptrs.push_back(runs.back().get());
  }
  s.costs = cnn_rnn_attention::measure_interleaved(ptrs, plan.repeats);
  s.forward = cnn_rnn_attention::fit_power_law(s.x, column(s, &Cost::forward_s));
  s.train = cnn_rnn_attention::fit_power_law(s.x, column(s, &Cost::train_s));
  s.memory = cnn_rnn_attention::fit_power_law(s.x, memory_column(s));
  return s;
}

std::string label(Layer layer, const Plan& plan) {
  return layer == Layer::cnn ? fmt::format("CNN (k={})", plan.kernel)
                             : std::string(cnn_rnn_attention::layer_name(layer));
}

void print_times(const char* what, const std::vector<std::int64_t>& sizes,
                 const std::map<Layer, Sweep>& sweeps) {
  fmt::print("{:>6} ", what);
  for (const auto& [layer, _] : sweeps)
    fmt::print("| {:^19} ", cnn_rnn_attention::layer_name(layer));
  fmt::print("\n{:>6} ", "");
  for (std::size_t i = 0; i < sweeps.size(); ++i)
    fmt::print("| {:>8} {:>10} ", "fwd ms", "fwd+bwd");
  fmt::print("\n");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    fmt::print("{:>6} ", sizes[i]);
    for (const auto& [layer, s] : sweeps)
      fmt::print("| {:>8.3f} {:>10.3f} ", 1e3 * s.costs[i].forward_s, 1e3 * s.costs[i].train_s);
    fmt::print("\n");
  }
}

// d2l 10.6.2's table.
struct Book {
  const char* cost;
  double n_exponent, d_exponent;
  const char *sequential, *path;
};
const Book& book(Layer layer) {
  static const Book cnn{"O(knd^2)", 1, 2, "O(1)", "O(n/k)"}, rnn{"O(nd^2)", 1, 2, "O(n)", "O(n)"},
      attention{"O(n^2 d)", 2, 1, "O(1)", "O(1)"};
  return layer == Layer::cnn ? cnn : layer == Layer::rnn ? rnn : attention;
}

const char* mark(const Sweep& s, double book_exponent) {
  return std::fabs(s.forward.exponent - book_exponent) <= 0.25 &&
                 std::fabs(s.train.exponent - book_exponent) <= 0.25
             ? "ok"
             : "off";
}

std::string batch_note(const char* axis, std::int64_t batch, const Plan& plan) {
  return fmt::format("{}; batch {} for CNN and RNN, {} for self-attention", axis, batch,
                     plan.attention_batch);
}

// Measured points as markers, the fitted power law as a line of the same colour.
void plot_fits(viz::LinePlot& plot, const std::map<Layer, Sweep>& sweeps, const Plan& plan,
               const char* var, double Book::*book_exponent) {
  for (const auto& [layer, s] : sweeps) {
    const char* color = kColor[static_cast<int>(layer)];
    std::vector<double> fitted;
    for (double x : s.x) fitted.push_back(s.train(x));
    plot.plot(fmt::format("{}: {}^{:.2f} (book {}^{:g})", label(layer, plan), var, s.train.exponent,
                          var, book(layer).*book_exponent),
              s.x, column(s, &Cost::train_s), std::string(color) + "o");
    plot.plot("", s.x, fitted, std::string(color) + "-");
  }
}

}  // namespace

namespace {

using Sweeps = std::map<Layer, Sweep>;
using Counts = std::map<Layer, std::vector<std::int64_t>>;

// What is measured, and how.
void print_intro(const Plan& plan) {
  fmt::print(
      "One layer of each kind maps n tokens of d dimensions to n tokens (d2l 10.6.2):\n"
      "  CNN: nn::Conv1d(d, d, k={}), padding keeps n       RNN: nn::GRU(d, d), one layer\n"
      "  self-attention: softmax(X X^T / sqrt(d)) X, queries = keys = values = X (the book's\n"
      "  analysis, no projections), on the fused kernel and on the materialized d2l path.\n"
      "f32, batch {} over n and {} over d (self-attention {}), {} thread{}; each time the median\n"
      "of {} runs, taken in rounds over all sizes after a warm-up round; memory the most bytes\n"
      "of tensor storage live during forward + backward beyond the inputs and parameters\n"
      "(saved activations, temporaries, gradients).\n\n",
      plan.kernel, plan.batch_for_n, plan.batch_for_d, plan.attention_batch, plan.threads,
      plan.threads == 1 ? "" : "s", plan.repeats);
}

// Time in n and in d, and peak memory in n, as tables.
void print_time_and_memory(const Plan& plan, const Sweeps& in_n, const Sweeps& in_d) {
  fmt::print("Time in n at d = {}:\n", plan.d_for_n);
  print_times("n", plan.n_values, in_n);
  fmt::print("\nTime in d, CNN and RNN at n = {}:\n", plan.n_for_d);
  print_times("d", plan.d_values,
              {{Layer::cnn, in_d.at(Layer::cnn)}, {Layer::rnn, in_d.at(Layer::rnn)}});
  fmt::print("\nTime in d, self-attention at n = {}:\n", plan.attention_n_for_d);
  print_times("d", plan.d_values,
              {{Layer::attention_fused, in_d.at(Layer::attention_fused)},
               {Layer::attention_materialized, in_d.at(Layer::attention_materialized)}});
  fmt::print("\nPeak memory in n (MiB, forward + backward) at d = {}:\n{:>6} ", plan.d_for_n, "n");
  for (Layer layer : kLayers) fmt::print("| {:>28} ", cnn_rnn_attention::layer_name(layer));
  fmt::print("\n");
  for (std::size_t i = 0; i < plan.n_values.size(); ++i) {
    fmt::print("{:>6} ", plan.n_values[i]);
    for (Layer layer : kLayers)
      fmt::print("| {:>28.3f} ",
                 static_cast<double>(in_n.at(layer).costs[i].train_bytes) / (1 << 20));
    fmt::print("\n");
  }
}

// The book's table beside the fitted exponents.
void print_book_table(const Plan& plan, const Sweeps& in_n, const Sweeps& in_d) {
  fmt::print(
      "\nComputational complexity: time ~ c x^p, p fitted by least squares on log-log axes over\n"
      "n = {}..{} at d = {}, and d = {}..{} at n = {} (CNN, RNN) or n = {} (self-attention).\n"
      "'ok': both exponents within 0.25 of the book's.\n",
      plan.n_values.front(), plan.n_values.back(), plan.d_for_n, plan.d_values.front(),
      plan.d_values.back(), plan.n_for_d, plan.attention_n_for_d);
  fmt::print("{:<29} {:<9}|{:^26}|{:^26}| memory\n", "", "book", "time in n: n^p",
             "time in d: d^p");
  fmt::print("{:<29} {:<9}| {:>5} {:>7} {:>5}      | {:>5} {:>7} {:>5}      |    n^p\n", "layer",
             "cost", "fwd", "fwd+bwd", "book", "fwd", "fwd+bwd", "book");
  for (Layer layer : kLayers) {
    const Sweep &sn = in_n.at(layer), &sd = in_d.at(layer);
    const Book& b = book(layer);
    fmt::print(
        "{:<29} {:<9}| {:>5.2f} {:>7.2f} {:>5g} {:<5}| {:>5.2f} {:>7.2f} {:>5g} {:<5}| {:>6.2f}\n",
        label(layer, plan), b.cost, sn.forward.exponent, sn.train.exponent, b.n_exponent,
        mark(sn, b.n_exponent), sd.forward.exponent, sd.train.exponent, b.d_exponent,
        mark(sd, b.d_exponent), sn.memory.exponent);
  }
}

// Sequential operations and maximum path lengths, counted.
void print_structure(const Plan& plan, const Counts& seq, const Counts& path) {
  fmt::print(
      "\nSequential operations: the longest chain of dependent ops in the layer's autograd graph\n"
      "(views free). Maximum path length: the fewest edges from an input position to an output\n"
      "position, for the worst pair, by breadth-first search over a stack of layers (closed\n"
      "form: CNN ceil((n-1)/((k-1)/2)), RNN n, self-attention 1).\n");
  fmt::print("{:<29} {:<5}", "layer", "book");
  for (std::int64_t n : plan.sequential_n_values) fmt::print(" {:>6}", fmt::format("n={}", n));
  fmt::print(" | {:<6} n:", "book");
  for (std::int64_t n : plan.path_n_values) fmt::print(" {:>4}", n);
  fmt::print("\n");
  for (Layer layer : kLayers) {
    fmt::print("{:<29} {:<5}", label(layer, plan), book(layer).sequential);
    for (std::int64_t v : seq.at(layer)) fmt::print(" {:>6}", v);
    fmt::print(" | {:<6}   ", book(layer).path);
    for (std::int64_t v : path.at(layer)) fmt::print(" {:>4}", v);
    fmt::print("\n");
  }
  const std::int64_t n_path = plan.path_n_values.back();
  fmt::print(
      "(The RNN's chain is counted on its step-by-step reference, gru_reference: 8 ops a step.\n"
      "The fused nn::GRU runs the same n dependent steps inside one op: per step one (B, d) x\n"
      "(d, 3d) product and one pass over the gates.)\nCNN at n = {}, other kernels:",
      n_path);
  for (std::int64_t k : plan.path_kernels)
    fmt::print("  k={}: {} (n/k = {:.0f})", k,
               cnn_rnn_attention::max_path_length(Layer::cnn, n_path, k),
               static_cast<double>(n_path) / static_cast<double>(k));
  fmt::print("\n");
}

// "Prohibitively slow for very long sequences": the fits extrapolated.
void print_long_sequences(const Plan& plan, const Sweeps& in_n) {
  {
    const Sweep &f = in_n.at(Layer::attention_fused), &m = in_n.at(Layer::attention_materialized);
    const double n = plan.n_values.back(), n_long = 16 * n;
    const double mib = 1.0 / (1 << 20);  // bytes to MiB (the fits are in MiB already)
    fmt::print(
        "\nAt n = {:g}, forward + backward: fused {:.1f} ms and {:.1f} MiB, materialized {:.1f} ms "
        "and\n{:.1f} MiB. The fused kernel never stores the n x n scores, so its memory grows as "
        "n^{:.2f}\nagainst n^{:.2f}; its time still grows as n^{:.2f}. At n = {:g} the fits "
        "predict fused {:.1f} s\nand {:.0f} MiB, materialized {:.1f} s and {:.0f} MiB: memory "
        "is what the fused kernel saves,\nthe quadratic time remains.\n",
        n, 1e3 * f.costs.back().train_s, f.costs.back().train_bytes * mib,
        1e3 * m.costs.back().train_s, m.costs.back().train_bytes * mib, f.memory.exponent,
        m.memory.exponent, f.train.exponent, n_long, f.train(n_long), f.memory(n_long),
        m.train(n_long), m.memory(n_long));
  }
  fmt::print("\n");
}

// The figures: time in n and in d, path length, memory.
void draw_figures(const Options& o, const Plan& plan, const Sweeps& in_n, const Sweeps& in_d,
                  const Counts& path) {
  // Log-log time against one axis, the measured points with their fitted lines.
  auto time_plot = [&](const std::string& title, const std::string& xlabel, const auto& rows,
                       const char* axis, auto exponent, const char* name) {
    viz::LinePlot plot({.title = title,
                        .xlabel = xlabel,
                        .ylabel = "seconds",
                        .log_x = true,
                        .log_y = true,
                        .legend = viz::LegendLocation::upper_left,
                        .width = 480,
                        .height = 320});
    plot_fits(plot, rows, plan, axis, exponent);
    std::string p = figure_path(o, name);
    plot.save(p);
    fmt::print("time against {} (log-log, fitted lines): {}.png\n", axis, p);
  };
  time_plot(fmt::format("Time of forward + backward against n, d = {}", plan.d_for_n),
            batch_note("n (tokens)", plan.batch_for_n, plan), in_n, "n", &Book::n_exponent,
            "complexity_time_n");
  time_plot(
      "Time of forward + backward against d",
      fmt::format("d; CNN and RNN: n = {}, batch {}; self-attention: n = {}, batch {}",
                  plan.n_for_d, plan.batch_for_d, plan.attention_n_for_d, plan.attention_batch),
      in_d, "d", &Book::d_exponent, "complexity_time_d");
  {
    viz::LinePlot plot({.title = "Maximum path length between two positions",
                        .xlabel = "n (tokens)",
                        .ylabel = "path length (edges)",
                        .log_x = true,
                        .log_y = true,
                        .legend = viz::LegendLocation::upper_left,
                        .width = 480,
                        .height = 320});
    std::vector<double> xs(plan.path_n_values.begin(), plan.path_n_values.end());
    const char* kcolors[] = {"b", "c", "k"};
    for (std::size_t ki = 0; ki < plan.path_kernels.size() && ki < 3; ++ki) {
      const std::int64_t k = plan.path_kernels[ki];
      std::vector<double> bfs, book;
      for (std::int64_t n : plan.path_n_values) {
        bfs.push_back(static_cast<double>(cnn_rnn_attention::max_path_length(Layer::cnn, n, k)));
        book.push_back(static_cast<double>(n) / static_cast<double>(k));
      }
      plot.plot(fmt::format("CNN k={} (book n/k dashed)", k), xs, bfs,
                std::string(kcolors[ki]) + "o-");
      plot.plot("", xs, book, std::string(kcolors[ki]) + "--");
    }
    std::vector<double> rnn, sa;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      rnn.push_back(static_cast<double>(path.at(Layer::rnn)[i]));
      sa.push_back(static_cast<double>(path.at(Layer::attention_fused)[i]));
    }
    plot.plot("RNN (book n)", xs, rnn, "gs-");
    plot.plot("self-attention (book 1)", xs, sa, "r^-");
    std::string p = figure_path(o, "complexity_path_length");
    plot.save(p);
    fmt::print("maximum path length against n: {}.png\n", p);
  }
  {
    viz::LinePlot plot(
        {.title = fmt::format("Peak tensor memory of forward + backward, d = {}", plan.d_for_n),
         .xlabel = batch_note("n (tokens)", plan.batch_for_n, plan),
         .ylabel = "MiB",
         .log_x = true,
         .log_y = true,
         .legend = viz::LegendLocation::upper_left,
         .width = 480,
         .height = 320});
    for (Layer layer : kLayers) {
      const Sweep& s = in_n.at(layer);
      const char* color = kColor[static_cast<int>(layer)];
      std::vector<double> fitted;
      for (double x : s.x) fitted.push_back(s.memory(x));
      plot.plot(fmt::format("{}: n^{:.2f}", label(layer, plan), s.memory.exponent), s.x,
                memory_column(s), std::string(color) + "o");
      plot.plot("", s.x, fitted, std::string(color) + "-");
    }
    std::string p = figure_path(o, "complexity_memory");
    plot.save(p);
    fmt::print("memory against n, fused O(n) and materialized O(n^2) attention: {}.png\n", p);
  }
}

}  // namespace

int complexity_with_plan(const Options& o, const Plan& plan) {
  const auto t_start = std::chrono::steady_clock::now();
  struct ThreadsFor {  // the plan's thread count for the timings, restored after
    int before = get_num_threads();
    explicit ThreadsFor(int n) { set_num_threads(n); }
    ~ThreadsFor() { set_num_threads(before); }
  };
  auto threads = std::make_unique<ThreadsFor>(plan.threads);
  print_intro(plan);

  // ---- time and memory in n, and in d ----
  Sweeps in_n, in_d;
  for (Layer layer : kLayers)
    in_n[layer] = run_sweep(layer, plan.n_values, true, plan.d_for_n, plan);
  for (Layer layer : kLayers) {
    const bool attention =
        layer == Layer::attention_fused || layer == Layer::attention_materialized;
    in_d[layer] = run_sweep(layer, plan.d_values, false,
                            attention ? plan.attention_n_for_d : plan.n_for_d, plan);
  }
  threads.reset();
  print_time_and_memory(plan, in_n, in_d);

  // ---- sequential operations and maximum path length ----
  Counts seq, path;
  for (Layer layer : kLayers) {
    for (std::int64_t n : plan.sequential_n_values)
      seq[layer].push_back(cnn_rnn_attention::sequential_ops(layer, n, 8, plan.kernel));
    for (std::int64_t n : plan.path_n_values)
      path[layer].push_back(cnn_rnn_attention::max_path_length(layer, n, plan.kernel));
  }

  print_book_table(plan, in_n, in_d);
  print_structure(plan, seq, path);
  print_long_sequences(plan, in_n);
  draw_figures(o, plan, in_n, in_d, path);
  fmt::print("\nran in {:.1f} s\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
  return 0;
}

int complexity(const Options& o) { return complexity_with_plan(o, cnn_rnn_attention::Plan{}); }

}  // namespace attn::examples

#ifdef ATTN_EXAMPLE_MAIN
int main(int argc, char** argv) {
  return attn::examples::run_main(argc, argv, attn::examples::complexity);
}
#endif
