// attn.nn: the module base, layers and the attention modules of d2l 10.3 and
// 10.5, with d2l's argument names and their headers' contracts as docstrings
// (attn/nn/module.h, layers.h, attention.h); attn.optim.
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>

#include "attn/nn/attention.h"
#include "attn/nn/layers.h"
#include "attn/optim/optimizer.h"
#include "bindings.h"
#include "compute.h"
#include "convert.h"
#include "module_binding.h"

namespace attn::python {
namespace {

py::dict state_dict(const nn::Module& m) {
  py::dict d;
  for (const auto& [name, t] : m.named_parameters()) d[py::str(name)] = to_numpy(t);
  return d;
}

void load_state_dict(nn::Module& m, const py::dict& state, bool strict) {
  std::map<std::string, Tensor> tensors;
  for (const auto& [key, value] : state) {
    const std::string name = py::str(key);
    tensors[name] = to_tensor(value, ("load_state_dict: " + name).c_str());
  }
  compute([&] { m.load_state_dict(tensors, strict); });
}

// attn.nn.keep_attention_weights(): a context manager around KeepAttentionWeights.
class KeepWeights {
 public:
  KeepWeights() = default;
  KeepWeights(const KeepWeights&) = delete;
  KeepWeights& operator=(const KeepWeights&) = delete;
  void enter() { guards_.push_back(std::make_unique<nn::KeepAttentionWeights>()); }
  void exit() {
    if (!guards_.empty()) guards_.pop_back();
  }

 private:
  std::vector<std::unique_ptr<nn::KeepAttentionWeights>> guards_;
};

py::object maybe(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

constexpr const char* kLayoutDoc = R"doc(
Layout is batch-first: queries (B, Q, query_size), keys (B, K, key_size),
values (B, K, value_size). valid_lens follows d2l: None (no mask), (B) —
every query of element b sees the first valid_lens[b] keys — or (B, Q);
masked scores are set to -1e6 before the softmax, so a row of valid length
0 is uniform (1/K), never NaN (see attn.ops.masked_softmax).)doc";

void bind_layers(py::module_& nn) {
  ModuleClass<nn::Linear> lin(nn, "Linear",
                              "y = x W^T + b: x (..., in_features) -> (..., out_features). "
                              "Parameters 'weight' (out, in) and 'bias' (out), initialized as "
                              "PyTorch does, U(-1/sqrt(in), 1/sqrt(in)).");
  lin.def(py::init<std::int64_t, std::int64_t, bool>(), py::arg("in_features"),
          py::arg("out_features"), py::arg("bias") = true)
      .def(
          "forward",
          [](const nn::Linear& l, const py::object& x) {
            Tensor t = to_tensor(x, "Linear: x");
            return compute([&] { return l.forward(t); });
          },
          py::arg("x"))
      .def_readonly("weight", &nn::Linear::weight)
      .def_property_readonly("bias", [](const nn::Linear& l) { return maybe(l.bias); })
      .def_readonly("in_features", &nn::Linear::in_features)
      .def_readonly("out_features", &nn::Linear::out_features);
  call_is_forward(lin);

  ModuleClass<nn::Dropout> drop(nn, "Dropout",
                                "Zeroes each element with probability p in training mode and "
                                "scales the rest by 1/(1-p); the identity in eval mode.");
  drop.def(py::init<double>(), py::arg("p"))
      .def(
          "forward",
          [](const nn::Dropout& d, const py::object& x) {
            Tensor t = to_tensor(x, "Dropout: x");
            return compute([&] { return d.forward(t); });
          },
          py::arg("x"))
      .def_readonly("p", &nn::Dropout::p);
  call_is_forward(drop);

  ModuleClass<nn::LayerNorm> ln(nn, "LayerNorm",
                                "PyTorch's nn.LayerNorm(normalized_shape): normalizes over the "
                                "trailing dims (biased variance, eps 1e-5), then 'weight' and "
                                "'bias'.");
  ln.def(py::init([](const py::object& shape, double eps) {
           return std::make_shared<nn::LayerNorm>(shape_from(shape, "LayerNorm"), eps);
         }),
         py::arg("normalized_shape"), py::arg("eps") = 1e-5)
      .def(
          "forward",
          [](const nn::LayerNorm& l, const py::object& x) {
            Tensor t = to_tensor(x, "LayerNorm: x");
            return compute([&] { return l.forward(t); });
          },
          py::arg("x"))
      .def_readonly("weight", &nn::LayerNorm::weight)
      .def_readonly("bias", &nn::LayerNorm::bias);
  call_is_forward(ln);
}

void bind_attention(py::module_& nn) {
  py::class_<KeepWeights>(nn, "keep_attention_weights", R"doc(
While the block runs, DotProductAttention and the modules built on it (this
thread) take d2l's materialized path and record .attention_weights after
every forward; outside it they run the fused kernel, which never stores the
(Q x K) weights. Both paths give the same outputs and gradients.)doc")
      .def(py::init<>())
      .def("__enter__",
           [](KeepWeights& k) {
             k.enter();
             return &k;
           })
      .def("__exit__", [](KeepWeights& k, const py::object&, const py::object&, const py::object&) {
        k.exit();
      });

  ModuleClass<nn::AdditiveAttention> add(
      nn, "AdditiveAttention",
      (std::string("Additive (Bahdanau) attention: score(q, k) = w_v^T tanh(W_q q + W_k k). "
                   "Parameters W_q.weight (num_hiddens, query_size), W_k.weight (num_hiddens, "
                   "key_size), w_v.weight (1, num_hiddens), no biases.\n") +
       kLayoutDoc)
          .c_str());
  add.def(py::init<std::int64_t, std::int64_t, std::int64_t, double>(), py::arg("key_size"),
          py::arg("query_size"), py::arg("num_hiddens"), py::arg("dropout"))
      .def(
          "forward",
          [](nn::AdditiveAttention& a, const py::object& q, const py::object& k,
             const py::object& v, const py::object& valid_lens) {
            Tensor tq = to_tensor(q, "queries"), tk = to_tensor(k, "keys"),
                   tv = to_tensor(v, "values");
            Tensor lens = to_optional_tensor(valid_lens, "valid_lens");
            return compute([&] { return a.forward(tq, tk, tv, lens); });
          },
          py::arg("queries"), py::arg("keys"), py::arg("values"),
          py::arg("valid_lens") = py::none(), "-> (B, Q, value_size)")
      .def_property_readonly(
          "attention_weights",
          [](const nn::AdditiveAttention& a) { return maybe(a.attention_weights); },
          "(B, Q, K) of the last forward, before dropout, detached.")
      .def_readonly("W_q", &nn::AdditiveAttention::W_q)
      .def_readonly("W_k", &nn::AdditiveAttention::W_k)
      .def_readonly("w_v", &nn::AdditiveAttention::w_v);
  call_is_forward(add);

  ModuleClass<nn::DotProductAttention> dot(
      nn, "DotProductAttention",
      (std::string("Scaled dot-product attention: softmax(Q K^T / sqrt(d)) V, queries (B, Q, d), "
                   "keys (B, K, d), values (B, K, v) -> (B, Q, v). Runs the fused kernel "
                   "(attn.ops.scaled_dot_product_attention); .attention_weights is recorded "
                   "inside attn.nn.keep_attention_weights().\n") +
       kLayoutDoc)
          .c_str());
  dot.def(py::init<double>(), py::arg("dropout"))
      .def(
          "forward",
          [](nn::DotProductAttention& a, const py::object& q, const py::object& k,
             const py::object& v, const py::object& valid_lens, bool causal) {
            Tensor tq = to_tensor(q, "queries"), tk = to_tensor(k, "keys"),
                   tv = to_tensor(v, "values");
            Tensor lens = to_optional_tensor(valid_lens, "valid_lens");
            return compute([&] { return a.forward(tq, tk, tv, lens, causal); });
          },
          py::arg("queries"), py::arg("keys"), py::arg("values"),
          py::arg("valid_lens") = py::none(), py::arg("causal") = false,
          "`causal`: query q also sees only keys k < q + 1 + (K - Q) (d2l's dec_valid_lens).")
      .def_property_readonly(
          "attention_weights",
          [](const nn::DotProductAttention& a) { return maybe(a.attention_weights); },
          "(B, Q, K) of the last forward inside keep_attention_weights(), else None.");
  call_is_forward(dot);

  ModuleClass<nn::MultiHeadAttention> mha(nn, "MultiHeadAttention", R"doc(
Multi-head attention (d2l 10.5): queries, keys and values projected by W_q,
W_k, W_v to num_hiddens, split into num_heads heads, attended all at once
with valid_lens repeated per head, concatenated and projected by W_o.
Output (B, Q, num_hiddens). Parameter names are those of d2l's PyTorch
module (W_q.weight, W_k.weight, W_v.weight, W_o.weight; with bias=True also
their .bias), so its state_dict loads from and into d2l's in one line.
ValueError when num_hiddens is not divisible by num_heads.)doc");
  mha.def(py::init<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, double,
                   bool>(),
          py::arg("key_size"), py::arg("query_size"), py::arg("value_size"), py::arg("num_hiddens"),
          py::arg("num_heads"), py::arg("dropout"), py::arg("bias") = false)
      .def(
          "forward",
          [](nn::MultiHeadAttention& a, const py::object& q, const py::object& k,
             const py::object& v, const py::object& valid_lens, bool causal) {
            Tensor tq = to_tensor(q, "queries"), tk = to_tensor(k, "keys"),
                   tv = to_tensor(v, "values");
            Tensor lens = to_optional_tensor(valid_lens, "valid_lens");
            return compute([&] { return a.forward(tq, tk, tv, lens, causal); });
          },
          py::arg("queries"), py::arg("keys"), py::arg("values"),
          py::arg("valid_lens") = py::none(), py::arg("causal") = false)
      .def_property_readonly(
          "attention_weights",
          [](const nn::MultiHeadAttention& a) { return maybe(a.attention_weights()); },
          "(B * num_heads, Q, K) of the last forward inside keep_attention_weights(), else None.")
      .def_readonly("num_hiddens", &nn::MultiHeadAttention::num_hiddens)
      .def_readonly("num_heads", &nn::MultiHeadAttention::num_heads)
      .def_readonly("attention", &nn::MultiHeadAttention::attention)
      .def_readonly("W_q", &nn::MultiHeadAttention::W_q)
      .def_readonly("W_k", &nn::MultiHeadAttention::W_k)
      .def_readonly("W_v", &nn::MultiHeadAttention::W_v)
      .def_readonly("W_o", &nn::MultiHeadAttention::W_o);
  call_is_forward(mha);
}

}  // namespace

void bind_module_base(py::module_& nn) {
  py::class_<nn::Module, std::shared_ptr<nn::Module>>(nn, "Module", R"doc(
The base of every layer: named parameters and children under the names of
d2l's PyTorch state_dict, train/eval mode.)doc")
      .def("state_dict", &state_dict,
           "{name: array}: every parameter as a NumPy array sharing its memory, under d2l's "
           "PyTorch names, in registration order.")
      .def("load_state_dict", &load_state_dict, py::arg("state_dict"), py::arg("strict") = true,
           "Copies each array (or tensor, or CPU torch.Tensor) into the parameter of that name. "
           "With strict, a missing or unexpected key is a ValueError; a shape mismatch always is. "
           "Dtypes are converted.")
      .def("parameters", &nn::Module::parameters, "The parameters (the tensors, not copies).")
      .def("named_parameters", &nn::Module::named_parameters)
      .def("num_parameters", &nn::Module::num_parameters)
      .def(
          "train",
          [](const py::object& self, bool mode) {
            self.cast<nn::Module&>().train(mode);
            return self;
          },
          py::arg("mode") = true,
          "Training mode (dropout active) for this module and its children.")
      .def(
          "eval",
          [](const py::object& self) {
            self.cast<nn::Module&>().eval();
            return self;
          },
          "Evaluation mode (dropout off).")
      .def_property_readonly("training", &nn::Module::is_training)
      .def("zero_grad", &nn::Module::zero_grad, "Drops every parameter's gradient.");
}

void bind_nn(py::module_& nn) {
  bind_module_base(nn);
  bind_layers(nn);
  bind_attention(nn);
}

void bind_optim(py::module_& optim) {
  py::class_<optim::Optimizer, std::shared_ptr<optim::Optimizer>>(optim, "Optimizer")
      .def("step", [](optim::Optimizer& o) { compute([&] { o.step(); }); })
      .def("zero_grad", &optim::Optimizer::zero_grad)
      .def_property("lr", &optim::Optimizer::lr, &optim::Optimizer::set_lr);
  py::class_<optim::SGD, optim::Optimizer, std::shared_ptr<optim::SGD>>(optim, "SGD",
                                                                        "p -= lr * p.grad")
      .def(py::init<std::vector<Tensor>, double>(), py::arg("params"), py::arg("lr"));
  py::class_<optim::Adam, optim::Optimizer, std::shared_ptr<optim::Adam>>(
      optim, "Adam", "torch.optim.Adam without weight decay.")
      .def(py::init<std::vector<Tensor>, double, double, double, double>(), py::arg("params"),
           py::arg("lr"), py::arg("beta1") = 0.9, py::arg("beta2") = 0.999, py::arg("eps") = 1e-8);
}

}  // namespace attn::python
