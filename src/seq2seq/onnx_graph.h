// src/seq2seq/onnx_graph.h — internal: the part of ONNX that attn's export
// writes (the messages of onnx.proto it needs, serialized with
// io::ProtoWriter) and a Builder of graphs of them. What a model becomes
// in ONNX is seq2seq/onnx_export.cpp's.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/seq2seq/onnx_export.h"
#include "io/protobuf_writer.h"

namespace attn::seq2seq::onnx_graph {

using Ints = std::vector<std::int64_t>;
using io::ProtoWriter;

// The messages of onnx.proto (ONNX 1.12) that the export writes, with the
// fields it sets and their field numbers. Each write() puts the fields in
// field-number order, as protobuf's own serializer does; onnx.proto is proto2,
// so a field that is set is written even when it holds its default, and
// repeated int64 fields (dims, ints) are not packed.

enum class DataType : std::int64_t { kFloat = 1, kInt64 = 7 };  // TensorProto.DataType
enum class AttributeType : std::int64_t { kFloat = 1, kInt = 2, kGraph = 5, kInts = 7 };

struct TensorProto {
  static constexpr int kDims = 1, kDataType = 2, kName = 8, kRawData = 9;
  Ints dims;  // none for a scalar
  DataType data_type = DataType::kFloat;
  std::string name;
  std::string raw_data;  // the elements, little-endian

  void write(ProtoWriter& w) const {
    for (auto d : dims) w.int64_field(kDims, d);
    w.int64_field(kDataType, static_cast<std::int64_t>(data_type));
    w.bytes_field(kName, name);
    w.bytes_field(kRawData, raw_data);
  }
};

// ValueInfoProto, with its TypeProto.Tensor and TensorShapeProto: a tensor's
// element type and dims, each a size (dim_value) or a name (dim_param).
struct ValueInfoProto {
  static constexpr int kName = 1, kType = 2;
  static constexpr int kTypeTensorType = 1;  // TypeProto
  static constexpr int kTensorElemType = 1, kTensorShape = 2;  // TypeProto.Tensor
  static constexpr int kShapeDim = 1;  // TensorShapeProto
  static constexpr int kDimValue = 1, kDimParam = 2;  // TensorShapeProto.Dimension
  std::string name;
  DataType elem_type = DataType::kFloat;
  std::vector<std::variant<std::int64_t, std::string>> dims;

  void write(ProtoWriter& w) const {
    w.bytes_field(kName, name);
    w.message_field(kType, [&] {
      w.message_field(kTypeTensorType, [&] {
        w.int64_field(kTensorElemType, static_cast<std::int64_t>(elem_type));
        w.message_field(kTensorShape, [&] {
          for (const auto& d : dims)
            w.message_field(kShapeDim, [&] {
              if (auto* n = std::get_if<std::int64_t>(&d))
                w.int64_field(kDimValue, *n);
              else
                w.bytes_field(kDimParam, std::get<std::string>(d));
            });
        });
      });
    });
  }
};

struct GraphProto;

struct AttributeProto {
  static constexpr int kName = 1, kF = 2, kI = 3, kG = 6, kInts = 8, kType = 20;
  std::string name;
  AttributeType type = AttributeType::kInt;
  float f = 0;  // kFloat
  std::int64_t i = 0;  // kInt
  std::unique_ptr<GraphProto> g;  // kGraph
  Ints ints;  // kInts

  void write(ProtoWriter& w) const;
};

struct NodeProto {
  static constexpr int kInput = 1, kOutput = 2, kName = 3, kOpType = 4, kAttribute = 5;
  std::vector<std::string> input, output;
  std::string name, op_type;
  std::vector<AttributeProto> attribute;

  void write(ProtoWriter& w) const {
    for (const auto& i : input) w.bytes_field(kInput, i);
    for (const auto& o : output) w.bytes_field(kOutput, o);
    w.bytes_field(kName, name);
    w.bytes_field(kOpType, op_type);
    for (const auto& a : attribute) w.message_field(kAttribute, [&] { a.write(w); });
  }
};

struct GraphProto {
  static constexpr int kNode = 1, kName = 2, kInitializer = 5, kInput = 11, kOutput = 12;
  std::vector<NodeProto> node;
  std::string name;
  std::vector<TensorProto> initializer;
  std::vector<ValueInfoProto> input, output;

  void write(ProtoWriter& w) const {
    for (const auto& n : node) w.message_field(kNode, [&] { n.write(w); });
    w.bytes_field(kName, name);
    for (const auto& t : initializer) w.message_field(kInitializer, [&] { t.write(w); });
    for (const auto& v : input) w.message_field(kInput, [&] { v.write(w); });
    for (const auto& v : output) w.message_field(kOutput, [&] { v.write(w); });
  }
};

inline void AttributeProto::write(ProtoWriter& w) const {
  w.bytes_field(kName, name);
  switch (type) {
    case AttributeType::kFloat: w.float_field(kF, f); break;
    case AttributeType::kInt: w.int64_field(kI, i); break;
    case AttributeType::kGraph: w.message_field(kG, [&] { g->write(w); }); break;
    case AttributeType::kInts:
      for (auto v : ints) w.int64_field(kInts, v);
      break;
  }
  w.int64_field(kType, static_cast<std::int64_t>(type));
}

// ModelProto, with its OperatorSetIdProto (one: the default domain) and
// StringStringEntryProto metadata.
struct ModelProto {
  static constexpr int kIrVersion = 1, kProducerName = 2, kModelVersion = 5, kDocString = 6,
                       kGraph = 7, kOpsetImport = 8, kMetadataProps = 14;
  static constexpr int kOpsetDomain = 1, kOpsetVersion = 2;  // OperatorSetIdProto
  static constexpr int kEntryKey = 1, kEntryValue = 2;  // StringStringEntryProto
  std::int64_t ir_version = kOnnxIrVersion;
  std::string producer_name;
  std::int64_t model_version = 0;
  std::string doc_string;
  GraphProto graph;
  std::int64_t opset_version = kOnnxOpset;  // of the default domain, ""
  std::vector<std::pair<std::string, std::string>> metadata_props;

  void write(ProtoWriter& w) const {
    w.int64_field(kIrVersion, ir_version);
    w.bytes_field(kProducerName, producer_name);
    w.int64_field(kModelVersion, model_version);
    w.bytes_field(kDocString, doc_string);
    w.message_field(kGraph, [&] { graph.write(w); });
    w.message_field(kOpsetImport, [&] {
      w.bytes_field(kOpsetDomain, "");
      w.int64_field(kOpsetVersion, opset_version);
    });
    for (const auto& [key, value] : metadata_props)
      w.message_field(kMetadataProps, [&] {
        w.bytes_field(kEntryKey, key);
        w.bytes_field(kEntryValue, value);
      });
  }
};

struct Attr {
  std::string name;
  std::variant<std::int64_t, float, Ints> value;
};

// Builds the nodes of one ONNX model: the main graph and the If branches,
// which see the main graph's initializers (weights and constants) by name.
// Every node output is named after its op and a counter unique in the model,
// unless the caller names it (graph inputs and outputs).
class Builder {
 public:
  explicit Builder(GraphProto* main) : main_(main), g_(main) {}

  // Nodes added while a BranchScope lives go into `branch`.
  class BranchScope {
   public:
    BranchScope(Builder& b, GraphProto* branch) : b_(b), saved_(b.g_) { b.g_ = branch; }
    ~BranchScope() { b_.g_ = saved_; }

   private:
    Builder& b_;
    GraphProto* saved_;
  };

  std::string op(const std::string& type, const std::vector<std::string>& inputs,
                 const std::vector<Attr>& attrs = {}, std::string output = "") {
    if (output.empty()) output = fmt::format("{}_{}", type, counter_);
    NodeProto& n = g_->node.emplace_back();
    n.op_type = type;
    n.name = fmt::format("{}_{}", type, counter_++);
    n.input = inputs;
    n.output = {output};
    for (const auto& a : attrs) {
      AttributeProto& p = n.attribute.emplace_back();
      p.name = a.name;
      if (auto* i = std::get_if<std::int64_t>(&a.value)) {
        p.type = AttributeType::kInt;
        p.i = *i;
      } else if (auto* f = std::get_if<float>(&a.value)) {
        p.type = AttributeType::kFloat;
        p.f = *f;
      } else {
        p.type = AttributeType::kInts;
        p.ints = std::get<Ints>(a.value);
      }
    }
    return output;
  }

  // An If node whose branches are filled by the callers; returns the branches.
  std::pair<GraphProto*, GraphProto*> if_node(const std::string& cond,
                                              const std::vector<std::string>& outputs) {
    NodeProto& n = g_->node.emplace_back();
    n.op_type = "If";
    n.name = fmt::format("If_{}", counter_++);
    n.input = {cond};
    n.output = outputs;
    GraphProto* branches[2];
    const char* names[2] = {"then_branch", "else_branch"};
    for (int k = 0; k < 2; ++k) {
      AttributeProto& a = n.attribute.emplace_back();
      a.name = names[k];
      a.type = AttributeType::kGraph;
      a.g = std::make_unique<GraphProto>();
      a.g->name = names[k];
      branches[k] = a.g.get();
    }
    return {branches[0], branches[1]};
  }

  // An int64 constant, 1-D or (scalar) 0-D; one initializer per value.
  std::string ints(const Ints& v, bool scalar = false) {
    const std::string key = fmt::format("{}{}", scalar ? "s" : "v", fmt::join(v, ","));
    auto it = constants_.find(key);
    if (it != constants_.end()) return it->second;
    std::string name = fmt::format("const_i64_{}", constants_.size());
    TensorProto& t = main_->initializer.emplace_back();
    t.name = name;
    t.data_type = DataType::kInt64;
    if (!scalar) t.dims = {static_cast<std::int64_t>(v.size())};
    t.raw_data.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
    return constants_[key] = name;
  }
  std::string scalar(std::int64_t v) { return ints({v}, true); }
  // A float scalar constant.
  std::string real(float v) {
    const std::string key = fmt::format("f{}", v);
    auto it = constants_.find(key);
    if (it != constants_.end()) return it->second;
    std::string name = fmt::format("const_f32_{}", constants_.size());
    TensorProto& t = main_->initializer.emplace_back();
    t.name = name;
    t.data_type = DataType::kFloat;
    t.raw_data.assign(reinterpret_cast<const char*>(&v), sizeof v);
    return constants_[key] = name;
  }

  // A weight as an f32 initializer named `name`, of `shape` (its own when empty).
  std::string weight(const std::string& name, const Tensor& w, Shape shape = {}) {
    Tensor c = w.to(DType::f32).contiguous();
    TensorProto& t = main_->initializer.emplace_back();
    t.name = name;
    t.data_type = DataType::kFloat;
    const Shape& dims = shape.empty() ? c.shape() : shape;
    t.dims.assign(dims.begin(), dims.end());
    t.raw_data.assign(reinterpret_cast<const char*>(c.data<float>()),
                      static_cast<std::size_t>(c.numel()) * sizeof(float));
    return name;
  }

 private:
  GraphProto* main_;
  GraphProto* g_;
  int counter_ = 0;
  std::map<std::string, std::string> constants_;
};

// A graph input or output: `elem` type and dims, each a size or a name.
inline void value_info(std::vector<ValueInfoProto>& list, const std::string& name, DataType elem,
                       const std::vector<std::variant<std::int64_t, std::string>>& dims) {
  list.push_back({name, elem, dims});
}

}  // namespace attn::seq2seq::onnx_graph
