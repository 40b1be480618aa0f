// src/serve/service.h — internal: the server's state and routes
// (attn/serve/server.h): LibreTranslate's API over the HTTP layer
// (serve/http.h) and one decoding loop per model (serve/scheduler.h).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attn/serve/server.h"
#include "serve/http.h"
#include "serve/languages.h"
#include "serve/limits.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "serve/scheduler.h"
#include "serve/segments.h"

namespace attn::serve {

// A request's plan: per q string its pieces and, for the translated ones,
// the job's sentence that holds each.
struct Item {
  std::vector<Piece> pieces;
  std::vector<std::size_t> sentences;  // job sentence per translated piece
  std::string source;  // the language it is translated from
  double confidence = 0;  // of the detection, when auto
};

struct Plan {
  bool list = false, html = false, auto_source = false, attention = false, viewer = false;
  std::int64_t alternatives = 0;
  std::vector<Item> items;
};

struct Server::Impl {
  Impl(std::vector<ServedModel> served, ServeOptions opts);

  ServeOptions options;
  std::vector<ServedModel> models;
  Metrics metrics;
  LanguageDetector detector;
  RateLimiter limiter;
  std::map<std::pair<std::string, std::string>, std::size_t> model_of;  // (source, target)
  // Per model, its decoding loops (ServeOptions::inter_threads).
  std::vector<std::vector<std::unique_ptr<Scheduler>>> schedulers;
  std::unique_ptr<HttpServer> http;
  std::atomic<bool> draining{false};

  // Every request, on the I/O thread.
  void handle(HttpRequest request, std::shared_ptr<Exchange> exchange);

  // The routes (each answers through `exchange`, or throws ApiError).
  void translate(const HttpRequest& request, const std::shared_ptr<Exchange>& exchange,
                 bool viewer);
  HttpResponse detect(const HttpRequest& request);
  HttpResponse languages() const;
  HttpResponse frontend_settings() const;
  HttpResponse health() const;

  // A request's fields from its body (by Content-Type) and query string.
  Fields fields(const HttpRequest& request) const;
  // 403 unless the request carries one of the API keys (when there are any).
  void check_key(const Fields& fields) const;
  // 429 when the client is past --req-limit.
  void check_rate(const HttpRequest& request);
  // The q strings (400 when missing or empty), within the limits.
  std::vector<std::string> texts(const Fields& fields, bool& list) const;
  // The model of a request's language pair (its items' languages, detected
  // for source "auto", into `plan`); 400 for unknown or equal languages, or a
  // pair no model translates.
  std::size_t choose_model(Plan& plan, const std::vector<std::string>& q, const std::string& source,
                           const std::string& target) const;
  // The languages a model translates from.
  bool known_source(const std::string& code) const;
  bool known_target(const std::string& code) const;
};

// Characters (Unicode code points) of UTF-8 text.
std::int64_t count_chars(const std::string& text);

}  // namespace attn::serve
