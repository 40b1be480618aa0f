#include "suggest.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

namespace attn::cli {

namespace {

// Optimal string alignment distance: Levenshtein plus swaps of neighbours.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The deepest command that the parse entered, and its name as typed.
CLI::App* deepest(CLI::App& app, std::string& path) {
  CLI::App* at = &app;
  path = "attn";
  while (!at->get_subcommands().empty()) {
    at = at->get_subcommands().front();
    path += " " + at->get_name();
  }
  return at;
}

// Every long flag of `at` ("--beam-size") and, for its parents too, the
// global ones; and the names of its commands.
std::vector<std::string> flags_of(const CLI::App* at) {
  std::vector<std::string> out;
  for (const CLI::App* a = at; a != nullptr; a = a->get_parent())
    for (const CLI::Option* o : a->get_options())
      for (const std::string& name : o->get_lnames()) out.push_back("--" + name);
  return out;
}

std::vector<std::string> commands_of(const CLI::App* at) {
  std::vector<std::string> out;
  for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; }))
    out.push_back(sub->get_name());
  return out;
}

}  // namespace

std::string nearest(std::string_view word, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_d = std::min<std::size_t>(2, std::max<std::size_t>(1, word.size() / 3)) + 1;
  for (const std::string& name : names) {
    const std::size_t d = edit_distance(word, name);
    if (d < best_d) {
      best_d = d;
      best = name;
    }
  }
  return best;
}

UsageError usage_error_of(CLI::App& app, const CLI::ParseError& e, int argc,
                          const char* const* argv) {
  UsageError u;
  CLI::App* at = deepest(app, u.command);
  u.message = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr) return u;
  // CLI11 lists the words it did not expect last first: list them as typed.
  const std::string_view what = e.what();
  const std::size_t colon = what.find(": ");
  if (colon == std::string_view::npos) return u;
  std::vector<std::string> extras;
  std::istringstream words{std::string(what.substr(colon + 2))};
  for (std::string w; words >> w;) extras.push_back(w);
  std::vector<std::string> typed;
  for (int i = 1; i < argc; ++i) {
    auto it = std::find(extras.begin(), extras.end(), argv[i]);
    if (it == extras.end()) continue;
    typed.push_back(*it);
    extras.erase(it);
  }
  typed.insert(typed.end(), extras.begin(), extras.end());
  u.message = fmt::format("The following argument{} not expected: {}",
                          typed.size() == 1 ? " was" : "s were", fmt::join(typed, " "));
  for (const std::string& w : typed) {
    const bool flag = w.size() > 1 && w[0] == '-';
    const std::string flag_name = flag ? w.substr(0, w.find('=')) : w;
    const std::string near = nearest(flag_name, flag ? flags_of(at) : commands_of(at));
    if (!near.empty()) {
      u.hint = fmt::format("did you mean {}?", near);
      break;
    }
  }
  return u;
}

}  // namespace attn::cli
