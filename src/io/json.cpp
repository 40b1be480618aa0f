#include "attn/io/json.h"

#include <cmath>
#include <set>
#include <vector>

#include "attn/core/error.h"

namespace attn::io {

std::string printable_excerpt(std::string_view text, std::size_t max) {
  std::size_t n = std::min(text.size(), max);
  while (n > 0 && n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    out += c < 0x20 || c == 0x7F ? '?' : static_cast<char>(c);
  }
  if (n < text.size()) out += "...";
  return out;
}

std::string describe_json(const nlohmann::json& v) {
  if (v.is_array()) return fmt::format("a list of {} items", v.size());
  if (v.is_object()) return fmt::format("an object of {} keys", v.size());
  return printable_excerpt(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

nlohmann::json parse_json_strict(std::string_view text, std::string_view what) {
  std::vector<std::set<std::string>> open;  // the keys of each object being parsed
  std::string duplicate;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(
        text.begin(), text.end(),
        [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          using E = nlohmann::json::parse_event_t;
          if (event == E::object_start) open.emplace_back();
          if (event == E::object_end && !open.empty()) open.pop_back();
          if (event == E::key && !open.empty()) {
            const auto& k = parsed.get_ref<const std::string&>();
            if (!open.back().insert(k).second && duplicate.empty()) duplicate = k;
          }
          return true;
        });
  } catch (const nlohmann::json::exception& e) {
    throw IOError(fmt::format("{}: not valid JSON: {}", what, printable_excerpt(e.what(), 300)));
  }
  ATTN_CHECK(duplicate.empty(), IOError, "{}: \"{}\" appears twice", what,
             printable_excerpt(duplicate));
  return j;
}

JsonObject::JsonObject(const nlohmann::json& value, std::string what, std::string path)
    : j_(&value), what_(std::move(what)), path_(std::move(path)) {
  ATTN_CHECK(value.is_object(), IOError, "{}: expected {}a JSON object, got {}", what_,
             path_.empty() ? "" : fmt::format("\"{}\" to be ", path_), describe_json(value));
}

std::string JsonObject::name(std::string_view key) const {
  return path_.empty() ? fmt::format("\"{}\"", key) : fmt::format("\"{}.{}\"", path_, key);
}

bool JsonObject::has(std::string_view key) const { return j_->contains(key); }

const nlohmann::json& JsonObject::get(std::string_view key) const {
  auto it = j_->find(key);
  ATTN_CHECK(it != j_->end(), IOError, "{}: missing {}", what_, name(key));
  return *it;
}

std::int64_t JsonObject::integer(std::string_view key, std::int64_t lo, std::int64_t hi) const {
  const auto& v = get(key);
  ATTN_CHECK(v.is_number_integer(), IOError, "{}: {} must be an integer, got {}", what_, name(key),
             describe_json(v));
  // An unsigned value past int64's range would wrap; compare before converting.
  const bool in_range = v.is_number_unsigned()
                            ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
                                  static_cast<std::int64_t>(v.get<std::uint64_t>()) >= lo
                            : v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
  ATTN_CHECK(in_range, IOError, "{}: {} = {} is outside [{}, {}]", what_, name(key),
             describe_json(v), lo, hi);
  return v.get<std::int64_t>();
}

std::uint64_t JsonObject::unsigned64(std::string_view key) const {
  const auto& v = get(key);
  ATTN_CHECK(v.is_number_unsigned(), IOError, "{}: {} must be a whole number in [0, 2^64), got {}",
             what_, name(key), describe_json(v));
  return v.get<std::uint64_t>();
}

double JsonObject::number(std::string_view key, double lo, double hi, bool open_lo,
                          bool open_hi) const {
  const auto& v = get(key);
  ATTN_CHECK(v.is_number(), IOError, "{}: {} must be a number, got {}", what_, name(key),
             describe_json(v));
  const double x = v.get<double>();
  const bool ok = std::isfinite(x) && (open_lo ? x > lo : x >= lo) && (open_hi ? x < hi : x <= hi);
  ATTN_CHECK(ok, IOError, "{}: {} = {} is outside {}{}, {}{}", what_, name(key), describe_json(v),
             open_lo ? "(" : "[", lo, hi, open_hi ? ")" : "]");
  return x;
}

bool JsonObject::boolean(std::string_view key) const {
  const auto& v = get(key);
  ATTN_CHECK(v.is_boolean(), IOError, "{}: {} must be true or false, got {}", what_, name(key),
             describe_json(v));
  return v.get<bool>();
}

std::string JsonObject::string(std::string_view key, bool allow_empty) const {
  const auto& v = get(key);
  ATTN_CHECK(v.is_string() && (allow_empty || !v.get_ref<const std::string&>().empty()), IOError,
             "{}: {} must be a {}string, got {}", what_, name(key), allow_empty ? "" : "non-empty ",
             describe_json(v));
  return v.get<std::string>();
}

JsonObject JsonObject::object(std::string_view key) const {
  const auto& v = get(key);
  std::string sub = path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  return JsonObject(v, what_, std::move(sub));
}

}  // namespace attn::io
