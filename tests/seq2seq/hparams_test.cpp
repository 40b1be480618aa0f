// The hyperparameter table (seq2seq/hparams.h): one row per enum value, its
// ranges and parsing, the rules between values, and the JSON it drives.
#include "attn/seq2seq/hparams.h"

#include "testing.h"

// GCC 12 reports a false -Wrestrict inside std::string's assignment of a
// literal after the string was moved into (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

using namespace attn;
using namespace attn::seq2seq;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(HParams, EveryEnumValueNamesItsRow) {
  // clang-format off
  const std::vector<std::pair<HP, std::string>> ids = {
      {HP::architecture, "architecture"},
      {HP::src_vocab_size, "src_vocab_size"},
      {HP::tgt_vocab_size, "tgt_vocab_size"},
      {HP::num_hiddens, "num_hiddens"},
      {HP::num_layers, "num_layers"},
      {HP::num_heads, "num_heads"},
      {HP::ffn_num_hiddens, "ffn_num_hiddens"},
      {HP::dropout, "dropout"},
      {HP::max_len, "max_len"},
      {HP::use_bias, "use_bias"},
      {HP::positions, "positions"},
      {HP::num_kv_heads, "num_kv_heads"},
      {HP::embed_size, "embed_size"},
      {HP::num_steps, "num_steps"},
      {HP::tokenizer, "tokenizer"},
      {HP::source_lang, "source_lang"},
      {HP::target_lang, "target_lang"},
      {HP::path, "path"},
      {HP::num_examples, "num_examples"},
      {HP::min_freq, "min_freq"},
      {HP::valid_fraction, "valid_fraction"},
      {HP::num_pairs, "num_pairs"},
      {HP::valid_size, "valid_size"},
      {HP::test_size, "test_size"},
      {HP::valid_data, "valid_data"},
      {HP::test_data, "test_data"},
      {HP::vocab_size, "vocab_size"},
      {HP::spm_type, "spm_type"},
      {HP::max_length, "max_length"},
      {HP::batch_tokens, "batch_tokens"},
      {HP::reverse, "reverse"},
      {HP::num_epochs, "num_epochs"},
      {HP::lr, "lr"},
      {HP::batch_size, "batch_size"},
      {HP::accum_steps, "accum_steps"},
      {HP::grad_clip, "grad_clip"},
      {HP::seed, "seed"},
      {HP::embedding_init, "embedding_init"},
      {HP::loss, "loss"},
      {HP::label_smoothing, "label_smoothing"},
      {HP::adam_beta1, "adam_beta1"},
      {HP::adam_beta2, "adam_beta2"},
      {HP::adam_eps, "adam_eps"},
      {HP::lr_schedule, "lr_schedule"},
      {HP::lr_warmup, "lr_warmup"},
      {HP::valid_freq, "valid_freq"},
      {HP::early_stopping, "early_stopping"},
      {HP::valid_metric, "valid_metric"},
      {HP::time_limit, "time_limit"},
      {HP::precision, "precision"},
  };
  // clang-format on
  ASSERT_EQ(ids.size(), kNumHParams);
  std::set<std::string> names;
  for (const auto& [id, name] : ids) {
    EXPECT_EQ(hparam(id).name, name);
    EXPECT_TRUE(names.insert(name).second);
    EXPECT_EQ(find_hparam(name), &hparam(id));
  }
  EXPECT_EQ(flag_of(hparam(HP::num_hiddens)), "--num-hiddens");
  EXPECT_EQ(flag_of(hparam(HP::num_epochs)), "--epochs");
  EXPECT_EQ(flag_of(hparam(HP::path)), "--data");
}

TEST(HParams, DefaultsAreD2lsAndValid) {
  RunSpec run;
  run.data.path = "fra.txt";
  EXPECT_EQ(std::get<std::int64_t>(hparam(HP::num_hiddens).get(run)), 32);
  EXPECT_EQ(std::get<double>(hparam(HP::lr).get(run)), 0.005);
  EXPECT_EQ(std::get<std::int64_t>(hparam(HP::num_epochs).get(run)), 200);
  EXPECT_NO_THROW(validate(run));
  // The table's default column is the structs' member initializers, row by
  // row, and every flag row's default is in its range (the derived rows'
  // defaults, 0 before the data sets them, need not be).
  RunSpec fresh;
  for (const auto& p : hparams()) {
    EXPECT_EQ(format_hvalue(p.get(fresh)), p.default_text) << p.name;
    if (p.flag != HFlag::none && !(p.type == HType::text && p.default_text.empty())) {
      EXPECT_NO_THROW(check_hvalue(p, p.get(fresh))) << p.name;
    }
  }
  // Every row's setter writes what its getter reads.
  for (const auto& p : hparams()) {
    RunSpec r;
    HValue v = p.get(r);
    p.set(r, v);
    EXPECT_EQ(p.get(r), v) << p.name;
  }
}

TEST(HParams, ParsingAndRanges) {
  const HParam& epochs = hparam(HP::num_epochs);
  EXPECT_EQ(std::get<std::int64_t>(parse_hvalue(epochs, "12")), 12);
  EXPECT_EQ(error_of([&] { parse_hvalue(epochs, "-3"); }), "--epochs: -3 is not in [1, 1000000]");
  EXPECT_EQ(error_of([&] { parse_hvalue(epochs, "2.5"); }), "--epochs: '2.5' is not an integer");
  EXPECT_EQ(error_of([&] { parse_hvalue(epochs, "99999999999999999999"); }),
            "--epochs: 99999999999999999999 is not in [1, 1000000]");
  const HParam& lr = hparam(HP::lr);
  EXPECT_EQ(std::get<double>(parse_hvalue(lr, "0.001")), 0.001);
  EXPECT_EQ(error_of([&] { parse_hvalue(lr, "fast"); }), "--lr: 'fast' is not a number");
  EXPECT_EQ(error_of([&] { parse_hvalue(lr, "nan"); }), "--lr: nan is not in [1e-09, 10]");
  EXPECT_EQ(error_of([&] { parse_hvalue(hparam(HP::dropout), "1"); }),
            "--dropout: 1 is not in [0, 0.99]");
  EXPECT_EQ(std::get<std::uint64_t>(parse_hvalue(hparam(HP::seed), "18446744073709551615")),
            18446744073709551615ULL);
  EXPECT_EQ(format_hvalue(HValue(0.005)), "0.005");
  EXPECT_EQ(format_hvalue(HValue(true)), "true");
}

TEST(HParams, RulesBetweenValuesAreCheckedOnce) {
  RunSpec run;
  run.data.path = "x";
  run.model.transformer.num_hiddens = 30;
  run.model.transformer.num_heads = 4;
  EXPECT_EQ(error_of([&] { validate(run); }), "num_hiddens 30 is not divisible by num_heads 4");
  run = RunSpec();
  run.data.path = "x";
  run.model.num_steps = 1001;
  EXPECT_EQ(error_of([&] { validate(run); }),
            "num_steps 1001 is more than max_len 1000 (the positional encoding's positions)");
}

// A row whose member is an enum offers exactly the enum's names, in its
// order; a name reads back as its enumerator.
template <class E>
void expect_enum_row(HP id) {
  const HParam& p = hparam(id);
  EXPECT_EQ(std::string(p.choices), enum_choices<E>()) << p.name;
  for (const char* name : EnumNames<E>::names) {
    RunSpec run;
    p.set(run, parse_hvalue(p, name));
    EXPECT_EQ(std::get<std::string>(p.get(run)), name) << p.name;
  }
  EXPECT_THROW(parse_enum<E>("no such name"), ValueError);
}

TEST(HParams, EnumRowsOfferTheirEnumsNames) {
  expect_enum_row<Architecture>(HP::architecture);
  expect_enum_row<TokenizerKind>(HP::tokenizer);
  expect_enum_row<SpmType>(HP::spm_type);
  expect_enum_row<EmbeddingInit>(HP::embedding_init);
  expect_enum_row<Loss>(HP::loss);
  expect_enum_row<optim::LrSchedule>(HP::lr_schedule);
  expect_enum_row<ValidMetric>(HP::valid_metric);
  expect_enum_row<Precision>(HP::precision);
  EXPECT_EQ(error_of([] { parse_enum<Loss>("mse"); }), "unknown loss 'mse' (choices: d2l, token)");
}

TEST(HParams, ChoicesPresetsAndFlatJson) {
  EXPECT_EQ(error_of([] { parse_hvalue(hparam(HP::tokenizer), "bpe"); }),
            "--vocab: 'bpe' is not one of word,spm");
  EXPECT_EQ(std::get<std::string>(parse_hvalue(hparam(HP::valid_data), "")), "");
  EXPECT_EQ(error_of([] { parse_hvalue(hparam(HP::lr_schedule), "cosine"); }),
            "--lr-schedule: 'cosine' is not one of constant,inverse-sqrt");
  // Every preset is valid; d2l's is the defaults.
  for (const auto& name : preset_names()) {
    RunSpec run = preset_run(name);
    run.data.path = "x";
    run.model.transformer.max_len = std::max<std::int64_t>(1000, run.data.max_length);
    EXPECT_NO_THROW(validate(run)) << name;
  }
  EXPECT_TRUE(preset("d2l").empty());
  EXPECT_THROW(preset("big"), ValueError);
  // --config's JSON: any subset, typed and range-checked, unknown keys refused.
  RunSpec run;
  nlohmann::json j = nlohmann::json::parse(R"({"num_hiddens": 64, "vocab": "spm"})");
  EXPECT_EQ(error_of([&] { hparams_from_flat_json(io::JsonObject(j, "'c'"), run); }),
            "'c': \"vocab\" is not a hyperparameter (attn train --dump-config lists them)");
  j = nlohmann::json::parse(R"({"num_hiddens": 64, "tokenizer": "spm", "lr": 0.002})");
  EXPECT_EQ(hparams_from_flat_json(io::JsonObject(j, "'c'"), run).size(), 3u);
  EXPECT_EQ(run.model.transformer.num_hiddens, 64);
  EXPECT_EQ(run.model.tokenizer, TokenizerKind::spm);
  j = nlohmann::json::parse(R"({"num_heads": 0})");
  EXPECT_EQ(error_of([&] { hparams_from_flat_json(io::JsonObject(j, "'c'"), run); }),
            "'c': \"num_heads\" = 0 is outside [1, 1024]");
  // What --dump-config prints reads back the same.
  RunSpec t = preset_run("tatoeba");
  EXPECT_EQ(t.model.transformer.positions, nn::Positions::rotary);
  EXPECT_EQ(preset_run("d2l").model.transformer.positions, nn::Positions::sinusoidal);
  t.data.path = "/x";
  nlohmann::json dumped = nlohmann::json::parse(hparams_to_flat_json(t).dump());
  RunSpec back;
  hparams_from_flat_json(io::JsonObject(dumped, "'d'"), back);
  for (const auto& p : hparams()) {
    if (p.flag != HFlag::none) {
      EXPECT_EQ(p.get(back), p.get(t)) << p.name;
    }
  }
}

TEST(HParams, JsonRoundTripPerGroup) {
  RunSpec run;
  run.data.path = "/data/fra.txt";
  run.train.lr = 0.002;
  run.model.transformer.num_heads = 8;
  run.train.seed = 42;
  run.model.transformer.src_vocab_size = 184;
  run.model.transformer.tgt_vocab_size = 201;
  run.data.num_pairs = 600;
  for (HGroup g : {HGroup::model, HGroup::data, HGroup::train}) {
    nlohmann::json j = hparams_to_json(run, g);
    RunSpec back;
    hparams_from_json(io::JsonObject(j, "'x'"), g, back);
    for (const auto& p : hparams()) {
      if (p.group == g) {
        EXPECT_EQ(p.get(back), p.get(run)) << p.name;
      }
    }
  }
  nlohmann::json j = hparams_to_json(run, HGroup::train);
  j["lr"] = -1;
  RunSpec back;
  EXPECT_EQ(error_of([&] { hparams_from_json(io::JsonObject(j, "'x'"), HGroup::train, back); }),
            "'x': \"lr\" = -1 is outside [1e-09, 10]");
}
