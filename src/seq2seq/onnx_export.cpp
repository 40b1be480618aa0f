#include "attn/seq2seq/onnx_export.h"

#include <fmt/ranges.h>

#include <cmath>
#include <vector>

#include "attn/core/error.h"
#include "attn/io/atomic_file.h"
#include "attn/ops/positions.h"
#include "seq2seq/onnx_graph.h"

namespace attn::seq2seq {

namespace {

using namespace onnx_graph;

// The Transformer's pieces as ONNX nodes; `name` is the module's state_dict prefix.
class TransformerGraph {
 public:
  TransformerGraph(Builder& b, const nn::TransformerConfig& c)
      : b_(b),
        num_hiddens_(c.num_hiddens),
        num_heads_(c.num_heads),
        head_dim_(c.num_hiddens / c.num_heads) {}

  // Rotary positions: `table` (max_len, head_dim), row t the pairs
  // (cos t theta_i, sin t theta_i), as attn's kernels round them.
  void set_rotary(const std::string& table) { rotary_ = table; }
  bool rotary() const { return !rotary_.empty(); }

  // Heads x (B, heads, T, head_dim) at positions start.. (start and T 1-D
  // int64 tensors of one element), each pair (x[2i], x[2i + 1]) turned by
  // position x theta_i, as attn::rotary does.
  std::string rotate(const std::string& x, const std::string& start, const std::string& len) {
    const std::int64_t half = head_dim_ / 2;
    std::string pairs = b_.op("Reshape", {x, b_.ints({0, 0, 0, half, 2})});
    const auto part = [&](const std::string& t, std::int64_t k, std::int64_t axis) {
      return b_.op("Slice", {t, b_.ints({k}), b_.ints({k + 1}), b_.ints({axis})});
    };
    std::string rows = b_.op("Slice", {rotary_, start, b_.op("Add", {start, len}), b_.ints({0})});
    rows = b_.op("Reshape", {rows, b_.ints({-1, half, 2})});  // (T, half, 2)
    std::string c = part(rows, 0, 2), s = part(rows, 1, 2);
    std::string x0 = part(pairs, 0, 4), x1 = part(pairs, 1, 4);
    std::string y0 = b_.op("Sub", {b_.op("Mul", {x0, c}), b_.op("Mul", {x1, s})});
    std::string y1 = b_.op("Add", {b_.op("Mul", {x0, s}), b_.op("Mul", {x1, c})});
    std::string y = b_.op("Concat", {y0, y1}, {{"axis", std::int64_t{4}}});
    return b_.op("Reshape", {y, b_.ints({0, 0, 0, head_dim_})});
  }

  // x (..., in) W^T + b. The weight is stored transposed, as "<name>.weight.T" (in, out).
  std::string linear(const nn::Linear& l, const std::string& name, const std::string& x) {
    const Shape& s = l.weight.shape();
    std::string wt = b_.weight(name + ".weight.T", l.weight.transpose(0, 1), {s[1], s[0]});
    std::string y = b_.op("MatMul", {x, wt});
    if (l.bias.defined()) y = b_.op("Add", {y, b_.weight(name + ".bias", l.bias)});
    return y;
  }

  // (B, T, num_hiddens) -> (B, heads, T, head_dim)
  std::string heads(const std::string& x) {
    std::string r = b_.op("Reshape", {x, b_.ints({0, 0, num_heads_, head_dim_})});
    return b_.op("Transpose", {r}, {{"perm", Ints{0, 2, 1, 3}}});
  }
  // (B, heads, T, head_dim) -> (B, T, num_hiddens)
  std::string merge_heads(const std::string& x) {
    std::string t = b_.op("Transpose", {x}, {{"perm", Ints{0, 2, 1, 3}}});
    return b_.op("Reshape", {t, b_.ints({0, 0, num_hiddens_})});
  }

  // d2l's DotProductAttention on every head: softmax(mask(Q K^T / sqrt(d))) V,
  // masked scores set to -1e6. mask: bool, broadcast to (B, heads, Tq, Tk).
  std::string attend(const std::string& q, const std::string& k, const std::string& v,
                     const std::string& mask) {
    std::string kt = b_.op("Transpose", {k}, {{"perm", Ints{0, 1, 3, 2}}});
    std::string s = b_.op("MatMul", {q, kt});
    s = b_.op("Div", {s, b_.real(std::sqrt(static_cast<float>(head_dim_)))});
    s = b_.op("Where", {mask, s, b_.real(-1e6f)});
    std::string w = b_.op("Softmax", {s}, {{"axis", std::int64_t{-1}}});
    return b_.op("MatMul", {w, v});
  }

  // LayerNorm(Y + X) (AddNorm without dropout).
  std::string add_norm(const nn::AddNorm& an, const std::string& name, const std::string& X,
                       const std::string& Y) {
    std::string sum = b_.op("Add", {X, Y});
    return b_.op("LayerNormalization",
                 {sum, b_.weight(name + ".ln.weight", an.ln->weight),
                  b_.weight(name + ".ln.bias", an.ln->bias)},
                 {{"axis", std::int64_t{-1}}, {"epsilon", static_cast<float>(an.ln->eps)}});
  }

  std::string ffn(const nn::PositionWiseFFN& f, const std::string& name, const std::string& x) {
    std::string h = b_.op("Relu", {linear(*f.dense1, name + ".dense1", x)});
    return linear(*f.dense2, name + ".dense2", h);
  }

  // embedding(ids) * sqrt(num_hiddens) + P[start : start + T] (nothing
  // added when pe is empty: rotary); start and T are 1-D int64 tensors of
  // one element.
  std::string embed(const nn::Embedding& e, const std::string& name, const std::string& ids,
                    const std::string& pe, const std::string& start, const std::string& len) {
    std::string x =
        b_.op("Gather", {b_.weight(name + ".weight", e.weight), ids}, {{"axis", std::int64_t{0}}});
    x = b_.op("Mul",
              {x, b_.real(static_cast<float>(std::sqrt(static_cast<double>(num_hiddens_))))});
    if (pe.empty()) return x;
    std::string end = b_.op("Add", {start, len});
    std::string pos = b_.op("Slice", {pe, start, end, b_.ints({0})});
    return b_.op("Add", {x, pos});
  }

  // Keys k < valid_len[b] are seen: (B, 1, 1, K) bool, for K = dim `axis` of `keys`.
  std::string length_mask(const std::string& keys, std::int64_t axis,
                          const std::string& valid_len) {
    std::string K = b_.op("Shape", {keys}, {{"start", axis}, {"end", axis + 1}});
    std::string pos = b_.op("Range", {b_.scalar(0), squeeze(K), b_.scalar(1)});
    std::string lens = b_.op("Unsqueeze", {valid_len, b_.ints({1})});
    std::string seen = b_.op("Less", {pos, lens});  // (B, K)
    return b_.op("Unsqueeze", {seen, b_.ints({1, 2})});
  }

  std::string squeeze(const std::string& one) { return b_.op("Squeeze", {one, b_.ints({0})}); }

  // Multi-head attention of `queries` against keys and values already in
  // heads; with rotary positions and `start` given, the queries are turned
  // to positions start.. first (the keys were turned by the caller).
  std::string mha(const nn::MultiHeadAttention& m, const std::string& name,
                  const std::string& queries, const std::string& K, const std::string& V,
                  const std::string& mask, const std::string& start = "",
                  const std::string& len = "") {
    std::string q = heads(linear(*m.W_q, name + ".W_q", queries));
    if (rotary() && !start.empty()) q = rotate(q, start, len);
    return linear(*m.W_o, name + ".W_o", merge_heads(attend(q, K, V, mask)));
  }

 private:
  Builder& b_;
  std::int64_t num_hiddens_, num_heads_, head_dim_;
  std::string rotary_;
};

std::string layer_name(const char* what, std::int64_t l) { return fmt::format("{}.{}", what, l); }

// The graph's inputs (ids, lengths, the caches) and outputs (logits, the
// caches after the step).
void declare_io(GraphProto* g, const nn::TransformerConfig& c) {
  const std::int64_t L = c.num_layers, heads = c.num_heads, head_dim = c.num_hiddens / heads;
  const auto F = DataType::kFloat;
  const auto I64 = DataType::kInt64;
  value_info(g->input, "src_ids", I64, {"batch", "src_len"});
  value_info(g->input, "src_valid_len", I64, {"batch"});
  value_info(g->input, "tgt_ids", I64, {"batch", "tgt_len"});
  for (std::int64_t l = 0; l < L; ++l) {
    for (const char* kv : {"past_self_key", "past_self_value"})
      value_info(g->input, layer_name(kv, l), F, {"batch", heads, "past_len", head_dim});
    for (const char* kv : {"past_cross_key", "past_cross_value"})
      value_info(g->input, layer_name(kv, l), F, {"batch", heads, "cross_len", head_dim});
  }
  value_info(g->output, "logits", F, {"batch", "tgt_len", c.tgt_vocab_size});
  for (std::int64_t l = 0; l < L; ++l) {
    for (const char* kv : {"present_self_key", "present_self_value"})
      value_info(g->output, layer_name(kv, l), F, {"batch", heads, "present_len", head_dim});
    for (const char* kv : {"present_cross_key", "present_cross_value"})
      value_info(g->output, layer_name(kv, l), F, {"batch", heads, "src_len", head_dim});
  }
}

// The encoder, when the cross-attention cache is empty: its outputs
// projected into every decoder layer's cross-attention keys and values;
// else the cache as it is. Returns the names of those keys and values.
std::vector<std::string> build_encoder(Builder& b, TransformerGraph& t,
                                       const nn::EncoderDecoder& net,
                                       const nn::TransformerConfig& c, const std::string& pe) {
  const std::int64_t L = c.num_layers, heads = c.num_heads, head_dim = c.num_hiddens / heads;
  const auto F = DataType::kFloat;
  std::vector<std::string> cross;
  for (std::int64_t l = 0; l < L; ++l)
    for (const char* kv : {"present_cross_key", "present_cross_value"})
      cross.push_back(layer_name(kv, l));
  std::string cross_len =
      b.op("Shape", {"past_cross_key.0"}, {{"start", std::int64_t{2}}, {"end", std::int64_t{3}}});
  std::string run_encoder = t.squeeze(b.op("Equal", {cross_len, b.ints({0})}));
  auto [encode, reuse] = b.if_node(run_encoder, cross);
  {
    Builder::BranchScope scope(b, encode);
    const auto& enc = *net.encoder;
    std::string S =
        b.op("Shape", {"src_ids"}, {{"start", std::int64_t{1}}, {"end", std::int64_t{2}}});
    std::string X = t.embed(*enc.embedding, "encoder.embedding", "src_ids", pe, b.ints({0}), S);
    std::string mask = t.length_mask("src_ids", 1, "src_valid_len");
    for (std::int64_t l = 0; l < L; ++l) {
      const nn::EncoderBlock& blk = *enc.blks->blocks[l];
      const std::string n = fmt::format("encoder.blks.block{}", l);
      const auto& a = *blk.attention;
      std::string K = t.heads(t.linear(*a.W_k, n + ".attention.W_k", X));
      if (t.rotary()) K = t.rotate(K, b.ints({0}), S);
      std::string V = t.heads(t.linear(*a.W_v, n + ".attention.W_v", X));
      std::string Y = t.add_norm(*blk.addnorm1, n + ".addnorm1", X,
                                 t.mha(a, n + ".attention", X, K, V, mask, b.ints({0}), S));
      X = t.add_norm(*blk.addnorm2, n + ".addnorm2", Y, t.ffn(*blk.ffn, n + ".ffn", Y));
    }
    for (std::int64_t l = 0; l < L; ++l) {
      const auto& a = *net.decoder->blks->blocks[l]->attention2;
      const std::string n = fmt::format("decoder.blks.block{}.attention2", l);
      std::string K = t.heads(t.linear(*a.W_k, n + ".W_k", X));
      std::string V = t.heads(t.linear(*a.W_v, n + ".W_v", X));
      b.op("Identity", {K}, {}, "encoder_" + cross[2 * l]);
      b.op("Identity", {V}, {}, "encoder_" + cross[2 * l + 1]);
    }
    for (const auto& name : cross)
      value_info(encode->output, "encoder_" + name, F, {"batch", heads, "src_len", head_dim});
  }
  {
    Builder::BranchScope scope(b, reuse);
    for (std::int64_t l = 0; l < L; ++l) {
      b.op("Identity", {layer_name("past_cross_key", l)}, {}, "cached_" + cross[2 * l]);
      b.op("Identity", {layer_name("past_cross_value", l)}, {}, "cached_" + cross[2 * l + 1]);
    }
    for (const auto& name : cross)
      value_info(reuse->output, "cached_" + name, F, {"batch", heads, "src_len", head_dim});
  }
  return cross;
}

// One decoder step: the new tokens at positions past_len.., attending to
// the self-attention cache and themselves (causally) and to the encoder.
void build_decoder_step(Builder& b, TransformerGraph& t, const nn::EncoderDecoder& net,
                        const nn::TransformerConfig& c, const std::string& pe,
                        const std::vector<std::string>& cross) {
  const std::int64_t L = c.num_layers;
  const auto& dec = *net.decoder;
  std::string past =
      b.op("Shape", {"past_self_key.0"}, {{"start", std::int64_t{2}}, {"end", std::int64_t{3}}});
  std::string T =
      b.op("Shape", {"tgt_ids"}, {{"start", std::int64_t{1}}, {"end", std::int64_t{2}}});
  std::string Y = t.embed(*dec.embedding, "decoder.embedding", "tgt_ids", pe, past, T);
  // Query i (position past + i) sees keys j <= past + i.
  std::string keys = b.op("Range", {b.scalar(0), t.squeeze(b.op("Add", {past, T})), b.scalar(1)});
  std::string queries =
      b.op("Add", {b.op("Range", {b.scalar(0), t.squeeze(T), b.scalar(1)}), t.squeeze(past)});
  std::string causal = b.op("LessOrEqual", {b.op("Unsqueeze", {keys, b.ints({0})}),
                                            b.op("Unsqueeze", {queries, b.ints({1})})});
  causal = b.op("Unsqueeze", {causal, b.ints({0, 1})});  // (1, 1, T, past + T)
  std::string cross_mask = t.length_mask(cross[0], 2, "src_valid_len");
  for (std::int64_t l = 0; l < L; ++l) {
    const nn::DecoderBlock& blk = *dec.blks->blocks[l];
    const std::string n = fmt::format("decoder.blks.block{}", l);
    const auto& a1 = *blk.attention1;
    std::string k = t.heads(t.linear(*a1.W_k, n + ".attention1.W_k", Y));
    if (t.rotary()) k = t.rotate(k, past, T);  // the cache keeps keys turned
    std::string v = t.heads(t.linear(*a1.W_v, n + ".attention1.W_v", Y));
    std::string K = b.op("Concat", {layer_name("past_self_key", l), k}, {{"axis", std::int64_t{2}}},
                         layer_name("present_self_key", l));
    std::string V = b.op("Concat", {layer_name("past_self_value", l), v},
                         {{"axis", std::int64_t{2}}}, layer_name("present_self_value", l));
    std::string Y1 = t.add_norm(*blk.addnorm1, n + ".addnorm1", Y,
                                t.mha(a1, n + ".attention1", Y, K, V, causal, past, T));
    std::string Y2 = t.add_norm(
        *blk.addnorm2, n + ".addnorm2", Y1,
        t.mha(*blk.attention2, n + ".attention2", Y1, cross[2 * l], cross[2 * l + 1], cross_mask));
    Y = t.add_norm(*blk.addnorm3, n + ".addnorm3", Y2, t.ffn(*blk.ffn, n + ".ffn", Y2));
  }
  b.op("Identity", {t.linear(*dec.dense, "decoder.dense", Y)}, {}, "logits");
}

void build_model(ModelProto& model, const LoadedModel& m) {
  const auto* transformer = dynamic_cast<const nn::EncoderDecoder*>(m.net.get());
  ATTN_CHECK(transformer != nullptr, ValueError,
             "export --onnx: only Transformer models are exported, this one is {}",
             m.net->architecture());
  const nn::EncoderDecoder& net = *transformer;
  const nn::TransformerConfig& c = m.config.transformer;
  ATTN_CHECK(c.layer_norm_shape() == Shape{c.num_hiddens}, ValueError,
             "ONNX export: layer norms over {} are not supported (only over the last dim, {})",
             shape_str(c.layer_norm_shape()), c.num_hiddens);
  ATTN_CHECK((c.positions == nn::Positions::sinusoidal || c.positions == nn::Positions::rotary) &&
                 c.kv_heads() == c.num_heads,
             ValueError,
             "ONNX export: only sinusoidal or rotary positions with full key/value heads are "
             "exported (this model: --positions {}, --num-kv-heads {})",
             enum_name(c.positions), c.kv_heads());

  model.ir_version = kOnnxIrVersion;
  model.producer_name = "attn";
  model.model_version = 1;
  model.doc_string =
      "attn's Transformer (d2l 10.7): one decoder step with its KV cache; the encoder runs when "
      "the cross-attention cache is empty (docs/model-format.md)";
  model.opset_version = kOnnxOpset;
  model.metadata_props = {{"attn.config", config_to_json(m.config)},
                          {"attn.src_vocab", m.src_vocab.to_text()},
                          {"attn.tgt_vocab", m.tgt_vocab.to_text()}};

  GraphProto* g = &model.graph;
  g->name = "attn_transformer_step";
  declare_io(g, c);
  Builder b(g);
  TransformerGraph t(b, c);
  const Tensor& P = net.encoder->pos_encoding->P;  // (1, max_len, H)
  std::string pe;
  if (c.positions == nn::Positions::sinusoidal) {
    pe = b.weight("pos_encoding.P", P, {P.size(1), P.size(2)});
  } else {
    // attn::rotary of (1, 0) pairs at every position: (cos, sin) pairs, the
    // angles as the kernels have them.
    const std::int64_t D = c.num_hiddens / c.num_heads;
    std::vector<float> ones(static_cast<std::size_t>(c.max_len * D), 0.0f);
    for (std::size_t k = 0; k < ones.size(); k += 2) ones[k] = 1.0f;
    t.set_rotary(b.weight("rotary.cos_sin", rotary(from_vector(ones, {c.max_len, D}))));
  }
  const std::vector<std::string> cross = build_encoder(b, t, net, c, pe);
  build_decoder_step(b, t, net, c, pe, cross);
}

}  // namespace

std::string onnx_model_bytes(const LoadedModel& m) {
  ATTN_CHECK(m.net != nullptr, ValueError, "ONNX export: no model");
  ModelProto model;
  build_model(model, m);
  ProtoWriter w;
  model.write(w);
  ATTN_CHECK(w.bytes().size() < (std::size_t{1} << 31), ValueError,
             "ONNX export: the model takes {} bytes, more than protobuf's limit of 2 GiB",
             w.bytes().size());
  return std::move(w).take();
}

void export_onnx(const LoadedModel& m, const std::string& path) {
  io::write_file_atomic(path, onnx_model_bytes(m));
}

}  // namespace attn::seq2seq
