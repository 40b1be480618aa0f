// attn/io/json.h — strict JSON for the files attn reads (config.json, the
// model manifest, the checkpoint's metadata, safetensors headers), with
// errors of one line that name the file and the key.
//
//   nlohmann::json j = io::parse_json_strict(text, "'out/model/config.json'");
//   io::JsonObject root(j, "'out/model/config.json'");
//   std::int64_t layers = root.integer("num_layers", 1, 1024);
//   io::JsonObject state = root.object("state");     // keys named "state.step", ...
//
// Errors (IOError), `what` first, as given:
//   'c.json': not valid JSON: <parser message>
//   'c.json': "num_layers" appears twice           (a key twice in any object)
//   'c.json': missing "ffn_num_hiddens"
//   'c.json': "num_layers" must be an integer, got "one"
//   'c.json': "state.batch" = 9 is outside [0, 8]
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace attn::io {

// At most `max` bytes of `text` for an error message: cut at a UTF-8
// character boundary, control characters shown as '?', "..." when cut, so
// that hostile input can neither flood nor break the one-line message.
std::string printable_excerpt(std::string_view text, std::size_t max = 60);

// A JSON value for an error message: short and on one line, never a deep
// dump ("a list of 3 items", "an object of 2 keys", "\"one\"", "2.5").
std::string describe_json(const nlohmann::json& value);

// Parses `text`, refusing a key given twice in any object (JSON readers
// disagree on which one wins). `what` names the text in errors.
nlohmann::json parse_json_strict(std::string_view text, std::string_view what);

// Typed, range-checked reads of one JSON object's members.
class JsonObject {
 public:
  // `value` must be an object (else IOError "<what>: expected a JSON object,
  // got ..."); `path` is its place in the document, prefixed to key names in
  // errors ("" for the root, "state" gives "state.step"). `value` must
  // outlive this view.
  JsonObject(const nlohmann::json& value, std::string what, std::string path = "");

  bool has(std::string_view key) const;
  const nlohmann::json& get(std::string_view key) const;  // IOError when missing

  std::int64_t integer(std::string_view key, std::int64_t lo, std::int64_t hi) const;
  std::uint64_t unsigned64(std::string_view key) const;  // a whole number in [0, 2^64)
  // A finite number in [lo, hi]; with open_lo, (lo, hi]; with open_hi, [lo, hi).
  double number(std::string_view key, double lo, double hi, bool open_lo = false,
                bool open_hi = false) const;
  bool boolean(std::string_view key) const;
  std::string string(std::string_view key, bool allow_empty = false) const;
  JsonObject object(std::string_view key) const;

  // The member's name as errors show it: "\"state.step\"".
  std::string name(std::string_view key) const;
  const std::string& what() const { return what_; }
  const nlohmann::json& json() const { return *j_; }

 private:
  const nlohmann::json* j_;
  std::string what_, path_;
};

}  // namespace attn::io
