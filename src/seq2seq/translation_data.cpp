#include "attn/seq2seq/translation_data.h"

#include <filesystem>

#include "attn/core/error.h"
#include "attn/data/nmt.h"
#include "attn/data/text.h"
#include "attn/io/atomic_file.h"
#include "attn/seq2seq/checkpoint.h"

namespace attn::seq2seq {

bool uses_translation_data(const RunSpec& run) {
  return run.model.tokenizer == TokenizerKind::spm || run.data.batch_tokens > 0;
}

namespace {

std::unique_ptr<data::Tokenizer> word_vocabularies(const std::vector<data::SentencePair>& train,
                                                   int min_freq) {
  std::vector<data::Tokens> src, tgt;
  for (const auto& p : train) {
    src.push_back(data::split_spaces(data::preprocess_nmt(p.source)));
    tgt.push_back(data::split_spaces(data::preprocess_nmt(p.target)));
  }
  return data::word_tokenizer(data::Vocab(src, min_freq, data::kReservedTokens),
                              data::Vocab(tgt, min_freq, data::kReservedTokens));
}

struct Fnv1a {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  void add(std::int64_t v) {
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    for (std::size_t i = 0; i < sizeof v; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  }
  void add(const data::TokenizedPairs& pairs) {
    add(static_cast<std::int64_t>(pairs.size()));
    for (const auto* side : {&pairs.src, &pairs.tgt})
      for (const auto& seq : *side) {
        add(static_cast<std::int64_t>(seq.size()));
        for (std::int64_t id : seq) add(id);
      }
  }
};

}  // namespace

TranslationData prepare_translation_data(const RunSpec& run, const std::string* spm_model) {
  const DataSpec& d = run.data;
  TranslationData out;
  // --reverse: every corpus read with its columns swapped, before anything
  // is split or counted, so the model's source is the second column.
  auto read = [&](const std::string& path, std::size_t max_pairs) {
    std::vector<data::SentencePair> pairs = data::read_pairs(path, max_pairs);
    if (d.reverse)
      for (data::SentencePair& p : pairs) std::swap(p.source, p.target);
    return pairs;
  };
  std::vector<data::SentencePair> pairs =
      read(d.path, d.num_examples > 0 ? static_cast<std::size_t>(d.num_examples) : 0);
  out.split = data::split_by_source(pairs, d.valid_data.empty() ? d.valid_size : 0,
                                    d.test_data.empty() ? d.test_size : 0, run.train.seed);
  if (!d.valid_data.empty()) out.split.valid = read(d.valid_data, 0);
  if (!d.test_data.empty()) out.split.test = read(d.test_data, 0);

  if (run.model.tokenizer == TokenizerKind::spm) {
    if (spm_model) {
      out.spm_model = *spm_model;
    } else {
      std::vector<std::string> sentences;
      sentences.reserve(2 * out.split.train.size());
      for (const auto& p : out.split.train) sentences.push_back(p.source);
      for (const auto& p : out.split.train) sentences.push_back(p.target);
      out.spm_model = data::train_sentencepiece(sentences, {d.vocab_size, enum_name(d.spm_type)},
                                                run.train.seed);
    }
    out.tokenizer = data::sentencepiece_tokenizer(out.spm_model, "spm.model");
  } else {
    out.tokenizer = word_vocabularies(out.split.train, d.min_freq);
  }
  out.train = data::tokenize_pairs(out.split.train, *out.tokenizer, d.max_length, &out.dropped);
  ATTN_CHECK(out.train.size() > 0, ValueError,
             "train: every training pair is longer than --max-length {} tokens", d.max_length);
  // Validation pairs the model cannot read (longer than its positions) are
  // left out of the text too, so that the loss and the BLEU see the same pairs.
  std::vector<data::SentencePair> kept;
  for (const auto& p : out.split.valid) {
    data::TokenizedPairs one =
        data::tokenize_pairs({p}, *out.tokenizer, run.model.transformer.max_len);
    if (one.size() == 0) {
      ++out.valid_dropped;
      continue;
    }
    out.valid.src.push_back(std::move(one.src[0]));
    out.valid.tgt.push_back(std::move(one.tgt[0]));
    kept.push_back(p);
  }
  out.split.valid = std::move(kept);
  return out;
}

void describe_translation_data(const TranslationData& data, RunSpec& run) {
  run.model.transformer.src_vocab_size =
      static_cast<std::int64_t>(data.tokenizer->vocab(data::Side::source).size());
  run.model.transformer.tgt_vocab_size =
      static_cast<std::int64_t>(data.tokenizer->vocab(data::Side::target).size());
  run.data.num_pairs = static_cast<std::int64_t>(data.train.size());
  run.data.fingerprint = translation_fingerprint(data);
}

std::uint64_t translation_fingerprint(const TranslationData& data) {
  Fnv1a h;
  h.add(data.train);
  h.add(data.valid);
  return h.h;
}

std::unique_ptr<TokenBatches> translation_batches(const TranslationData& data, const RunSpec& run) {
  const data::Vocab& tv = data.tokenizer->vocab(data::Side::target);
  return std::make_unique<TokenBatches>(data.train,
                                        run.data.batch_tokens > 0 ? run.data.batch_tokens : 4096,
                                        run.train.seed, tv["<pad>"], tv["<bos>"], tv["<eos>"]);
}

data::NmtOptions nmt_options(const RunSpec& run) {
  data::NmtOptions o;
  o.num_steps = run.model.num_steps;
  o.num_examples = run.data.num_examples;
  o.min_freq = run.data.min_freq;
  o.valid_fraction = run.data.valid_fraction;
  o.reverse = run.data.reverse;
  return o;
}

const data::Vocab& RunData::vocab(data::Side side) const {
  if (tr) return tr->tokenizer->vocab(side);
  return side == data::Side::source ? nmt.src_vocab : nmt.tgt_vocab;
}

ModelExtras RunData::extras(const RunSpec& run) const {
  ModelExtras e;
  if (tr) e.spm_model = tr->spm_model;
  e.training_json = hparams_to_flat_json(run).dump(2) + "\n";
  e.run_id = run.run_id;
  return e;
}

std::unique_ptr<RunData> load_run_data(RunSpec& run, bool fresh, const std::string* spm_model) {
  auto out = std::make_unique<RunData>();
  RunData& d = *out;
  if (uses_translation_data(run)) {
    d.tr = prepare_translation_data(run, spm_model);
    d.fingerprint = translation_fingerprint(*d.tr);
    if (fresh) describe_translation_data(*d.tr, run);
    d.batches = translation_batches(*d.tr, run);
  } else {
    d.nmt = data::load_data_nmt(run.data.path, nmt_options(run));
    check_training_data(d.nmt);
    d.fingerprint = data_fingerprint(d.nmt);
    if (fresh) {
      run.data.num_pairs = d.nmt.src.array.size(0);
      run.data.fingerprint = d.fingerprint;
      run.model.transformer.src_vocab_size = static_cast<std::int64_t>(d.nmt.src_vocab.size());
      run.model.transformer.tgt_vocab_size = static_cast<std::int64_t>(d.nmt.tgt_vocab.size());
    }
    d.batches = std::make_unique<FixedLengthBatches>(d.nmt, run.train.batch_size);
  }
  if (fresh) run.data.path = std::filesystem::absolute(run.data.path).lexically_normal().string();
  return out;
}

void write_split(const std::string& dir, const TranslationData& data) {
  const std::filesystem::path d = std::filesystem::path(dir) / "data";
  io::ensure_directory(d);
  io::write_file_atomic(d / "train.tsv", data::pairs_to_tsv(data.split.train));
  io::write_file_atomic(d / "valid.tsv", data::pairs_to_tsv(data.split.valid));
  io::write_file_atomic(d / "test.tsv", data::pairs_to_tsv(data.split.test));
}

}  // namespace attn::seq2seq
