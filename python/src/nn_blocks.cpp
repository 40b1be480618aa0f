// attn.nn, continued: positional encoding and the Transformer blocks (d2l
// 10.6-10.7), Nadaraya-Watson (10.2) and the RNN encoder-decoder with
// Bahdanau attention (10.4), with d2l's argument names.
#include <pybind11/stl.h>

#include "attn/nn/bahdanau.h"
#include "attn/nn/nadaraya_watson.h"
#include "attn/nn/positional.h"
#include "attn/nn/transformer.h"
#include "bindings.h"
#include "compute.h"
#include "convert.h"
#include "module_binding.h"

namespace attn::python {
namespace {

py::object maybe(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

void bind_positional(py::module_& nn) {
  ModuleClass<nn::PositionalEncoding> pe(nn, "PositionalEncoding", R"doc(
d2l's sinusoidal encoding: P[i, 2j] = sin(i / 10000^(2j/d)),
P[i, 2j+1] = cos(i / 10000^(2j/d)), computed in float32 as d2l does.
forward(X) = dropout(X + P[:, :T]) for X (B, T, num_hiddens). P is a
constant, not a parameter (not in the state_dict).)doc");
  pe.def(py::init<std::int64_t, double, std::int64_t>(), py::arg("num_hiddens"), py::arg("dropout"),
         py::arg("max_len") = 1000)
      .def(
          "forward",
          [](nn::PositionalEncoding& p, const py::object& X, std::int64_t offset) {
            Tensor x = to_tensor(X, "PositionalEncoding: X");
            return compute([&] { return p.forward(x, offset); });
          },
          py::arg("X"), py::arg("offset") = 0,
          "`offset`: the position of X's first step (0 in d2l; step t when decoding).")
      .def_readonly("P", &nn::PositionalEncoding::P, "(1, max_len, num_hiddens), float32.");
  call_is_forward(pe);
}

void bind_transformer_blocks(py::module_& nn) {
  ModuleClass<nn::PositionWiseFFN> ffn(nn, "PositionWiseFFN",
                                       "dense2(relu(dense1(X))): (B, T, ffn_num_input) -> (B, T, "
                                       "ffn_num_outputs).");
  ffn.def(py::init<std::int64_t, std::int64_t, std::int64_t>(), py::arg("ffn_num_input"),
          py::arg("ffn_num_hiddens"), py::arg("ffn_num_outputs"))
      .def(
          "forward",
          [](nn::PositionWiseFFN& f, const py::object& X) {
            Tensor x = to_tensor(X, "PositionWiseFFN: X");
            return compute([&] { return f.forward(x); });
          },
          py::arg("X"))
      .def_readonly("dense1", &nn::PositionWiseFFN::dense1)
      .def_readonly("dense2", &nn::PositionWiseFFN::dense2);
  call_is_forward(ffn);

  ModuleClass<nn::AddNorm> addnorm(nn, "AddNorm", "LayerNorm(dropout(Y) + X) (post-LN, d2l's).");
  addnorm
      .def(py::init([](const py::object& shape, double dropout) {
             return std::make_shared<nn::AddNorm>(shape_from(shape, "AddNorm"), dropout);
           }),
           py::arg("normalized_shape"), py::arg("dropout"))
      .def(
          "forward",
          [](nn::AddNorm& a, const py::object& X, const py::object& Y) {
            Tensor x = to_tensor(X, "AddNorm: X"), y = to_tensor(Y, "AddNorm: Y");
            return compute([&] { return a.forward(x, y); });
          },
          py::arg("X"), py::arg("Y"));
  call_is_forward(addnorm);

  ModuleClass<nn::EncoderBlock> enc(nn, "EncoderBlock", R"doc(
d2l's Transformer encoder block: Y = AddNorm(X, MultiHeadAttention(X, X, X,
valid_lens)), output AddNorm(Y, PositionWiseFFN(Y)). X (B, T, num_hiddens),
valid_lens (B) or (B, T) or None -> (B, T, num_hiddens).)doc");
  enc.def(py::init([](std::int64_t key_size, std::int64_t query_size, std::int64_t value_size,
                      std::int64_t num_hiddens, const py::object& norm_shape,
                      std::int64_t ffn_num_input, std::int64_t ffn_num_hiddens,
                      std::int64_t num_heads, double dropout, bool use_bias) {
            return std::make_shared<nn::EncoderBlock>(
                key_size, query_size, value_size, num_hiddens,
                shape_from(norm_shape, "EncoderBlock: norm_shape"), ffn_num_input, ffn_num_hiddens,
                num_heads, dropout, use_bias);
          }),
          py::arg("key_size"), py::arg("query_size"), py::arg("value_size"), py::arg("num_hiddens"),
          py::arg("norm_shape"), py::arg("ffn_num_input"), py::arg("ffn_num_hiddens"),
          py::arg("num_heads"), py::arg("dropout"), py::arg("use_bias") = false)
      .def(
          "forward",
          [](nn::EncoderBlock& b, const py::object& X, const py::object& valid_lens) {
            Tensor x = to_tensor(X, "EncoderBlock: X");
            Tensor lens = to_optional_tensor(valid_lens, "EncoderBlock: valid_lens");
            return compute([&] { return b.forward(x, lens); });
          },
          py::arg("X"), py::arg("valid_lens") = py::none())
      .def_readonly("attention", &nn::EncoderBlock::attention)
      .def_readonly("ffn", &nn::EncoderBlock::ffn);
  call_is_forward(enc);

  ModuleClass<nn::DecoderBlock> dec(nn, "DecoderBlock", R"doc(
d2l's Transformer decoder block i, on a whole target sequence X (B, T,
num_hiddens) with the causal mask dec_valid_lens = 1..T (d2l's training
path): masked self-attention, attention over the encoder's outputs (masked
by enc_valid_lens), the FFN, each followed by AddNorm.

forward(X, state) takes d2l's state [enc_outputs, enc_valid_lens,
[None] * num_layers] and returns (output, state) with state[2][i] = X, as
d2l's block does on a whole sequence; a state whose state[2][i] already
holds earlier steps (d2l's one-token-at-a-time prediction) is a ValueError:
attn decodes with its own KV cache (attn.Translator).)doc");
  dec.def(py::init([](std::int64_t key_size, std::int64_t query_size, std::int64_t value_size,
                      std::int64_t num_hiddens, const py::object& norm_shape,
                      std::int64_t ffn_num_input, std::int64_t ffn_num_hiddens,
                      std::int64_t num_heads, double dropout, std::int64_t i) {
            return std::make_shared<nn::DecoderBlock>(
                key_size, query_size, value_size, num_hiddens,
                shape_from(norm_shape, "DecoderBlock: norm_shape"), ffn_num_input, ffn_num_hiddens,
                num_heads, dropout, i);
          }),
          py::arg("key_size"), py::arg("query_size"), py::arg("value_size"), py::arg("num_hiddens"),
          py::arg("norm_shape"), py::arg("ffn_num_input"), py::arg("ffn_num_hiddens"),
          py::arg("num_heads"), py::arg("dropout"), py::arg("i"))
      .def(
          "forward",
          [](nn::DecoderBlock& b, const py::object& X, const py::list& state) {
            ATTN_CHECK(state.size() >= 2, ValueError,
                       "DecoderBlock: state must be [enc_outputs, enc_valid_lens, caches]");
            Tensor x = to_tensor(X, "DecoderBlock: X");
            Tensor enc = to_tensor(state[0], "DecoderBlock: enc_outputs");
            Tensor lens = to_optional_tensor(state[1], "DecoderBlock: enc_valid_lens");
            if (state.size() >= 3) {
              py::list caches = state[2];
              ATTN_CHECK(b.i >= 0 && b.i < static_cast<std::int64_t>(caches.size()), ValueError,
                         "DecoderBlock: block {} has no entry in state[2] ({} entries)", b.i,
                         caches.size());
              ATTN_CHECK(caches[b.i].is_none(), ValueError,
                         "DecoderBlock: state[2][{}] holds earlier steps; the block takes a "
                         "whole sequence (attn.Translator decodes with a KV cache)",
                         b.i);
            }
            Tensor out = compute([&] { return b.forward(x, enc, lens); });
            if (state.size() >= 3) state[2].cast<py::list>()[b.i] = X;
            return py::make_tuple(out, state);
          },
          py::arg("X"), py::arg("state"))
      .def_readonly("i", &nn::DecoderBlock::i)
      .def_readonly("attention1", &nn::DecoderBlock::attention1)
      .def_readonly("attention2", &nn::DecoderBlock::attention2)
      .def_readonly("ffn", &nn::DecoderBlock::ffn);
  call_is_forward(dec);
}

void bind_nadaraya_watson(py::module_& nn) {
  nn.def(
      "nw_average_pooling",
      [](const py::object& y_train, std::int64_t n_queries) {
        Tensor y = to_tensor(y_train, "y_train");
        return compute([&] { return nn::nw_average_pooling(y, n_queries); });
      },
      py::arg("y_train"), py::arg("n_queries"),
      "Average pooling (d2l 10.2): every query predicts mean(y_train); returns (n_queries).");
  nn.def(
      "nw_nonparametric",
      [](const py::object& x_query, const py::object& x_train, const py::object& y_train) {
        Tensor q = to_tensor(x_query, "x_query"), x = to_tensor(x_train, "x_train"),
               y = to_tensor(y_train, "y_train");
        auto r = compute([&] { return nn::nw_nonparametric(q, x, y); });
        return py::make_tuple(r.y_hat, r.attention_weights);
      },
      py::arg("x_query"), py::arg("x_train"), py::arg("y_train"),
      "Nonparametric Nadaraya-Watson with a Gaussian kernel of width 1: f(x) = sum_i softmax_i("
      "-(x - x_i)^2 / 2) y_i. Returns (y_hat (n_queries), attention_weights (n_queries, "
      "n_train)).");
  ModuleClass<nn::NWKernelRegression> nw(nn, "NWKernelRegression", R"doc(
The parametric Nadaraya-Watson model (d2l 10.2): f(x) = sum_i softmax_i(
-((x - x_i) w)^2 / 2) y_i with one learned width w (shape (1,), U[0, 1) at
start, as d2l's torch.rand((1,))).)doc");
  nw.def(py::init<>())
      .def(
          "forward",
          [](nn::NWKernelRegression& m, const py::object& q, const py::object& k,
             const py::object& v) {
            Tensor tq = to_tensor(q, "queries"), tk = to_tensor(k, "keys"),
                   tv = to_tensor(v, "values");
            return compute([&] { return m.forward(tq, tk, tv); });
          },
          py::arg("queries"), py::arg("keys"), py::arg("values"),
          "queries (n), keys (n, m), values (n, m) -> (n)")
      .def_readonly("w", &nn::NWKernelRegression::w)
      .def_property_readonly(
          "attention_weights",
          [](const nn::NWKernelRegression& m) { return maybe(m.attention_weights); },
          "(n, m) of the last forward, detached.");
  call_is_forward(nw);
}

void bind_bahdanau(py::module_& nn) {
  ModuleClass<nn::Seq2SeqEncoder> enc(nn, "Seq2SeqEncoder", R"doc(
d2l's GRU encoder (10.4): X (B, T) ids -> embedding (B, T, embed_size),
time-major through a GRU of num_layers: returns (outputs (T, B,
num_hiddens), state (num_layers, B, num_hiddens)).)doc");
  enc.def(py::init<std::int64_t, std::int64_t, std::int64_t, std::int64_t, double>(),
          py::arg("vocab_size"), py::arg("embed_size"), py::arg("num_hiddens"),
          py::arg("num_layers"), py::arg("dropout") = 0.0)
      .def(
          "forward",
          [](const nn::Seq2SeqEncoder& e, const py::object& X) {
            Tensor x = to_tensor(X, "Seq2SeqEncoder: X");
            auto o = compute([&] { return e.forward(x); });
            return py::make_tuple(o.outputs, o.state);
          },
          py::arg("X"));
  call_is_forward(enc);

  ModuleClass<nn::Seq2SeqAttentionDecoder> dec(nn, "Seq2SeqAttentionDecoder", R"doc(
d2l's GRU decoder with Bahdanau attention (10.4). Per target step t the
query is the last layer's hidden state (B, 1, H); additive attention over
the encoder's outputs (keys = values, masked by enc_valid_lens) gives the
context; [context, embedding(x_t)] goes through the GRU; `dense` maps its
output to the vocabulary.

init_state(enc_outputs, enc_valid_lens) takes the encoder's (outputs, state)
and returns d2l's state [outputs permuted to (B, T, H), state,
enc_valid_lens]; forward(X, state) returns (logits (B, T, vocab_size),
the state with its hidden state after the last step).)doc");
  dec.def(py::init<std::int64_t, std::int64_t, std::int64_t, std::int64_t, double>(),
          py::arg("vocab_size"), py::arg("embed_size"), py::arg("num_hiddens"),
          py::arg("num_layers"), py::arg("dropout") = 0.0)
      .def(
          "init_state",
          [](const nn::Seq2SeqAttentionDecoder& d, const py::tuple& enc_outputs,
             const py::object& enc_valid_lens) {
            ATTN_CHECK(enc_outputs.size() == 2, ValueError,
                       "init_state: enc_outputs must be the encoder's (outputs, state)");
            nn::GRU::Output o{to_tensor(enc_outputs[0], "outputs"),
                              to_tensor(enc_outputs[1], "state")};
            Tensor lens = to_optional_tensor(enc_valid_lens, "enc_valid_lens");
            nn::DecoderState s = compute([&] { return d.init_state(o, lens); });
            return py::make_tuple(s.enc_outputs, s.hidden, maybe(s.enc_valid_lens));
          },
          py::arg("enc_outputs"), py::arg("enc_valid_lens"))
      .def(
          "forward",
          [](nn::Seq2SeqAttentionDecoder& d, const py::object& X, const py::sequence& state) {
            ATTN_CHECK(state.size() == 3, ValueError,
                       "Seq2SeqAttentionDecoder: state must be [enc_outputs, hidden_state, "
                       "enc_valid_lens] (init_state)");
            Tensor x = to_tensor(X, "Seq2SeqAttentionDecoder: X");
            nn::DecoderState s;
            s.enc_outputs = to_tensor(state[0], "enc_outputs");
            Tensor hidden = to_tensor(state[1], "hidden_state");
            s.enc_valid_lens = to_optional_tensor(state[2], "enc_valid_lens");
            Tensor out = compute([&] { return d.forward(x, s, hidden); });
            return py::make_tuple(out, py::make_tuple(state[0], hidden, state[2]));
          },
          py::arg("X"), py::arg("state"))
      .def_property_readonly(
          "attention_weights",
          [](const nn::Seq2SeqAttentionDecoder& d) { return maybe(d.attention_weights); },
          "(B, T, Ts) of the last forward inside attn.nn.keep_attention_weights(), else None.")
      .def_readonly("attention", &nn::Seq2SeqAttentionDecoder::attention)
      .def_readonly("dense", &nn::Seq2SeqAttentionDecoder::dense);
  call_is_forward(dec);
}

}  // namespace

void bind_nn_blocks(py::module_& nn) {
  bind_positional(nn);
  bind_transformer_blocks(nn);
  bind_nadaraya_watson(nn);
  bind_bahdanau(nn);
}

}  // namespace attn::python
