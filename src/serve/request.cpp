// A request's fields (src/serve/request.h).
#include "serve/request.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "attn/core/error.h"
#include "attn/data/text.h"
#include "attn/io/json.h"

namespace attn::serve {

namespace {

ApiError invalid(const std::string& message) {
  return ApiError(400, "Invalid request: " + message);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The text of a form or query value as an integer or number (the whole
// text, no spaces).
std::optional<double> parse_number(const std::string& text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

int json_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::optional<std::string> url_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

void check_text(const std::string& text, const std::string& what) {
  try {
    data::check_utf8(text, what);
  } catch (const Error& e) {
    throw invalid(e.what());
  }
}

Fields Fields::from_json(std::string_view body) {
  if (json_depth(body, kMaxJsonDepth) > kMaxJsonDepth)
    throw invalid(fmt::format("JSON nested more than {} levels deep", kMaxJsonDepth));
  Fields f;
  try {
    f.json_ = io::parse_json_strict(body, "the JSON body");
  } catch (const Error& e) {
    throw invalid(e.what());
  }
  if (!f.json_.is_object())
    throw invalid(
        fmt::format("the JSON body must be an object, got {}", io::describe_json(f.json_)));
  return f;
}

Fields Fields::from_form(std::string_view body) {
  Fields f;
  f.add_query(body);
  return f;
}

void Fields::add_query(std::string_view query) {
  std::size_t at = 0;
  while (at <= query.size()) {
    std::size_t end = query.find('&', at);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view part = query.substr(at, end - at);
    at = end + 1;
    if (part.empty()) continue;
    const std::size_t eq = part.find('=');
    const auto key = url_decode(part.substr(0, eq));
    const auto value = url_decode(eq == std::string_view::npos ? "" : part.substr(eq + 1));
    if (!key || !value)
      throw invalid(fmt::format("bad percent-encoding in '{}'", io::printable_excerpt(part, 40)));
    check_text(*key, "a field name");
    if (has(*key)) continue;  // the first value, and the body's over the query's
    text_.emplace(*key, *value);
  }
}

bool Fields::has(const std::string& key) const {
  return json_.contains(key) || text_.count(key) > 0;
}

std::optional<std::string> Fields::string(const std::string& key) const {
  if (json_.contains(key)) {
    const nlohmann::json& v = json_.at(key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_string())
      throw invalid(fmt::format("{} must be a string, got {}", key, io::describe_json(v)));
    return v.get<std::string>();
  }
  auto it = text_.find(key);
  if (it == text_.end()) return std::nullopt;
  check_text(it->second, key);
  return it->second;
}

std::optional<std::vector<std::string>> Fields::strings(const std::string& key, bool& list) const {
  list = false;
  if (json_.contains(key) && json_.at(key).is_array()) {
    list = true;
    std::vector<std::string> out;
    const nlohmann::json& v = json_.at(key);
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string())
        throw invalid(
            fmt::format("{}[{}] must be a string, got {}", key, i, io::describe_json(v[i])));
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }
  auto one = string(key);
  if (!one) return std::nullopt;
  return std::vector<std::string>{std::move(*one)};
}

std::optional<std::int64_t> Fields::integer(const std::string& key, std::int64_t lo,
                                            std::int64_t hi) const {
  std::optional<double> v;
  if (json_.contains(key)) {
    const nlohmann::json& j = json_.at(key);
    if (j.is_null()) return std::nullopt;
    if (j.is_number_integer() || j.is_number_unsigned() || j.is_number_float())
      v = j.get<double>();
    else if (!j.is_string())
      throw invalid(fmt::format("{} must be an integer, got {}", key, io::describe_json(j)));
    else
      v = parse_number(j.get<std::string>());
  } else if (auto it = text_.find(key); it != text_.end()) {
    v = parse_number(it->second);
  } else {
    return std::nullopt;
  }
  if (!v || *v != std::floor(*v)) throw invalid(fmt::format("{} must be an integer", key));
  if (*v < static_cast<double>(lo) || *v > static_cast<double>(hi))
    throw invalid(fmt::format("{} must be in [{}, {}]", key, lo, hi));
  return static_cast<std::int64_t>(*v);
}

std::optional<double> Fields::number(const std::string& key, double lo, double hi) const {
  std::optional<double> v;
  if (json_.contains(key)) {
    const nlohmann::json& j = json_.at(key);
    if (j.is_null()) return std::nullopt;
    if (j.is_number())
      v = j.get<double>();
    else if (j.is_string())
      v = parse_number(j.get<std::string>());
    else
      throw invalid(fmt::format("{} must be a number, got {}", key, io::describe_json(j)));
  } else if (auto it = text_.find(key); it != text_.end()) {
    v = parse_number(it->second);
  } else {
    return std::nullopt;
  }
  if (!v) throw invalid(fmt::format("{} must be a number", key));
  if (!(*v >= lo && *v <= hi)) throw invalid(fmt::format("{} must be in [{}, {}]", key, lo, hi));
  return v;
}

std::optional<bool> Fields::boolean(const std::string& key) const {
  if (json_.contains(key)) {
    const nlohmann::json& j = json_.at(key);
    if (j.is_null()) return std::nullopt;
    if (j.is_boolean()) return j.get<bool>();
    if (!j.is_string())
      throw invalid(fmt::format("{} must be true or false, got {}", key, io::describe_json(j)));
  }
  std::string text;
  if (json_.contains(key))
    text = json_.at(key).get<std::string>();
  else if (auto it = text_.find(key); it != text_.end())
    text = it->second;
  else
    return std::nullopt;
  if (text == "true" || text == "1" || text == "on") return true;
  if (text == "false" || text == "0" || text == "off" || text.empty()) return false;
  throw invalid(fmt::format("{} must be true or false", key));
}

}  // namespace attn::serve
