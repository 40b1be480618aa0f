#include "attn/seq2seq/hparams.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>

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
// this order.
constexpr HParam kRows[] = {
    {"src_vocab_size",
     HGroup::model,
     HType::integer,
     4,
     1e8,
     OnResume::fixed,
     HFlag::none,
     "Source vocabulary size (from the data)",
     {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::src_vocab_size)},
    {"tgt_vocab_size",
     HGroup::model,
     HType::integer,
     4,
     1e8,
     OnResume::fixed,
     HFlag::none,
     "Target vocabulary size (from the data)",
     {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::tgt_vocab_size)},
    {"num_hiddens",
     HGroup::model,
     HType::integer,
     1,
     65536,
     OnResume::fixed,
     HFlag::command,
     "Model width",
     {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::num_hiddens)},
    {"num_layers",
     HGroup::model,
     HType::integer,
     1,
     64,
     OnResume::fixed,
     HFlag::command,
     "Encoder and decoder blocks",
     {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::num_layers)},
    {"num_heads",
     HGroup::model,
     HType::integer,
     1,
     1024,
     OnResume::fixed,
     HFlag::command,
     "Attention heads (must divide --num-hiddens)",
     {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::num_heads)},
    {"ffn_num_hiddens",
     HGroup::model,
     HType::integer,
     1,
     1 << 20,
     OnResume::fixed,
     HFlag::command,
     "Hidden width of the position-wise FFN",
     {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::ffn_num_hiddens)},
    {"dropout",
     HGroup::model,
     HType::real,
     0,
     0.99,
     OnResume::fixed,
     HFlag::command,
     "Dropout probability",
     {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::dropout)},
    {"max_len",
     HGroup::model,
     HType::integer,
     2,
     65536,
     OnResume::fixed,
     HFlag::none,
     "Positions of the positional encoding (max(1000, num_steps))",
     {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::max_len)},
    {"use_bias",
     HGroup::model,
     HType::boolean,
     0,
     0,
     OnResume::fixed,
     HFlag::none,
     "Biases in the attention projections (d2l: false)",
     {},
     ATTN_MEMBER(&R::model, &M::transformer, &T::use_bias)},
    {"num_steps",
     HGroup::model,
     HType::integer,
     2,
     1024,
     OnResume::fixed,
     HFlag::command,
     "Tokens per sentence after cutting or padding; also the longest translation",
     {},
     ATTN_MEMBER(&R::model, &M::num_steps)},
    {"path", HGroup::data, HType::text, 0, 0, OnResume::may_change, HFlag::command,
     "Parallel corpus, 'english<TAB>french' per line, plain or gzip", "--data",
     ATTN_MEMBER(&R::data, &D::path)},
    {"num_examples",
     HGroup::data,
     HType::integer,
     0,
     1e8,
     OnResume::fixed,
     HFlag::command,
     "Lines of the corpus to use (d2l reads this + 1); 0: all",
     {},
     ATTN_MEMBER(&R::data, &D::num_examples)},
    {"min_freq",
     HGroup::data,
     HType::integer,
     1,
     1e6,
     OnResume::fixed,
     HFlag::command,
     "Words seen fewer times become <unk>",
     {},
     ATTN_MEMBER(&R::data, &D::min_freq)},
    {"valid_fraction",
     HGroup::data,
     HType::real,
     0,
     0.9,
     OnResume::fixed,
     HFlag::command,
     "Fraction of pairs held out (from the end)",
     {},
     ATTN_MEMBER(&R::data, &D::valid_fraction)},
    {"num_pairs",
     HGroup::data,
     HType::integer,
     1,
     2147483648.0,
     OnResume::fixed,
     HFlag::none,
     "Training pairs (from the data)",
     {},
     ATTN_MEMBER(&R::data, &D::num_pairs)},
    {"num_epochs", HGroup::train, HType::integer, 1, 1e6, OnResume::may_change, HFlag::command,
     "Passes over the data (with --resume: to train longer)", "--epochs",
     ATTN_MEMBER(&R::train, &O::num_epochs)},
    {"lr",
     HGroup::train,
     HType::real,
     1e-9,
     10,
     OnResume::fixed,
     HFlag::command,
     "Adam learning rate",
     {},
     ATTN_MEMBER(&R::train, &O::lr)},
    {"batch_size",
     HGroup::train,
     HType::integer,
     1,
     1 << 20,
     OnResume::fixed,
     HFlag::command,
     "Sentence pairs per step",
     {},
     ATTN_MEMBER(&R::train, &O::batch_size)},
    {"grad_clip",
     HGroup::train,
     HType::real,
     1e-9,
     1e6,
     OnResume::fixed,
     HFlag::command,
     "Clip the gradients' global L2 norm to this (d2l: 1)",
     {},
     ATTN_MEMBER(&R::train, &O::grad_clip)},
    {"seed", HGroup::train, HType::unsigned64, 0, kMaxU64, OnResume::fixed, HFlag::global,
     "Seed for every random draw", "--seed", ATTN_MEMBER(&R::train, &O::seed)},
};
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
    case HType::text:
      ATTN_CHECK(std::holds_alternative<std::string>(v) && !std::get<std::string>(v).empty(),
                 ValueError, "{}: expected a non-empty text", flag);
      break;
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
  ATTN_CHECK(t.num_hiddens % t.num_heads == 0, ValueError,
             "num_hiddens {} is not divisible by num_heads {}", t.num_hiddens, t.num_heads);
  ATTN_CHECK(m.num_steps <= t.max_len, ValueError,
             "num_steps {} is more than max_len {} (the positional encoding's positions)",
             m.num_steps, t.max_len);
  ATTN_CHECK(t.max_len * t.num_hiddens <= kMaxPositionalEntries, ValueError,
             "max_len x num_hiddens = {} x {} positional-encoding entries, more than the limit of "
             "{}",
             t.max_len, t.num_hiddens, kMaxPositionalEntries);
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
    HValue v;
    switch (p.type) {
      case HType::integer:
        v = o.integer(key, static_cast<std::int64_t>(p.lo), static_cast<std::int64_t>(p.hi));
        break;
      case HType::unsigned64: v = o.unsigned64(key); break;
      case HType::real: v = o.number(key, p.lo, p.hi); break;
      case HType::text: v = o.string(key); break;
      case HType::boolean: v = o.boolean(key); break;
    }
    p.set(run, v);
  }
}

}  // namespace attn::seq2seq
