// Languages and their detection (src/serve/languages.h).
#include "serve/languages.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "attn/core/error.h"
#include "attn/data/corpus.h"
#include "attn/serve/server.h"

namespace attn::serve {

namespace {

const std::map<std::string, std::string>& names() {
  static const std::map<std::string, std::string> table = {
      {"ar", "Arabic"},     {"bg", "Bulgarian"}, {"ca", "Catalan"},    {"cs", "Czech"},
      {"da", "Danish"},     {"de", "German"},    {"el", "Greek"},      {"en", "English"},
      {"eo", "Esperanto"},  {"es", "Spanish"},   {"et", "Estonian"},   {"fa", "Persian"},
      {"fi", "Finnish"},    {"fr", "French"},    {"ga", "Irish"},      {"he", "Hebrew"},
      {"hi", "Hindi"},      {"hu", "Hungarian"}, {"id", "Indonesian"}, {"it", "Italian"},
      {"ja", "Japanese"},   {"ko", "Korean"},    {"lt", "Lithuanian"}, {"lv", "Latvian"},
      {"nb", "Norwegian"},  {"nl", "Dutch"},     {"pl", "Polish"},     {"pt", "Portuguese"},
      {"ro", "Romanian"},   {"ru", "Russian"},   {"sk", "Slovak"},     {"sl", "Slovenian"},
      {"sv", "Swedish"},    {"th", "Thai"},      {"tr", "Turkish"},    {"uk", "Ukrainian"},
      {"vi", "Vietnamese"}, {"zh", "Chinese"},
  };
  return table;
}

// The mean log-probability per piece of `ids` under `log_p`.
double mean_log_p(const std::vector<std::int64_t>& ids, const std::vector<double>& log_p) {
  double sum = 0;
  for (std::int64_t id : ids) sum += log_p[static_cast<std::size_t>(id)];
  return ids.empty() ? 0.0 : sum / static_cast<double>(ids.size());
}

}  // namespace

std::string language_name(const std::string& code) {
  auto it = names().find(code);
  return it == names().end() ? code : it->second;
}

bool is_language_code(const std::string& code) {
  return code.size() == 2 && std::islower(static_cast<unsigned char>(code[0])) &&
         std::islower(static_cast<unsigned char>(code[1]));
}

std::pair<std::string, std::string> parse_language_pair(const std::string& text) {
  const std::size_t dash = text.find('-');
  const std::string source = text.substr(0, dash);
  const std::string target = dash == std::string::npos ? "" : text.substr(dash + 1);
  ATTN_CHECK(is_language_code(source) && is_language_code(target) && source != target, ValueError,
             "'{}' is not a language pair: expected SOURCE-TARGET, two different ISO 639-1 "
             "codes (en-fr)",
             text);
  return {source, target};
}

void LanguageDetector::add(const std::string& language,
                           std::shared_ptr<const data::Tokenizer> tokenizer, data::Side side,
                           const std::vector<std::string>& sentences) {
  Model m;
  m.language = language;
  m.tokenizer = std::move(tokenizer);
  m.side = side;
  const std::size_t V = static_cast<std::size_t>(m.tokenizer->vocab(side).size());
  std::vector<double> counts(V, 0.0);
  std::vector<std::vector<std::int64_t>> encoded;
  double total = 0;
  for (const std::string& s : sentences) {
    encoded.push_back(m.tokenizer->encode(s, side));
    for (std::int64_t id : encoded.back())
      if (id >= 0 && static_cast<std::size_t>(id) < V) counts[static_cast<std::size_t>(id)] += 1;
    total += static_cast<double>(encoded.back().size());
  }
  m.log_p.resize(V);
  for (std::size_t v = 0; v < V; ++v)
    m.log_p[v] = std::log((counts[v] + 1.0) / (total + static_cast<double>(V)));
  m.has_data = total > 0;
  if (m.has_data) {
    std::vector<double> means;
    for (const auto& ids : encoded)
      if (!ids.empty()) means.push_back(mean_log_p(ids, m.log_p));
    std::sort(means.begin(), means.end());
    m.fit_threshold = means[means.size() / 10];
  }
  models_.push_back(std::move(m));
}

std::vector<LanguageDetector::Guess> LanguageDetector::detect(const std::string& text) const {
  // Per language, its best model's log-likelihood and fit.
  struct Score {
    double log_likelihood = -INFINITY, fit = 0;
  };
  std::map<std::string, Score> best;
  for (const Model& m : models_) {
    std::vector<std::int64_t> ids = m.tokenizer->encode(text, m.side);
    const std::size_t V = m.log_p.size();
    ids.erase(std::remove_if(
                  ids.begin(), ids.end(),
                  [&](std::int64_t id) { return id < 0 || static_cast<std::size_t>(id) >= V; }),
              ids.end());
    double ll = 0;
    for (std::int64_t id : ids) ll += m.log_p[static_cast<std::size_t>(id)];
    const double fit =
        !m.has_data
            ? 0.5
            : (ids.empty() ? 0.0
                           : std::min(1.0, std::exp(mean_log_p(ids, m.log_p) - m.fit_threshold)));
    Score& s = best[m.language];
    if (ll > s.log_likelihood) s = {ll, fit};
  }
  std::vector<Guess> out;
  if (best.empty()) return out;
  double top = -INFINITY;
  for (const auto& [lang, s] : best) top = std::max(top, s.log_likelihood);
  double z = 0;
  for (const auto& [lang, s] : best) z += std::exp(s.log_likelihood - top);
  for (const auto& [lang, s] : best) {
    const double posterior = std::exp(s.log_likelihood - top) / z;
    out.push_back({lang, std::round(1000.0 * posterior * s.fit) / 10.0});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Guess& a, const Guess& b) { return a.confidence > b.confidence; });
  return out;
}

std::vector<std::pair<std::string, std::string>> read_model_sentences(const std::string& dir,
                                                                      std::size_t max_lines) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* split : {"train", "valid", "test"}) {
    if (out.size() >= max_lines) break;
    const std::filesystem::path path =
        std::filesystem::path(dir) / "data" / (std::string(split) + ".tsv");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) continue;
    try {
      for (auto& p : data::read_pairs(path.string(), max_lines - out.size()))
        out.emplace_back(std::move(p.source), std::move(p.target));
    } catch (const Error&) {
      // A damaged or foreign file: the detector learns from the others.
    }
  }
  return out;
}

}  // namespace attn::serve
