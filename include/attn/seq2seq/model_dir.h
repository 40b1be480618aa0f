// attn/seq2seq/model_dir.h — the model directory that `attn train` writes and
// `attn translate` reads (docs/model-format.md):
//   config.json        every hyperparameter of the model and of its data
//   model.safetensors  the parameters, under d2l's PyTorch state_dict names
//   src_vocab.txt      source tokens, one per line, in index order
//   tgt_vocab.txt      target tokens, likewise
#pragma once

#include <memory>
#include <string>

#include "attn/data/vocab.h"
#include "attn/nn/transformer.h"

namespace attn::seq2seq {

struct ModelConfig {
  nn::TransformerConfig transformer;
  std::int64_t num_steps = 10;  // the sequence length the data was cut to
};

struct LoadedModel {
  ModelConfig config;
  std::shared_ptr<nn::EncoderDecoder> net;
  data::Vocab src_vocab, tgt_vocab;
};

// Writes the four files (each atomically), creating `dir` if needed.
void save_model(const std::string& dir, const nn::EncoderDecoder& net, const ModelConfig& config,
                const data::Vocab& src_vocab, const data::Vocab& tgt_vocab);

// Reads and checks all four files: a missing or malformed file, a config
// value of the wrong type or range, a vocabulary whose size differs from the
// config, or a tensor whose shape does not match the config is an IOError
// naming the file and the field or tensor.
LoadedModel load_model(const std::string& dir);

// config.json text <-> config (exposed for tests).
std::string config_to_json(const ModelConfig& config);
ModelConfig config_from_json(const std::string& text, const std::string& what);

}  // namespace attn::seq2seq
