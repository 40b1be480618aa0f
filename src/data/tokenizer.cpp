#include "attn/data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fcntl.h>
#include <unistd.h>

#include <mutex>

#include "attn/core/error.h"
#include "attn/data/nmt.h"
#include "attn/data/text.h"

namespace attn::data {

namespace {

class WordTokenizer : public Tokenizer {
 public:
  WordTokenizer(Vocab src, Vocab tgt) : src_(std::move(src)), tgt_(std::move(tgt)) {}
  std::string kind() const override { return "word"; }
  std::vector<std::int64_t> encode(std::string_view text, Side side) const override {
    return vocab(side).indices(split_spaces(preprocess_nmt(text)));
  }
  std::string decode(const std::vector<std::int64_t>& ids, Side side) const override {
    std::string out;
    for (std::int64_t id : ids) out += (out.empty() ? "" : " ") + vocab(side).token(id);
    return out;
  }
  std::vector<std::string> pieces(const std::vector<std::int64_t>& ids, Side side) const override {
    return vocab(side).to_tokens(ids);
  }
  const Vocab& vocab(Side side) const override { return side == Side::source ? src_ : tgt_; }

 private:
  Vocab src_, tgt_;
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(const std::string& bytes, const std::string& what) {
    auto status = sp_.LoadFromSerializedProto(bytes);
    ATTN_CHECK(status.ok(), IOError, "{}: not a SentencePiece model ({})", what,
               printable_excerpt(status.ToString(), 200));
    const char* reserved[] = {"<unk>", "<pad>", "<bos>", "<eos>"};
    std::vector<std::string> tokens;
    for (int i = 0; i < sp_.GetPieceSize(); ++i) tokens.push_back(sp_.IdToPiece(i));
    for (int i = 0; i < 4; ++i)
      ATTN_CHECK(static_cast<int>(tokens.size()) > i && tokens[i] == reserved[i], IOError,
                 "{}: id {} of the SentencePiece model must be {}", what, i, reserved[i]);
    vocab_ = Vocab::from_tokens(std::move(tokens));
  }
  std::string kind() const override { return "spm"; }
  std::vector<std::int64_t> encode(std::string_view text, Side) const override {
    std::vector<int> ids;
    auto status = sp_.Encode(text, &ids);
    ATTN_CHECK(status.ok(), ValueError, "spm: cannot encode '{}': {}", printable_excerpt(text),
               status.ToString());
    return std::vector<std::int64_t>(ids.begin(), ids.end());
  }
  std::string decode(const std::vector<std::int64_t>& ids, Side) const override {
    std::vector<int> v(ids.begin(), ids.end());
    std::string out;
    auto status = sp_.Decode(v, &out);
    ATTN_CHECK(status.ok(), ValueError, "spm: cannot decode: {}", status.ToString());
    return out;
  }
  std::vector<std::string> pieces(const std::vector<std::int64_t>& ids, Side) const override {
    return vocab_.to_tokens(ids);
  }
  const Vocab& vocab(Side) const override { return vocab_; }

 private:
  sentencepiece::SentencePieceProcessor sp_;
  Vocab vocab_;
};

// The sentences, one after another, for SentencePiece's trainer.
class Sentences : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(const std::vector<std::string>& s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& s_;
  std::size_t i_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> word_tokenizer(Vocab source, Vocab target) {
  return std::make_unique<WordTokenizer>(std::move(source), std::move(target));
}

std::unique_ptr<Tokenizer> sentencepiece_tokenizer(const std::string& model_bytes,
                                                   const std::string& what) {
  return std::make_unique<SentencePieceTokenizer>(model_bytes, what);
}

std::string train_sentencepiece(const std::vector<std::string>& sentences,
                                const SentencePieceOptions& o, std::uint64_t seed) {
  ATTN_CHECK(o.model_type == "unigram" || o.model_type == "bpe", ValueError,
             "spm: model type '{}' is not unigram or bpe", o.model_type);
  ATTN_CHECK(!sentences.empty(), ValueError, "spm: no sentences to train on");
  const std::string args = fmt::format(
      "--vocab_size={} --model_type={} --character_coverage=1.0 --unk_id=0 --pad_id=1 "
      "--bos_id=2 --eos_id=3 --unk_piece=<unk> --pad_piece=<pad> --bos_piece=<bos> "
      "--eos_piece=<eos> --input_sentence_size=0 --shuffle_input_sentence=false "
      "--num_threads=1 --max_sentence_length=65536 --minloglevel=2",
      o.vocab_size, o.model_type);
  // The trainer's seed is process-wide; one training at a time.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(seed & 0xffffffffu));
  Sentences it(sentences);
  std::string model;
  // SentencePiece logs its whole command line to stderr before it reads
  // --minloglevel; stderr is closed over the call (its errors come back in
  // the status, which the message below carries).
  struct QuietStderr {
    int saved = ::dup(STDERR_FILENO);
    QuietStderr() {
      int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (saved >= 0 && null >= 0) ::dup2(null, STDERR_FILENO);
      if (null >= 0) ::close(null);
    }
    ~QuietStderr() {
      if (saved >= 0) {
        ::dup2(saved, STDERR_FILENO);
        ::close(saved);
      }
    }
  };
  sentencepiece::util::Status status;
  {
    QuietStderr quiet;
    status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  }
  if (!status.ok()) {
    // "./src/trainer_interface.cc(660) [(cond)] Vocabulary size too high ...":
    // the part after the source location is the reason.
    std::string why(status.message());
    const std::size_t bracket = why.rfind("] ");
    if (bracket != std::string::npos) why = why.substr(bracket + 2);
    throw ValueError(
        fmt::format("spm: cannot train a vocabulary of {} pieces on the training "
                    "pairs: {}",
                    o.vocab_size, printable_excerpt(why, 300)));
  }
  return model;
}

}  // namespace attn::data
