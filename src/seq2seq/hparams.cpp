#include "attn/seq2seq/hparams.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <type_traits>

#include <fmt/ranges.h>
#include "attn/core/error.h"

namespace attn::seq2seq {

namespace {

// A path of member pointers into RunSpec: Member<&RunSpec::model,
// &ModelConfig::num_steps>::of(run) is run.model.num_steps.
template <auto... Ms>
struct Member;
template <auto M>
struct Member<M> {
  template <class T>
  static auto& of(T& t) {
    return t.*M;
  }
};
template <auto M, auto... Rest>
struct Member<M, Rest...> {
  template <class T>
  static auto& of(T& t) {
    return Member<Rest...>::of(t.*M);
  }
};

template <auto... Ms>
HValue get_member(const RunSpec& run) {
  const auto& v = Member<Ms...>::of(run);
  using V = std::decay_t<decltype(v)>;
  if constexpr (std::is_same_v<V, bool>)
    return v;
  else if constexpr (std::is_same_v<V, std::uint64_t>)
    return v;
  else if constexpr (std::is_integral_v<V>)
    return static_cast<std::int64_t>(v);
  else if constexpr (std::is_floating_point_v<V>)
    return static_cast<double>(v);
  else if constexpr (std::is_enum_v<V>)
    return std::string(enum_name(v));
  else
    return std::string(v);
}

template <auto... Ms>
void set_member(RunSpec& run, const HValue& value) {
  auto& v = Member<Ms...>::of(run);
  using V = std::decay_t<decltype(v)>;
  if constexpr (std::is_same_v<V, bool>)
    v = std::get<bool>(value);
  else if constexpr (std::is_same_v<V, std::uint64_t>)
    v = std::get<std::uint64_t>(value);
  else if constexpr (std::is_integral_v<V>)
    v = static_cast<V>(std::get<std::int64_t>(value));
  else if constexpr (std::is_floating_point_v<V>)
    v = static_cast<V>(std::get<double>(value));
  else if constexpr (std::is_enum_v<V>)
    v = parse_enum<V>(std::get<std::string>(value));
  else
    v = std::get<std::string>(value);
}

#define ATTN_MEMBER(...) &get_member<__VA_ARGS__>, &set_member<__VA_ARGS__>

using R = RunSpec;
using M = ModelConfig;
using T = nn::TransformerConfig;
using D = DataSpec;
using O = TrainOptions;
constexpr double kMaxU64 = 18446744073709551615.0;

// The table. Rows of a group appear in config.json and the checkpoint in
// this order. Columns: name, group, type, lo, hi, on resume, flag, help,
// flag name (when not the name's), choices (text), where it lives, default
// (as format_hvalue writes it: the struct's initializer, which
// tests/seq2seq/hparams_test.cpp holds to it).
// clang-format off
constexpr HParam kRows[] = {
    // ---- the model: config.json ----
    {"architecture", HGroup::model, HType::text, 0, 0, OnResume::fixed, HFlag::command,
     "transformer: d2l's Transformer (10.7); bahdanau: d2l's GRU encoder-decoder with additive "
     "attention (10.4; reads --embed-size, --num-hiddens, --num-layers, --dropout)", "--model",
     "transformer|bahdanau", ATTN_MEMBER(&R::model, &M::architecture), "transformer"},
    {"src_vocab_size", HGroup::model, HType::integer, 4, 1e8, OnResume::fixed, HFlag::none,
     "Source vocabulary size (from the data)", {}, {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::src_vocab_size), "0"},
    {"tgt_vocab_size", HGroup::model, HType::integer, 4, 1e8, OnResume::fixed, HFlag::none,
     "Target vocabulary size (from the data)", {}, {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::tgt_vocab_size), "0"},
    {"num_hiddens", HGroup::model, HType::integer, 1, 65536, OnResume::fixed, HFlag::command,
     "Model width", {}, {}, ATTN_MEMBER(&R::model, &M::transformer, &T::num_hiddens), "32"},
    {"num_layers", HGroup::model, HType::integer, 1, 64, OnResume::fixed, HFlag::command,
     "Encoder and decoder blocks", {}, {}, ATTN_MEMBER(&R::model, &M::transformer, &T::num_layers), "2"},
    {"num_heads", HGroup::model, HType::integer, 1, 1024, OnResume::fixed, HFlag::command,
     "Attention heads (must divide --num-hiddens)", {}, {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::num_heads), "4"},
    {"ffn_num_hiddens", HGroup::model, HType::integer, 1, 1 << 20, OnResume::fixed, HFlag::command,
     "Hidden width of the position-wise FFN", {}, {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::ffn_num_hiddens), "64"},
    {"dropout", HGroup::model, HType::real, 0, 0.99, OnResume::fixed, HFlag::command,
     "Dropout probability", {}, {}, ATTN_MEMBER(&R::model, &M::transformer, &T::dropout), "0.1"},
    {"max_len", HGroup::model, HType::integer, 2, 65536, OnResume::fixed, HFlag::none,
     "Positions of the positional encoding (the longest sentence the model reads)", {}, {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::max_len), "1000"},
    {"use_bias", HGroup::model, HType::boolean, 0, 0, OnResume::fixed, HFlag::none,
     "Biases in the attention projections (d2l: false)", {}, {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::use_bias), "false"},
    {"positions", HGroup::model, HType::text, 0, 0, OnResume::fixed, HFlag::command,
     "Positions of the Transformer: sinusoidal (d2l's, added to the embeddings), learned "
     "(a learned table added instead), rotary (queries and keys turned by position), alibi "
     "(a per-head linear bias by distance), relative (T5's learned bias per bucket of "
     "distance); the last three in self-attention only", {},
     "sinusoidal|learned|rotary|alibi|relative",
     ATTN_MEMBER(&R::model, &M::transformer, &T::positions), "sinusoidal"},
    {"num_kv_heads", HGroup::model, HType::integer, 0, 1024, OnResume::fixed, HFlag::command,
     "Key and value heads of every attention, a divisor of --num-heads (1: multi-query; "
     "fewer: grouped-query, a smaller decoding cache); 0: --num-heads", {}, {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::num_kv_heads), "0"},
    {"embed_size", HGroup::model, HType::integer, 1, 65536, OnResume::fixed, HFlag::command,
     "Embedding size of --model bahdanau (the Transformer's is --num-hiddens)", {}, {},
     ATTN_MEMBER(&R::model, &M::embed_size), "32"},
    {"num_steps", HGroup::model, HType::integer, 2, 1024, OnResume::fixed, HFlag::command,
     "Tokens per sentence after cutting or padding (d2l's pipeline); also the longest "
     "translation", {}, {}, ATTN_MEMBER(&R::model, &M::num_steps), "10"},
    {"tokenizer", HGroup::model, HType::text, 0, 0, OnResume::fixed, HFlag::command,
     "word: d2l's lowercased word vocabularies; spm: a SentencePiece model of --vocab-size "
     "pieces, trained on the training pairs, text kept as written", "--vocab", "word|spm",
     ATTN_MEMBER(&R::model, &M::tokenizer), "word"},
    {"source_lang", HGroup::model, HType::text, 0, 0, OnResume::fixed, HFlag::command,
     "The language the model reads, an ISO 639-1 code (en for the bundled corpus, fr with "
     "--reverse; \"\": not recorded)", {}, "*", ATTN_MEMBER(&R::model, &M::source_lang), ""},
    {"target_lang", HGroup::model, HType::text, 0, 0, OnResume::fixed, HFlag::command,
     "The language the model writes, an ISO 639-1 code (fr for the bundled corpus, en with "
     "--reverse; \"\": not recorded)", {}, "*", ATTN_MEMBER(&R::model, &M::target_lang), ""},
    // ---- the data: the checkpoint ----
    {"path", HGroup::data, HType::text, 0, 0, OnResume::may_change, HFlag::command,
     "Parallel corpus, 'source<TAB>target' per line (English<TAB>French in the bundled one), "
     "plain or gzip", "--data", {},
     ATTN_MEMBER(&R::data, &D::path), ""},
    {"num_examples", HGroup::data, HType::integer, 0, 1e8, OnResume::fixed, HFlag::command,
     "Lines of the corpus to use (d2l reads this + 1); 0: all", {}, {},
     ATTN_MEMBER(&R::data, &D::num_examples), "600"},
    {"min_freq", HGroup::data, HType::integer, 1, 1e6, OnResume::fixed, HFlag::command,
     "Words seen fewer times become <unk> (--vocab word)", {}, {},
     ATTN_MEMBER(&R::data, &D::min_freq), "2"},
    {"valid_fraction", HGroup::data, HType::real, 0, 0.9, OnResume::fixed, HFlag::command,
     "d2l-style: the last fraction of the pairs is left out of training (--vocab word)", {}, {},
     ATTN_MEMBER(&R::data, &D::valid_fraction), "0"},
    {"num_pairs", HGroup::data, HType::integer, 1, 2147483648.0, OnResume::fixed, HFlag::none,
     "Training pairs (from the data)", {}, {}, ATTN_MEMBER(&R::data, &D::num_pairs), "0"},
    {"valid_size", HGroup::data, HType::integer, 0, 1e6, OnResume::fixed, HFlag::command,
     "Pairs held out for validation: a random sample, no source sentence of it in training",
     {}, {}, ATTN_MEMBER(&R::data, &D::valid_size), "0"},
    {"test_size", HGroup::data, HType::integer, 0, 1e6, OnResume::fixed, HFlag::command,
     "Pairs held out for the test, likewise (attn evaluate --split test)", {}, {},
     ATTN_MEMBER(&R::data, &D::test_size), "0"},
    {"valid_data", HGroup::data, HType::text, 0, 0, OnResume::may_change, HFlag::command,
     "A corpus to validate on instead of --valid-size pairs of --data", {}, "*",
     ATTN_MEMBER(&R::data, &D::valid_data), ""},
    {"test_data", HGroup::data, HType::text, 0, 0, OnResume::may_change, HFlag::command,
     "A corpus to test on instead of --test-size pairs of --data", {}, "*",
     ATTN_MEMBER(&R::data, &D::test_data), ""},
    {"vocab_size", HGroup::data, HType::integer, 16, 1e6, OnResume::fixed, HFlag::command,
     "Pieces of the SentencePiece model (--vocab spm), shared by both languages", {}, {},
     ATTN_MEMBER(&R::data, &D::vocab_size), "8000"},
    {"spm_type", HGroup::data, HType::text, 0, 0, OnResume::fixed, HFlag::command,
     "The SentencePiece algorithm (--vocab spm)", {}, "unigram|bpe",
     ATTN_MEMBER(&R::data, &D::spm_type), "unigram"},
    {"max_length", HGroup::data, HType::integer, 2, 1024, OnResume::fixed, HFlag::command,
     "Training pairs with a side longer than this many tokens (with <eos>) are dropped and "
     "counted (--vocab spm or --batch-tokens)", {}, {}, ATTN_MEMBER(&R::data, &D::max_length), "128"},
    {"batch_tokens", HGroup::data, HType::integer, 0, 1 << 20, OnResume::fixed, HFlag::command,
     "Tokens a batch holds, padding included, pairs of similar length together (0: "
     "--batch-size pairs, d2l's way)", {}, {}, ATTN_MEMBER(&R::data, &D::batch_tokens), "0"},
    {"reverse", HGroup::data, HType::boolean, 0, 0, OnResume::fixed, HFlag::command,
     "Translate the corpus's second column into its first (French to English on the bundled "
     "corpus); --valid-data and --test-data are read the same way", {}, {},
     ATTN_MEMBER(&R::data, &D::reverse), "false"},
    // ---- training: the checkpoint ----
    {"num_epochs", HGroup::train, HType::integer, 1, 1e6, OnResume::may_change, HFlag::command,
     "Passes over the data (with --resume: to train longer)", "--epochs", {},
     ATTN_MEMBER(&R::train, &O::num_epochs), "200"},
    {"lr", HGroup::train, HType::real, 1e-9, 10, OnResume::fixed, HFlag::command,
     "Adam learning rate (the peak, with --lr-warmup)", {}, {}, ATTN_MEMBER(&R::train, &O::lr), "0.005"},
    {"batch_size", HGroup::train, HType::integer, 1, 1 << 20, OnResume::fixed, HFlag::command,
     "Sentence pairs per step (without --batch-tokens)", {}, {},
     ATTN_MEMBER(&R::train, &O::batch_size), "64"},
    {"accum_steps", HGroup::train, HType::integer, 1, 4096, OnResume::may_change,
     HFlag::command,
     "Split each batch into this many micro-batches, their gradients added in order before "
     "the step: a large batch on a small machine. One process with K equals mpirun -np K bit "
     "for bit (docs/design/data-parallel.md)", {}, {},
     ATTN_MEMBER(&R::train, &O::accum_steps), "1"},
    {"grad_clip", HGroup::train, HType::real, 1e-9, 1e6, OnResume::fixed, HFlag::command,
     "Clip the gradients' global L2 norm to this (d2l: 1)", {}, {},
     ATTN_MEMBER(&R::train, &O::grad_clip), "1"},
    {"seed", HGroup::train, HType::unsigned64, 0, kMaxU64, OnResume::fixed, HFlag::global,
     "Seed for every random draw", "--seed", {}, ATTN_MEMBER(&R::train, &O::seed), "0"},
    {"embedding_init", HGroup::train, HType::text, 0, 0, OnResume::fixed, HFlag::command,
     "How the embeddings start: normal, N(0, 1) (d2l's, PyTorch's default); scaled, "
     "N(0, 1/num_hiddens), so that after the sqrt(num_hiddens) factor a token's input has the "
     "positional encoding's scale (Vaswani et al.)", {}, "normal|scaled",
     ATTN_MEMBER(&R::train, &O::embedding_init), "normal"},
    {"loss", HGroup::train, HType::text, 0, 0, OnResume::fixed, HFlag::command,
     "d2l: d2l's MaskedSoftmaxCELoss summed over the batch (the d2l preset's printed loss is "
     "this, about num_steps times below the per-token cross-entropy); token: the mean "
     "cross-entropy per target token", {}, "d2l|token", ATTN_MEMBER(&R::train, &O::loss), "d2l"},
    {"label_smoothing", HGroup::train, HType::real, 0, 0.99, OnResume::fixed, HFlag::command,
     "Label smoothing (--loss token): the target is (1 - e) onehot + e / vocabulary", {}, {},
     ATTN_MEMBER(&R::train, &O::label_smoothing), "0"},
    {"adam_beta1", HGroup::train, HType::real, 0, 0.999999, OnResume::fixed, HFlag::command,
     "Adam's beta1", {}, {}, ATTN_MEMBER(&R::train, &O::adam_beta1), "0.9"},
    {"adam_beta2", HGroup::train, HType::real, 0, 0.999999, OnResume::fixed, HFlag::command,
     "Adam's beta2 (the Transformer's: 0.98)", {}, {}, ATTN_MEMBER(&R::train, &O::adam_beta2), "0.999"},
    {"adam_eps", HGroup::train, HType::real, 1e-12, 1, OnResume::fixed, HFlag::command,
     "Adam's epsilon (the Transformer's: 1e-9)", {}, {}, ATTN_MEMBER(&R::train, &O::adam_eps), "1e-08"},
    {"lr_schedule", HGroup::train, HType::text, 0, 0, OnResume::fixed, HFlag::command,
     "constant: lr after the warmup; inverse-sqrt: lr * sqrt(warmup / step) after it", {},
     "constant|inverse-sqrt", ATTN_MEMBER(&R::train, &O::lr_schedule), "constant"},
    {"lr_warmup", HGroup::train, HType::integer, 0, 1e8, OnResume::fixed, HFlag::command,
     "Steps over which the learning rate rises linearly to --lr", {}, {},
     ATTN_MEMBER(&R::train, &O::lr_warmup), "0"},
    {"valid_freq", HGroup::train, HType::integer, 0, 1e9, OnResume::fixed, HFlag::command,
     "Validate every N steps: loss, perplexity and BLEU on the validation pairs (0: never)", {},
     {}, ATTN_MEMBER(&R::train, &O::valid_freq), "0"},
    {"early_stopping", HGroup::train, HType::integer, 0, 1e6, OnResume::fixed, HFlag::command,
     "Stop after N validations without improvement (0: never)", {}, {},
     ATTN_MEMBER(&R::train, &O::early_stopping), "0"},
    {"valid_metric", HGroup::train, HType::text, 0, 0, OnResume::fixed, HFlag::command,
     "What makes a validation better, and the kept model the best: bleu or loss", {},
     "bleu|loss", ATTN_MEMBER(&R::train, &O::valid_metric), "bleu"},
    {"time_limit", HGroup::train, HType::real, 0, 1e7, OnResume::may_change, HFlag::command,
     "Minutes of training over all resumes, then the run ends as at its last epoch (0: none)",
     {}, {}, ATTN_MEMBER(&R::train, &O::time_limit), "0"},
    {"precision", HGroup::train, HType::text, 0, 0, OnResume::may_change, HFlag::command,
     "Matrix products in f32 (the reference) or bf16: operands rounded to bfloat16, products "
     "accumulated in f32; weights, optimizer, gradients, norms, softmax, loss and attention stay "
     "f32. Needs AVX-512 BF16 (else f32, with a warning)", {}, "f32|bf16",
     ATTN_MEMBER(&R::train, &O::precision), "f32"},
};
// clang-format on
static_assert(std::size(kRows) == kNumHParams, "one row per HP, in the enum's order");

#undef ATTN_MEMBER

bool is_number(HType t) {
  return t == HType::integer || t == HType::unsigned64 || t == HType::real;
}

}  // namespace

const std::array<HParam, kNumHParams>& hparams() {
  static const std::array<HParam, kNumHParams> table = [] {
    std::array<HParam, kNumHParams> a{};
    for (std::size_t i = 0; i < kNumHParams; ++i) a[i] = kRows[i];
    return a;
  }();
  return table;
}

const HParam& hparam(HP id) { return hparams()[static_cast<std::size_t>(id)]; }

const HParam* find_hparam(std::string_view name) {
  for (const auto& p : hparams())
    if (p.name == name) return &p;
  return nullptr;
}

std::string flag_of(const HParam& p) {
  if (!p.flag_name.empty()) return std::string(p.flag_name);
  std::string f = "--" + std::string(p.name);
  for (char& c : f)
    if (c == '_') c = '-';
  return f;
}

std::string range_of(const HParam& p) {
  if (!is_number(p.type)) return "";
  if (p.type == HType::unsigned64) return "[0, 2^64)";
  if (p.type == HType::integer)
    return fmt::format("[{}, {}]", static_cast<std::int64_t>(p.lo),
                       static_cast<std::int64_t>(p.hi));
  return fmt::format("[{}, {}]", p.lo, p.hi);
}

std::string format_hvalue(const HValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using V = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<V, bool>)
          return x ? "true" : "false";
        else if constexpr (std::is_same_v<V, std::string>)
          return x;
        else
          return fmt::format("{}", x);
      },
      v);
}

void check_hvalue(const HParam& p, const HValue& v) {
  const std::string flag = flag_of(p);
  auto out_of_range = [&](const std::string& shown) {
    return ValueError(fmt::format("{}: {} is not in {}", flag, shown, range_of(p)));
  };
  switch (p.type) {
    case HType::integer: {
      ATTN_CHECK(std::holds_alternative<std::int64_t>(v), ValueError, "{}: expected an integer",
                 flag);
      auto x = std::get<std::int64_t>(v);
      if (static_cast<double>(x) < p.lo || static_cast<double>(x) > p.hi)
        throw out_of_range(std::to_string(x));
      break;
    }
    case HType::unsigned64:
      ATTN_CHECK(std::holds_alternative<std::uint64_t>(v), ValueError,
                 "{}: expected a whole number in [0, 2^64)", flag);
      break;
    case HType::real: {
      ATTN_CHECK(std::holds_alternative<double>(v), ValueError, "{}: expected a number", flag);
      double x = std::get<double>(v);
      if (!(x >= p.lo && x <= p.hi)) throw out_of_range(fmt::format("{}", x));
      break;
    }
    case HType::text: {
      ATTN_CHECK(std::holds_alternative<std::string>(v), ValueError, "{}: expected a text", flag);
      const std::string& t = std::get<std::string>(v);
      if (p.choices.empty()) {
        ATTN_CHECK(!t.empty(), ValueError, "{}: expected a non-empty text", flag);
      } else if (p.choices != "*") {
        bool known = false;
        std::string_view rest = p.choices;
        for (;;) {
          const std::size_t bar = rest.find('|');
          known = known || rest.substr(0, bar) == t;
          if (bar == std::string_view::npos) break;
          rest.remove_prefix(bar + 1);
        }
        std::string shown(p.choices);
        if (!shown.empty() && shown[0] == '|') shown = "'' (none)" + shown;
        for (char& c : shown)
          if (c == '|') c = ',';
        ATTN_CHECK(known, ValueError, "{}: '{}' is not one of {}", flag, t, shown);
      }
      break;
    }
    case HType::boolean:
      ATTN_CHECK(std::holds_alternative<bool>(v), ValueError, "{}: expected true or false", flag);
      break;
  }
}

HValue parse_hvalue(const HParam& p, const std::string& text) {
  const std::string flag = flag_of(p);
  const char* b = text.data();
  const char* e = text.data() + text.size();
  HValue v;
  switch (p.type) {
    case HType::integer: {
      std::int64_t x = 0;
      auto [end, ec] = std::from_chars(b, e, x);
      if (ec == std::errc() && end == e) {
        v = x;
        break;
      }
      double d = 0;
      auto [dend, dec] = std::from_chars(b, e, d);
      bool whole = dec == std::errc() && dend == e && std::isfinite(d) && d == std::floor(d);
      if (whole || ec == std::errc::result_out_of_range)
        throw ValueError(fmt::format("{}: {} is not in {}", flag, text, range_of(p)));
      throw ValueError(fmt::format("{}: '{}' is not an integer", flag, text));
    }
    case HType::unsigned64: {
      std::uint64_t x = 0;
      auto [end, ec] = std::from_chars(b, e, x);
      ATTN_CHECK(ec == std::errc() && end == e && !text.empty(), ValueError,
                 "{}: '{}' is not a whole number in [0, 2^64)", flag, text);
      v = x;
      break;
    }
    case HType::real: {
      double x = 0;
      auto [end, ec] = std::from_chars(b, e, x);
      ATTN_CHECK(
          (ec == std::errc() || ec == std::errc::result_out_of_range) && end == e && !text.empty(),
          ValueError, "{}: '{}' is not a number", flag, text);
      if (ec == std::errc::result_out_of_range || !std::isfinite(x))
        throw ValueError(fmt::format("{}: {} is not in {}", flag, text, range_of(p)));
      v = x;
      break;
    }
    case HType::text: v = text; break;
    case HType::boolean:
      ATTN_CHECK(text == "true" || text == "false", ValueError, "{}: '{}' is not true or false",
                 flag, text);
      v = text == "true";
      break;
  }
  check_hvalue(p, v);
  return v;
}

void validate_model(const ModelConfig& m) {
  const nn::TransformerConfig& t = m.transformer;
  for (const std::string* lang : {&m.source_lang, &m.target_lang})
    ATTN_CHECK(lang->empty() || is_language_code(*lang), ValueError,
               "{} '{}' is not an ISO 639-1 code (two lowercase letters, as en or fr)",
               lang == &m.source_lang ? "source_lang" : "target_lang",
               data::printable_excerpt(*lang));
  ATTN_CHECK(m.source_lang.empty() || m.source_lang != m.target_lang, ValueError,
             "source_lang and target_lang are both '{}'", m.source_lang);
  ATTN_CHECK(m.architecture != Architecture::transformer || t.num_hiddens % t.num_heads == 0,
             ValueError, "num_hiddens {} is not divisible by num_heads {}", t.num_hiddens,
             t.num_heads);
  if (m.architecture == Architecture::transformer) t.validate_heads();
  ATTN_CHECK(m.num_steps <= t.max_len, ValueError,
             "num_steps {} is more than max_len {} (the positional encoding's positions)",
             m.num_steps, t.max_len);
  ATTN_CHECK(t.max_len * t.num_hiddens <= kMaxPositionalEntries, ValueError,
             "max_len x num_hiddens = {} x {} positional-encoding entries, more than the limit of "
             "{}",
             t.max_len, t.num_hiddens, kMaxPositionalEntries);
}

bool is_bundled_corpus(const std::string& path) {
  const std::filesystem::path p(path);
  return p.parent_path().filename() == "fra-eng" &&
         (p.filename() == "fra.txt.gz" || p.filename() == "fra.txt");
}

void default_languages(RunSpec& run) {
  if (!run.model.source_lang.empty() || !run.model.target_lang.empty() ||
      !is_bundled_corpus(run.data.path))
    return;
  run.model.source_lang = run.data.reverse ? "fr" : "en";
  run.model.target_lang = run.data.reverse ? "en" : "fr";
}

bool is_language_code(std::string_view code) {
  return code.size() == 2 && code[0] >= 'a' && code[0] <= 'z' && code[1] >= 'a' && code[1] <= 'z';
}

void validate(const RunSpec& run) {
  for (const auto& p : hparams())
    if (p.flag != HFlag::none) check_hvalue(p, p.get(run));
  validate_model(run.model);
}

nlohmann::ordered_json hparams_to_json(const RunSpec& run, HGroup group) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& p : hparams()) {
    if (p.group != group) continue;
    std::visit([&](const auto& x) { j[std::string(p.name)] = x; }, p.get(run));
  }
  return j;
}

void hparams_from_json(const io::JsonObject& o, HGroup group, RunSpec& run) {
  for (const auto& p : hparams()) {
    if (p.group != group) continue;
    const std::string key(p.name);
    // Added after format_version 1: a file without it means its default
    // (d2l's word vocabularies), so that files of d2l exports stay valid.
    if (key == "tokenizer" && !o.has(key)) continue;
    // Added with the Bahdanau model: a file without them is a Transformer's.
    if ((key == "architecture" || key == "embed_size") && !o.has(key)) continue;
    // Added later still: a checkpoint without it started as d2l's did.
    if (key == "embedding_init" && !o.has(key)) continue;
    if (key == "precision" && !o.has(key)) continue;  // f32, as every run before bf16
    if (key == "accum_steps" && !o.has(key)) continue;  // one micro-batch, as before it
    // Added with relative positions: d2l's sinusoids and full heads before them.
    if ((key == "positions" || key == "num_kv_heads") && !o.has(key)) continue;
    // Added with the languages: a file without them records none, and read
    // its corpus as written.
    if ((key == "source_lang" || key == "target_lang" || key == "reverse") && !o.has(key)) continue;
    HValue v;
    switch (p.type) {
      case HType::integer:
        v = o.integer(key, static_cast<std::int64_t>(p.lo), static_cast<std::int64_t>(p.hi));
        break;
      case HType::unsigned64: v = o.unsigned64(key); break;
      case HType::real: v = o.number(key, p.lo, p.hi); break;
      case HType::text: v = o.string(key, /*allow_empty=*/true); break;
      case HType::boolean: v = o.boolean(key); break;
    }
    try {
      check_hvalue(p, v);
    } catch (const ValueError& e) {
      throw IOError(fmt::format("{}: {}: {}", o.what(), o.name(key), e.what()));
    }
    p.set(run, v);
  }
}

nlohmann::ordered_json hparams_to_flat_json(const RunSpec& run) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& p : hparams()) {
    if (p.flag == HFlag::none) continue;
    std::visit([&](const auto& x) { j[std::string(p.name)] = x; }, p.get(run));
  }
  return j;
}

std::vector<std::string> hparams_from_flat_json(const io::JsonObject& o, RunSpec& run) {
  std::vector<std::string> names;
  for (const auto& [key, value] : o.json().items()) {
    const HParam* p = find_hparam(key);
    ATTN_CHECK(p != nullptr && p->flag != HFlag::none, IOError,
               "{}: \"{}\" is not a hyperparameter (attn train --dump-config lists them)", o.what(),
               io::printable_excerpt(key));
    HValue v;
    switch (p->type) {
      case HType::integer:
        v = o.integer(key, static_cast<std::int64_t>(p->lo), static_cast<std::int64_t>(p->hi));
        break;
      case HType::unsigned64: v = o.unsigned64(key); break;
      case HType::real: v = o.number(key, p->lo, p->hi); break;
      case HType::text: v = o.string(key, /*allow_empty=*/true); break;
      case HType::boolean: v = o.boolean(key); break;
    }
    try {
      check_hvalue(*p, v);
    } catch (const ValueError& e) {
      throw IOError(fmt::format("{}: {}", o.what(), e.what()));
    }
    p->set(run, v);
    names.push_back(key);
  }
  return names;
}

}  // namespace attn::seq2seq
