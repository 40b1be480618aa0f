// attn/serve/server.h — attn as a translation server: LibreTranslate's HTTP
// API (POST /translate, GET /languages, POST /detect, GET
// /frontend/settings), a web page at /, /health and /metrics, with
// continuous batching across connections (docs/serve.md).
//
//   std::vector<serve::ServedModel> models;
//   models.push_back({"models/en-fr", seq2seq::load_model("models/en-fr"), "en", "fr"});
//   serve::Server server(std::move(models), serve::ServeOptions{});
//   fmt::print("listening on port {}\n", server.port());
//   ...                       // until asked to stop
//   server.shutdown(10.0);    // stop accepting, finish what is in flight
//
// Each model is one language pair, decoded by one loop of its own
// (a seq2seq::DecodingBatch that sentences of every connection join and
// leave step by step), in the decoding defaults of seq2seq::defaults_for
// unless a request says otherwise. A sentence's translation is the one
// `attn translate` gives it, whatever else is decoded beside it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attn/ops/precision.h"
#include "attn/seq2seq/model_dir.h"

namespace attn::serve {

struct ServedModel {
  std::string dir;  // where it was loaded from (its data/*.tsv teach the detector)
  seq2seq::LoadedModel model;  // a SentencePiece Transformer
  std::string source, target;  // ISO 639-1 codes
};

struct ServeOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 5000;  // 0: a free port (Server::port says which)
  // LibreTranslate's limits; a value <= 0 means none.
  std::int64_t char_limit = 10000;  // characters of all of a request's q together
  std::int64_t batch_limit = 1000;  // strings in a q list
  std::int64_t req_limit = 0;  // requests per client per minute
  std::set<std::string> api_keys;  // when not empty, every translation needs one
  std::string cors_origin = "*";  // Access-Control-Allow-Origin; "": no CORS headers
  // attn's own limits.
  std::uint64_t max_body_bytes = 1 << 20;
  std::int64_t max_queue = 2048;  // sentences waiting per model (more: 503)
  double request_timeout = 60;  // seconds from a request's arrival to its answer
  std::size_t max_connections = 1024;  // open at once (more: refused with 503)
  double read_timeout = 10;  // seconds to read a request (headers, then body)
  std::int64_t max_batch_tokens = 16384;  // a decoding batch's cached tokens
  std::int64_t max_batch_size = 0;  // its sentences (SchedulerOptions); 0: automatic
  // Decoding: threads for the ops (0: attn's default), precision, int8.
  int threads = 0;
  // Decoding loops per model, each its own continuous batch on threads /
  // inter_threads of the threads (CTranslate2's inter_threads; attn
  // translate --inter-threads); a request goes to the loop with the fewest
  // sentences. Once the server's other loops are idle, a model's first
  // loop runs on all the threads (a lone sentence as fast as attn
  // translate's). 0: one loop per thread.
  int inter_threads = 0;
  Precision precision = Precision::f32;
  bool int8 = false;
  // One access-log line per request: method, path, status, milliseconds,
  // bytes; the request's text only with log_text. Keys are never logged.
  bool log_text = false;
  std::function<void(const std::string&)> log;  // null: stderr
};

// A model's language pair (source, target) from a "SRC-TGT" text ("en-fr"):
// the one place that decides it (`attn serve --lang`), so that reading a
// pair recorded in the model directory is a change here alone. ValueError
// for another form.
std::pair<std::string, std::string> parse_language_pair(const std::string& text);

// The keys of an --api-keys file: one per line; blank lines and lines
// starting with '#' are skipped, spaces around a key dropped. IOError for a
// file that cannot be read or holds no key.
std::set<std::string> read_api_keys(const std::string& path);

class Server {
 public:
  // Builds the language detector, starts each model's decoding loop and the
  // HTTP server (IOError when the address cannot be bound; ValueError for a
  // model that is not a SentencePiece Transformer, or two for one pair).
  Server(std::vector<ServedModel> models, ServeOptions options);
  ~Server();  // shutdown(0) if still running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::uint16_t port() const;
  // Stops accepting (/health then answers 503), lets the requests in flight
  // finish for up to `grace_seconds`, answers the rest 503, and stops every
  // thread. Returns how many requests were cut at the end of the grace.
  std::int64_t shutdown(double grace_seconds);

  struct Impl;  // src/serve/service.cpp

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace attn::serve
