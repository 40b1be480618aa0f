// The command registry behind commands.h.
#include "commands.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <vector>

namespace attn::cli {
namespace {

struct Entry {
  std::string parent;
  std::string name;
  int order;
  Setup setup;
};

// A function-local static, so registrations from any translation unit's static
// initializers find it constructed.
std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}

}  // namespace

Registration::Registration(std::string parent, std::string name, int order, Setup setup) {
  registry().push_back({std::move(parent), std::move(name), order, std::move(setup)});
}

void add_registered(CLI::App& app, const std::string& parent, Context& ctx) {
  std::vector<const Entry*> entries;
  for (const Entry& e : registry())
    if (e.parent == parent) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->order, a->name) < std::tie(b->order, b->name);
  });
  for (const Entry* e : entries) e->setup(app, ctx);
}

void flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) == 0 && std::ferror(stdout) == 0) return;
  throw IOError(errno != 0 ? fmt::format("write error: {}", std::strerror(errno))
                           : std::string("write error on standard output"));
}

}  // namespace attn::cli
