// src/serve/request.h — internal: a request's fields as LibreTranslate reads
// them (a JSON object, form data, or the query string), typed and checked,
// and the errors a client is answered with.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace attn::serve {

// An error answered to the client: an HTTP status and the message of
// {"error": message} (LibreTranslate's body for every error).
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }
  // Seconds for a Retry-After header (503, 429), or 0 for none.
  int retry_after = 0;

 private:
  int status_;
};

// JSON nested deeper than this is refused (400) before it is parsed, so that
// no parse or destruction recurses into a hostile document.
inline constexpr int kMaxJsonDepth = 16;

// The deepest nesting of arrays and objects in `text` (strings skipped);
// stops counting past `limit`.
int json_depth(std::string_view text, int limit);

// Percent-decoding of application/x-www-form-urlencoded text ('+' is a
// space); nullopt for a '%' not followed by two hex digits.
std::optional<std::string> url_decode(std::string_view text);

class Fields {
 public:
  // A JSON object (400 "Invalid request: ..." for anything else: malformed,
  // too deep, a key twice, not an object).
  static Fields from_json(std::string_view body);
  // key=value&key=value, percent-decoded (400 for bad escapes); a key given
  // twice keeps its first value, as LibreTranslate's request.values.get.
  static Fields from_form(std::string_view body);
  // Adds the query string's fields that the body does not have.
  void add_query(std::string_view query);

  bool has(const std::string& key) const;
  // Each accessor answers 400 "Invalid request: <key> must be ..." for a
  // value of another type; form and query values are text, read as the
  // type asked for ("3", "true").
  std::optional<std::string> string(const std::string& key) const;
  // A string or a list of strings (q): `list` tells which was given.
  std::optional<std::vector<std::string>> strings(const std::string& key, bool& list) const;
  std::optional<std::int64_t> integer(const std::string& key, std::int64_t lo,
                                      std::int64_t hi) const;
  std::optional<double> number(const std::string& key, double lo, double hi) const;
  std::optional<bool> boolean(const std::string& key) const;

 private:
  nlohmann::json json_ = nlohmann::json::object();  // a JSON body's object
  std::map<std::string, std::string> text_;  // form and query fields
};

// A client's text must be UTF-8 (400 "Invalid request: <what> is not valid
// UTF-8" otherwise).
void check_text(const std::string& text, const std::string& what);

}  // namespace attn::serve
