// The server: its routes and its life (attn/serve/server.h).
#include "serve/service.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn/core/error.h"
#include "attn/core/threads.h"
#include "attn/ops/attention.h"
#include "attn/ops/precision.h"
#include "attn/ops/quantize.h"
#include "serve/page.h"

namespace attn::serve {

namespace {

// Sentences per model that teach the language detector.
constexpr std::size_t kDetectorSentences = 20000;

struct Route {
  const char* path;
  const char* methods;  // the Allow header
  bool get;  // GET and HEAD, else POST
};
const Route kRoutes[] = {
    {"/", "GET, HEAD, OPTIONS", true},
    {"/languages", "GET, HEAD, OPTIONS", true},
    {"/frontend/settings", "GET, HEAD, OPTIONS", true},
    {"/health", "GET, HEAD, OPTIONS", true},
    {"/metrics", "GET, HEAD, OPTIONS", true},
    {"/translate", "POST, OPTIONS", false},
    {"/detect", "POST, OPTIONS", false},
    {"/attention", "POST, OPTIONS", false},
};

HttpResponse json_response(const nlohmann::json& j) {
  HttpResponse r;
  r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

std::string access_line(const AccessRecord& r, bool with_text) {
  std::string line = fmt::format("attn serve: {} \"{} {}\" {} {:.1f} ms {} B", r.client, r.method,
                                 r.path, r.status, r.ms, r.bytes);
  if (with_text && !r.text.empty()) line += " text=" + r.text;
  return line;
}

}  // namespace

std::int64_t count_chars(const std::string& text) {
  std::int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

Server::Impl::Impl(std::vector<ServedModel> served, ServeOptions opts)
    : options(std::move(opts)), models(std::move(served)), limiter(options.req_limit) {
  ATTN_CHECK(!models.empty(), ValueError, "serve: no model to serve");
  for (std::size_t i = 0; i < models.size(); ++i) {
    const ServedModel& m = models[i];
    const seq2seq::ModelConfig& c = m.model.config;
    ATTN_CHECK(c.tokenizer != seq2seq::TokenizerKind::word &&
                   c.architecture == seq2seq::Architecture::transformer,
               ValueError,
               "serve: '{}' is a {} model with {} vocabularies; the server translates with "
               "SentencePiece Transformers (attn train --preset tatoeba)",
               m.dir, enum_name(c.architecture), enum_name(c.tokenizer));
    ATTN_CHECK(model_of.emplace(std::make_pair(m.source, m.target), i).second, ValueError,
               "serve: two models translate {} to {} ('{}')", m.source, m.target, m.dir);
  }
  for (ServedModel& m : models) {
    const auto sentences = read_model_sentences(m.dir, kDetectorSentences);
    std::vector<std::string> sources, targets;
    for (const auto& [s, t] : sentences) {
      sources.push_back(s);
      targets.push_back(t);
    }
    detector.add(m.source, m.model.tokenizer, data::Side::source, sources);
    detector.add(m.target, m.model.tokenizer, data::Side::target, targets);
  }
  const int threads = options.threads > 0 ? options.threads : get_num_threads();
  const int loops = options.inter_threads > 0 ? options.inter_threads : threads;
  SchedulerOptions so;
  so.threads = std::max(1, threads / loops);
  so.precision = options.precision;
  so.int8 = options.int8;
  so.max_batch_tokens = options.max_batch_tokens;
  so.max_batch_size = options.max_batch_size;
  so.max_queue = options.max_queue;
  so.busy_loops = std::make_shared<std::atomic<int>>(0);
  for (ServedModel& m : models) {
    schedulers.emplace_back();
    for (int i = 0; i < loops; ++i) {
      // A model's first loop takes every thread while the others are idle
      // (a request goes to the first loop of the fewest sentences: a lone
      // one to this). Only that loop forms teams of more than its share:
      // libgomp spins its idle workers only while the threads it manages
      // are no more than the cores, and each loop's team is its own.
      SchedulerOptions own = so;
      own.lone_threads = i == 0 && loops > 1 ? threads : 0;
      schedulers.back().push_back(std::make_unique<Scheduler>(
          fmt::format("{}-{}/{}", m.source, m.target, i), m.model, own, metrics));
    }
  }
  HttpOptions ho;
  ho.host = options.host;
  ho.port = options.port;
  ho.max_connections = options.max_connections;
  ho.max_body_bytes = options.max_body_bytes;
  ho.read_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(options.read_timeout * 1000));
  ho.write_timeout = ho.read_timeout;
  if (!options.cors_origin.empty())
    ho.headers.emplace_back("Access-Control-Allow-Origin", options.cors_origin);
  auto log = options.log;
  const bool with_text = options.log_text;
  auto logger = [log, with_text](const AccessRecord& r) {
    const std::string line = access_line(r, with_text);
    if (log)
      log(line);
    else
      fmt::print(stderr, "{}\n", line);
  };
  http = std::make_unique<HttpServer>(
      ho,
      [this](HttpRequest r, std::shared_ptr<Exchange> e) { handle(std::move(r), std::move(e)); },
      metrics, logger);
}

void Server::Impl::handle(HttpRequest request, std::shared_ptr<Exchange> exchange) {
  const Route* route = nullptr;
  for (const Route& r : kRoutes)
    if (request.path == r.path) route = &r;
  try {
    if (route == nullptr) throw ApiError(404, "Not Found");
    const std::string& m = request.method;
    if (m == "OPTIONS") {  // CORS preflight
      HttpResponse r;
      r.status = 204;
      r.content_type = "text/plain";
      r.headers = {{"Allow", route->methods},
                   {"Access-Control-Allow-Methods", route->methods},
                   {"Access-Control-Allow-Headers", "Content-Type, Authorization"},
                   {"Access-Control-Max-Age", "86400"}};
      return exchange->respond(std::move(r));
    }
    const bool allowed = route->get ? (m == "GET" || m == "HEAD") : m == "POST";
    if (!allowed) {
      HttpResponse r = error_response(
          405, fmt::format("Method Not Allowed: {} takes {}", route->path, route->methods));
      r.headers.emplace_back("Allow", route->methods);
      return exchange->respond(std::move(r));
    }
    const std::string path = request.path;
    if (path == "/translate") return translate(request, exchange, false);
    if (path == "/attention") return translate(request, exchange, true);
    if (path == "/detect") return exchange->respond(detect(request));
    if (path == "/languages") return exchange->respond(languages());
    if (path == "/frontend/settings") return exchange->respond(frontend_settings());
    if (path == "/health") return exchange->respond(health());
    if (path == "/metrics") {
      HttpResponse r;
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = metrics.render();
      return exchange->respond(std::move(r));
    }
    HttpResponse page;
    page.content_type = "text/html; charset=utf-8";
    page.body = page_html();
    // Everything the page needs is in it; it talks to this server only.
    page.headers = {{"Content-Security-Policy",
                     "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                     "connect-src 'self'; frame-src 'self'; img-src data:; base-uri 'none'; "
                     "form-action 'none'"},
                    {"X-Content-Type-Options", "nosniff"}};
    exchange->respond(std::move(page));
  } catch (const ApiError& e) {
    HttpResponse r = error_response(e.status(), e.what());
    if (e.retry_after > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after));
    exchange->respond(std::move(r));
  } catch (const std::exception& e) {
    exchange->respond(error_response(500, std::string("internal error: ") + e.what()));
  }
}

HttpResponse Server::Impl::languages() const {
  std::map<std::string, std::vector<std::string>> targets;
  for (const ServedModel& m : models) {
    targets[m.source].push_back(m.target);
    targets[m.target];  // a target language is listed too (LibreTranslate lists every one)
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [code, to] : targets)
    out.push_back({{"code", code}, {"name", language_name(code)}, {"targets", to}});
  return json_response(out);
}

HttpResponse Server::Impl::frontend_settings() const {
  const ServedModel& first = models.front();
  nlohmann::json j = {
      {"charLimit", options.char_limit > 0 ? options.char_limit : -1},
      {"frontendTimeout", 500},
      {"apiKeys", !options.api_keys.empty()},
      {"keyRequired", !options.api_keys.empty()},
      {"suggestions", false},
      {"filesTranslation", false},
      {"supportedFilesFormat", nlohmann::json::array()},
      {"language",
       {{"source", {{"code", first.source}, {"name", language_name(first.source)}}},
        {"target", {{"code", first.target}, {"name", language_name(first.target)}}}}},
  };
  return json_response(j);
}

HttpResponse Server::Impl::health() const {
  if (draining.load()) return error_response(503, "the server is shutting down");
  nlohmann::json models_json = nlohmann::json::array();
  for (const ServedModel& m : models)
    models_json.push_back({{"source", m.source}, {"target", m.target}});
  // How the models decode, in the words of `attn --version`.
  const nlohmann::json decoding = {
      {"precision", precision_name(options.precision)},
      {"quantize", options.int8 ? "int8" : "none"},
      {"int8_products", int8_description()},
      {"attention_kernels", attention_kernel_config().isa},
      {"threads", options.threads > 0 ? options.threads : get_num_threads()},
      {"loops_per_model", static_cast<int>(schedulers.empty() ? 0 : schedulers.front().size())}};
  return json_response({{"status", "ok"}, {"models", models_json}, {"decoding", decoding}});
}

bool Server::Impl::known_source(const std::string& code) const {
  for (const ServedModel& m : models)
    if (m.source == code) return true;
  return false;
}

bool Server::Impl::known_target(const std::string& code) const {
  for (const ServedModel& m : models)
    if (m.target == code) return true;
  return false;
}

Server::Server(std::vector<ServedModel> models, ServeOptions options)
    : impl_(std::make_unique<Impl>(std::move(models), std::move(options))) {}

Server::~Server() {
  if (impl_) shutdown(0);
}

std::uint16_t Server::port() const { return impl_->http->port(); }

std::int64_t Server::shutdown(double grace_seconds) {
  Impl& m = *impl_;
  if (!m.http) return 0;
  m.draining = true;
  m.http->drain();
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<std::int64_t>(grace_seconds * 1000));
  while (m.http->in_flight() > 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::int64_t cut = m.http->in_flight();
  // What is still decoding is answered 503 (Outcome::shut_down) ...
  for (auto& loops : m.schedulers)
    for (auto& s : loops) s->stop();
  m.schedulers.clear();  // joins the loops
  // ... and written before the connections close, for a moment.
  const auto written = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (m.http->in_flight() > 0 && std::chrono::steady_clock::now() < written)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  m.http->stop();
  m.http.reset();
  return cut;
}

}  // namespace attn::serve
