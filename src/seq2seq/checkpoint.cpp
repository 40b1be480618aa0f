#include "attn/seq2seq/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <utility>

#include "attn/data/text.h"
#include "attn/io/atomic_file.h"
#include "attn/io/digest.h"
#include "attn/io/json.h"

namespace attn::seq2seq {

namespace {

constexpr const char* kFormat = "attn-checkpoint";
const std::string kExpAvg = "adam.exp_avg.";
const std::string kExpAvgSq = "adam.exp_avg_sq.";
const std::string kStepLoss = "train.step_loss";
const std::string kStepTokens = "train.step_tokens";
const std::string kValidations = "train.validations";

// FNV-1a, 64 bits.
struct Fnv1a {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  void add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  }
  void add(std::int64_t v) { add(&v, sizeof v); }
  void add(const Tensor& t) {
    Tensor c = t.contiguous();
    add(c.numel());
    add(c.raw_data(), static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype()));
  }
};

std::string hex64(std::uint64_t v) { return fmt::format("{:016x}", v); }

// The index of the first NaN or infinity (or, with non_negative, negative
// value) of an F32 tensor, or -1.
std::int64_t first_bad(const Tensor& c, bool non_negative) {
  const float* p = c.data<float>();
  const std::int64_t n = c.numel();
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]) || (non_negative && p[i] < 0)) return i;
  return -1;
}

}  // namespace

std::string run_id_of(const RunSpec& spec) {
  // Where the corpora lie is no part of it: their content is (the fingerprint).
  RunSpec run = spec;
  run.data.path.clear();
  run.data.valid_data.clear();
  run.data.test_data.clear();
  nlohmann::ordered_json j = {{"model", hparams_to_json(run, HGroup::model)},
                              {"data", hparams_to_json(run, HGroup::data)},
                              {"train", hparams_to_json(run, HGroup::train)},
                              {"fingerprint", hex64(run.data.fingerprint)}};
  const std::string text = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return io::sha256_hex(text).substr(0, 32);
}

bool is_run_id(const std::string& id) {
  return id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::uint64_t data_fingerprint(const data::NmtData& d) {
  Fnv1a h;
  for (const data::Vocab* v : {&d.src_vocab, &d.tgt_vocab}) {
    h.add(static_cast<std::int64_t>(v->size()));
    for (const auto& tok : v->tokens()) {
      h.add(static_cast<std::int64_t>(tok.size()));
      h.add(tok.data(), tok.size());
    }
  }
  for (const data::TokenArray* a : {&d.src, &d.tgt}) {
    h.add(a->array);
    h.add(a->valid_len);
  }
  return h.h;
}

namespace {

// Checkpoints of at least this many bytes of parameters and Adam moments are
// copied and serialized on the background thread; smaller ones are
// serialized on the training thread. A small model's training (d2l's: 21
// checkpoints in 9 s) was 5-10% slower with the digest on a background thread
// taking a core from its two-thread team; size c's (610 MB) spent about 3 s
// of its training thread on each checkpoint when it was serialized there.
std::int64_t g_snapshot_bytes = std::int64_t(64) << 20;

// A checkpoint's tensors and metadata.
struct Contents {
  io::TensorMap tensors;
  io::Metadata metadata;
};

// How checkpoint_contents holds the parameters and Adam's moments: the
// tensors themselves, or copies (a snapshot that training may go on from).
enum class Hold { live, snapshot };

// True when every byte of the contiguous tensor t is zero (+0.0 only).
bool all_zero_bits(const Tensor& t) {
  if (!t.is_contiguous()) return false;
  const auto* p = static_cast<const unsigned char*>(t.raw_data());
  const std::size_t n = static_cast<std::size_t>(t.numel() * dtype_size(t.dtype()));
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w != 0) return false;
  }
  for (; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

// Before Adam's first step its moments are zero: a checkpoint then leaves
// them out (two thirds of the file) and load_checkpoint puts zeros back.
bool moments_left_out(const TrainState& s) {
  if (s.adam_steps != 0) return false;
  for (const auto* ms : {&s.exp_avg, &s.exp_avg_sq})
    for (const Tensor& m : *ms)
      if (m.dtype() != DType::f32 || !all_zero_bits(m)) return false;
  return true;
}

Contents checkpoint_contents(const nn::Seq2SeqModel& net, const RunSpec& run, const TrainState& s,
                             Hold hold) {
  auto named = net.named_parameters();
  ATTN_CHECK(s.exp_avg.size() == named.size() && s.exp_avg_sq.size() == named.size(), ValueError,
             "save_checkpoint: {} and {} Adam moments for {} parameters", s.exp_avg.size(),
             s.exp_avg_sq.size(), named.size());
  auto kept = [hold](const Tensor& t) {
    return hold == Hold::snapshot ? t.detach().clone() : t.detach();
  };
  const bool with_moments = !moments_left_out(s);
  io::TensorMap tensors;
  for (std::size_t k = 0; k < named.size(); ++k) {
    const auto& [name, p] = named[k];
    tensors.emplace(name, kept(p));
    if (!with_moments) continue;
    tensors.emplace(kExpAvg + name, kept(s.exp_avg[k]));
    tensors.emplace(kExpAvgSq + name, kept(s.exp_avg_sq[k]));
  }
  tensors.emplace(kStepLoss, from_vector(s.step_loss));
  tensors.emplace(kStepTokens, from_vector(s.step_tokens));
  {
    std::vector<double> v;
    for (const Validation& x : s.validations)
      v.insert(v.end(), {static_cast<double>(x.step), x.loss, x.perplexity, x.bleu, x.seconds});
    tensors.emplace(kValidations,
                    from_vector(v, {static_cast<std::int64_t>(s.validations.size()), 5}));
  }

  nlohmann::ordered_json j = {
      {"format_version", 1},
      {"model", nlohmann::ordered_json::parse(config_to_json(run.model))},
      {"data", hparams_to_json(run, HGroup::data)},
      {"train", hparams_to_json(run, HGroup::train)},
      {"state",
       {{"step", s.step},
        {"epoch", s.epoch},
        {"batch", s.batch},
        {"num_batches", s.num_batches},
        {"shuffle_offset", s.shuffle_offset},
        {"rng_seed", s.rng_seed},
        {"rng_offset", s.rng_offset},
        {"adam_steps", s.adam_steps},
        {"seconds", s.seconds},
        {"best", s.best},
        {"stalls", s.stalls}}},
      {"threads", run.threads},
  };
  if (!run.run_id.empty()) j["run_id"] = run.run_id;
  j["data"]["fingerprint"] = hex64(run.data.fingerprint);
  // A corpus path that is not UTF-8 is stored with U+FFFD in place of its bad
  // bytes (a resume then needs --data).
  std::string text = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return {std::move(tensors), {{"format", kFormat}, {"checkpoint", text}}};
}

}  // namespace

// With the content digest: an edit of the metadata (a hyperparameter) or of a
// weight is refused when the checkpoint is read.
std::string checkpoint_bytes(const nn::Seq2SeqModel& net, const RunSpec& run, const TrainState& s) {
  const Contents c = checkpoint_contents(net, run, s, Hold::live);
  return io::serialize_safetensors(c.tensors, c.metadata, /*with_digest=*/true);
}

void save_checkpoint(const std::string& path, const nn::Seq2SeqModel& net, const RunSpec& run,
                     const TrainState& state) {
  const Contents c = checkpoint_contents(net, run, state, Hold::live);
  io::save_safetensors(path, c.tensors, c.metadata, /*with_digest=*/true);
}

CheckpointWriter::~CheckpointWriter() {
  if (pending_.valid()) pending_.wait();
}

void CheckpointWriter::write(const nn::Seq2SeqModel& net, const RunSpec& run,
                             const TrainState& state, bool last) {
  finish();
  std::int64_t bytes = 0;
  for (const Tensor& p : net.parameters()) bytes += 3 * p.numel() * dtype_size(p.dtype());
  if (bytes < g_snapshot_bytes) {
    // Small: the file's bytes now (digest included), only the write behind.
    auto file = std::make_shared<const std::string>(checkpoint_bytes(net, run, state));
    pending_ = std::async(std::launch::async,
                          [path = path_, file] { io::write_file_atomic(path, *file); });
    return;
  }
  // Large: the training thread at most copies the state (the last
  // checkpoint's tensors no longer change: not even that); the digest, the
  // serialization and the write happen on the background thread.
  auto contents = std::make_shared<const Contents>(
      checkpoint_contents(net, run, state, last ? Hold::live : Hold::snapshot));
  pending_ = std::async(std::launch::async, [path = path_, contents] {
    io::save_safetensors(path, contents->tensors, contents->metadata, /*with_digest=*/true);
  });
}

std::int64_t detail::set_checkpoint_snapshot_bytes(std::int64_t bytes) {
  return std::exchange(g_snapshot_bytes, bytes);
}

void CheckpointWriter::finish() {
  if (pending_.valid()) pending_.get();  // rethrows the background write's error
}

namespace {

bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

// The run of a checkpoint from its metadata's JSON: the model, the data
// (with its fingerprint), the training options, the threads, the run's id.
RunSpec read_run(const nlohmann::json& j, io::JsonObject& root, const std::string& what) {
  RunSpec run;
  ATTN_CHECK(j.contains("model") && j["model"].is_object(), IOError,
             "'{}': the checkpoint metadata lacks the \"model\" object", what);
  run.model = config_from_json(j["model"].dump(), what);

  io::JsonObject d = root.object("data");
  hparams_from_json(d, HGroup::data, run);
  std::string fp = d.string("fingerprint");
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(fp.data(), fp.data() + fp.size(), v, 16);
  ATTN_CHECK(fp.size() == 16 && ec == std::errc() && end == fp.data() + fp.size(), IOError,
             "'{}': checkpoint \"data.fingerprint\" must be 16 hex digits, got {}", what,
             data::printable_excerpt(fp));
  run.data.fingerprint = v;

  hparams_from_json(root.object("train"), HGroup::train, run);
  run.threads = static_cast<int>(root.integer("threads", 0, 1 << 20));
  if (root.has("run_id")) {
    run.run_id = root.string("run_id");
    ATTN_CHECK(is_run_id(run.run_id), IOError,
               "'{}': checkpoint \"run_id\" must be 32 lower-case hex digits, got {}", what,
               data::printable_excerpt(run.run_id));
  }
  return run;
}

// The state's counters ("state" in the metadata), each against the others.
void read_counters(io::JsonObject& s, const RunSpec& run, TrainState& st, const std::string& what) {
  // Fixed-size batches: their count follows from the pairs; token batches:
  // the count the run recorded (checked against the data on --resume).
  const std::int64_t num_batches =
      run.data.batch_tokens > 0
          ? s.integer("num_batches", 1, std::int64_t{1} << 40)
          : (run.data.num_pairs + run.train.batch_size - 1) / run.train.batch_size;
  st.num_batches = num_batches;
  st.epoch = s.integer("epoch", 0, run.train.num_epochs);
  st.batch = s.integer("batch", 0, num_batches - 1);
  ATTN_CHECK(st.epoch < run.train.num_epochs || st.batch == 0, IOError,
             "'{}': checkpoint \"state.batch\" = {} after the last epoch", what, st.batch);
  st.step = s.integer("step", 0, std::int64_t{1} << 50);
  ATTN_CHECK(st.step == st.epoch * num_batches + st.batch, IOError,
             "'{}': checkpoint \"state.step\" = {} does not match epoch {} x {} batches + batch {}",
             what, st.step, st.epoch, num_batches, st.batch);
  st.adam_steps = s.integer("adam_steps", 0, std::int64_t{1} << 50);
  ATTN_CHECK(st.adam_steps == st.step, IOError,
             "'{}': checkpoint \"state.adam_steps\" = {} differs from \"state.step\" = {}", what,
             st.adam_steps, st.step);
  st.shuffle_offset = s.unsigned64("shuffle_offset");
  st.rng_seed = s.unsigned64("rng_seed");
  st.rng_offset = s.unsigned64("rng_offset");
  st.seconds = s.number("seconds", 0.0, 1e12);
  st.best = s.integer("best", -1, std::int64_t{1} << 40);
  st.stalls = s.integer("stalls", 0, std::int64_t{1} << 40);
}

// The parameters: every tensor that is not Adam's or a step record.
void read_parameters(const io::TensorMap& tensors, Checkpoint& c, const std::string& what) {
  for (auto& [name, tensor] : tensors) {
    if (name == kStepLoss || name == kStepTokens || name == kValidations ||
        starts_with(name, kExpAvg) || starts_with(name, kExpAvgSq))
      continue;
    ATTN_CHECK(tensor.dtype() == DType::f32, IOError, "'{}': tensor '{}' must be F32, got {}", what,
               data::printable_excerpt(name, 80), dtype_name(tensor.dtype()));
    c.parameters.emplace(name, tensor);
  }
  check_weights(c.run.model, c.parameters, what);
}

// Adam's moments: a pair for every parameter, of its shape, finite (the
// second moment also not negative); or, before Adam's first step, none at
// all: then they are zero. Returns the tensors used.
std::size_t read_moments(const io::TensorMap& tensors, Checkpoint& c, const std::string& what) {
  std::size_t used = 0;
  const bool any_moment = std::any_of(tensors.begin(), tensors.end(), [&](const auto& kv) {
    return starts_with(kv.first, kExpAvg) || starts_with(kv.first, kExpAvgSq);
  });
  if (c.state.adam_steps == 0 && !any_moment) {
    for (const auto& [name, p] : c.parameters)
      for (io::TensorMap* ms : {&c.exp_avg, &c.exp_avg_sq}) ms->emplace(name, zeros(p.shape()));
    return 0;
  }
  for (const auto& [name, p] : c.parameters) {
    for (const std::string* prefix : {&kExpAvg, &kExpAvgSq}) {
      auto it = tensors.find(*prefix + name);
      ATTN_CHECK(it != tensors.end(), IOError, "'{}': tensor '{}{}' (Adam's state) is missing",
                 what, *prefix, name);
      const Tensor& m = it->second;
      ATTN_CHECK(m.dtype() == DType::f32 && m.shape() == p.shape(), IOError,
                 "'{}': tensor '{}{}' must be F32 of shape {}, got {} of shape {}", what, *prefix,
                 name, shape_str(p.shape()), dtype_name(m.dtype()), shape_str(m.shape()));
      Tensor mc = m.contiguous();
      std::int64_t bad = first_bad(mc, /*non_negative=*/prefix == &kExpAvgSq);
      ATTN_CHECK(bad < 0, IOError, "'{}': tensor '{}{}' holds {} at index {}", what, *prefix, name,
                 mc.data<float>()[bad], bad);
      (prefix == &kExpAvg ? c.exp_avg : c.exp_avg_sq).emplace(name, m);
      ++used;
    }
  }
  return used;
}

// The step records: a loss and a token count per step.
void read_step_records(const io::TensorMap& tensors, TrainState& st, const std::string& what) {
  for (const std::string* name : {&kStepLoss, &kStepTokens}) {
    auto it = tensors.find(*name);
    ATTN_CHECK(it != tensors.end(), IOError, "'{}': tensor '{}' is missing", what, *name);
    const Tensor& r = it->second;
    ATTN_CHECK(r.dtype() == DType::f64 && r.dim() == 1 && r.size(0) == st.step, IOError,
               "'{}': tensor '{}' must be F64 of shape ({}) (one per step), got {} of shape {}",
               what, *name, st.step, dtype_name(r.dtype()), shape_str(r.shape()));
    std::vector<double> v = to_vector<double>(r);
    for (std::size_t i = 0; i < v.size(); ++i) {
      bool ok = *name == kStepLoss ? std::isfinite(v[i]) && v[i] >= 0
                                   : std::isfinite(v[i]) && v[i] >= 0 && v[i] == std::floor(v[i]);
      ATTN_CHECK(ok, IOError, "'{}': tensor '{}' holds {} at step {}", what, *name, v[i], i + 1);
    }
    (*name == kStepLoss ? st.step_loss : st.step_tokens) = std::move(v);
  }
}

// The validations: (N, 5) rows of step, loss, perplexity, BLEU and seconds
// of training, in order of their steps, none after the state's step; `best`
// one of them.
void read_validations(const io::TensorMap& tensors, TrainState& st, const std::string& what) {
  auto it = tensors.find(kValidations);
  ATTN_CHECK(it != tensors.end(), IOError, "'{}': tensor '{}' is missing", what, kValidations);
  const Tensor& v = it->second;
  ATTN_CHECK(v.dtype() == DType::f64 && v.dim() == 2 && v.size(1) == 5, IOError,
             "'{}': tensor '{}' must be F64 of shape (N, 5), got {} of shape {}", what,
             kValidations, dtype_name(v.dtype()), shape_str(v.shape()));
  std::vector<double> x = to_vector<double>(v);
  std::int64_t last = 0;
  for (std::int64_t i = 0; i < v.size(0); ++i) {
    const double* r = x.data() + 5 * i;
    const bool ok = r[0] == std::floor(r[0]) && r[0] >= last && r[0] <= st.step &&
                    std::isfinite(r[1]) && r[1] >= 0 && std::isfinite(r[2]) && r[2] >= 1 &&
                    std::isfinite(r[3]) && r[3] >= 0 && r[3] <= 100 && std::isfinite(r[4]) &&
                    r[4] >= 0 && r[4] <= st.seconds;
    ATTN_CHECK(ok, IOError,
               "'{}': tensor '{}' row {} is not a validation (step {}, loss {}, "
               "perplexity {}, BLEU {}, seconds {})",
               what, kValidations, i, r[0], r[1], r[2], r[3], r[4]);
    last = static_cast<std::int64_t>(r[0]);
    st.validations.push_back({last, r[1], r[2], r[3], r[4]});
  }
  ATTN_CHECK(st.best < static_cast<std::int64_t>(st.validations.size()) &&
                 (st.best >= 0 || st.validations.empty()),
             IOError, "'{}': checkpoint \"state.best\" = {} is not one of its {} validations", what,
             st.best, st.validations.size());
}

// Every tensor is a parameter, one of its moments or a record.
void check_all_known(const io::TensorMap& tensors, const Checkpoint& c, const std::string& what) {
  for (const auto& [name, _] : tensors) {
    bool known = c.parameters.count(name) || name == kStepLoss || name == kStepTokens ||
                 name == kValidations;
    for (const std::string* prefix : {&kExpAvg, &kExpAvgSq})
      known =
          known || (starts_with(name, *prefix) && c.parameters.count(name.substr(prefix->size())));
    ATTN_CHECK(known, IOError, "'{}': unexpected tensor '{}'", what,
               data::printable_excerpt(name, 80));
  }
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
  io::Metadata meta;
  io::TensorMap tensors = io::load_safetensors(path, &meta);
  const std::string& what = path;
  auto format = meta.find("format");
  ATTN_CHECK(format != meta.end() && format->second == kFormat, IOError,
             "'{}': not an attn checkpoint (its metadata lacks \"format\": \"{}\")", what, kFormat);
  auto text = meta.find("checkpoint");
  ATTN_CHECK(text != meta.end(), IOError, "'{}': the checkpoint metadata lacks \"checkpoint\"",
             what);
  ATTN_CHECK(meta.count(io::kDigestKey), IOError,
             "'{}': the checkpoint has no sha256 in its metadata (written by an older attn?)",
             what);
  const std::string quoted = fmt::format("'{}' (checkpoint metadata)", what);
  nlohmann::json j = io::parse_json_strict(text->second, quoted);
  io::JsonObject root(j, quoted);
  root.integer("format_version", 1, 1);

  Checkpoint c;
  c.run = read_run(j, root, what);
  io::JsonObject s = root.object("state");
  read_counters(s, c.run, c.state, what);
  read_parameters(tensors, c, what);
  const std::size_t moments = read_moments(tensors, c, what);
  read_step_records(tensors, c.state, what);
  read_validations(tensors, c.state, what);
  // A batch whose targets are all <pad> has no tokens, and so no loss.
  const TrainState& st = c.state;
  for (std::size_t i = 0; i < st.step_tokens.size(); ++i)
    ATTN_CHECK(st.step_tokens[i] > 0 || st.step_loss[i] == 0, IOError,
               "'{}': step {} has loss {} over 0 target tokens", what, i + 1, st.step_loss[i]);
  if (c.parameters.size() + moments + 3 != tensors.size()) check_all_known(tensors, c, what);
  return c;
}

TrainState restore_checkpoint(const Checkpoint& c, nn::Seq2SeqModel& net) {
  try {
    net.load_state_dict(c.parameters);
  } catch (const Error& e) {
    throw ValueError(fmt::format("restore_checkpoint: {}", e.what()));
  }
  TrainState s = c.state;
  s.exp_avg.clear();
  s.exp_avg_sq.clear();
  for (const auto& [name, p] : net.named_parameters()) {
    auto m = c.exp_avg.find(name), v = c.exp_avg_sq.find(name);
    ATTN_CHECK(m != c.exp_avg.end() && v != c.exp_avg_sq.end(), ValueError,
               "restore_checkpoint: no Adam state for parameter '{}'", name);
    s.exp_avg.push_back(m->second);
    s.exp_avg_sq.push_back(v->second);
  }
  return s;
}

}  // namespace attn::seq2seq
