// src/serve/http.h — internal: the HTTP/1.1 server, on Boost.Beast over
// Boost.Asio (Debian's libboost-dev; header-only).
//
// Why Beast: every connection is a few asynchronous operations on one I/O
// thread, not a thread, so 10,000 idle connections cost memory, not
// threads, and a client that sends its headers one byte a minute
// (slowloris) holds nothing that another client needs. Each phase has its
// own deadline (beast::tcp_stream), the parser its limits (header bytes,
// body bytes, chunked or not), the connection count a cap checked at
// accept, and a client that leaves while its request is decoded is seen
// (an asynchronous wait for the socket to become readable, then a peek
// that reads end of file) so that its work is dropped. cpp-httplib 0.11,
// the other library considered, serves each connection on one thread of a
// fixed pool (8 slow clients would stall it), has no connection cap, and
// cannot tell a handler that its client left. Parsing HTTP is Beast's; this
// file only routes its messages.
//
// Threads: one I/O thread runs every connection; Exchange::respond may be
// called from any thread (it posts to the I/O thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "serve/metrics.h"

namespace attn::serve {

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", "HEAD", ...
  std::string path;  // the target before '?'
  std::string query;  // after '?'
  std::string content_type;  // the media type, lowercased, without parameters
  std::string body;
  std::string client;  // the peer's address
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// A JSON error body {"error": message}, LibreTranslate's.
HttpResponse error_response(int status, const std::string& message);

// One request being answered.
class Exchange {
 public:
  virtual ~Exchange() = default;
  // The answer (once; later calls are ignored). Any thread.
  virtual void respond(HttpResponse response) = 0;
  // `f` runs on the I/O thread if the client leaves before the answer (at
  // most once; not after the answer).
  virtual void on_disconnect(std::function<void()> f) = 0;
  // Extra text for the request's access-log line (--log-text).
  virtual void log_text(std::string text) = 0;
};

struct HttpOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 5000;  // 0: a free port
  std::size_t max_connections = 1024;
  std::uint64_t max_body_bytes = 1 << 20;
  std::uint32_t max_header_bytes = 16 << 10;
  // Reading a request's headers (and waiting for the next request on a
  // kept-alive connection), reading its body, writing an answer.
  std::chrono::milliseconds read_timeout{10000}, write_timeout{10000};
  // Headers on every answer (CORS).
  std::vector<std::pair<std::string, std::string>> headers;
};

// An access-log line's fields.
struct AccessRecord {
  std::string client, method, path, text;
  int status = 0;
  double ms = 0;
  std::size_t bytes = 0;
};

class HttpServer {
 public:
  using Handler = std::function<void(HttpRequest, std::shared_ptr<Exchange>)>;
  using Logger = std::function<void(const AccessRecord&)>;
  // Binds (IOError naming the address when it cannot) and starts the I/O
  // thread, which accepts and answers until stop().
  HttpServer(HttpOptions options, Handler handler, Metrics& metrics, Logger logger);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  std::uint16_t port() const;
  // Stops accepting and closes idle connections; requests in flight are
  // still answered (each connection then closes), new ones on open
  // connections get 503.
  void drain();
  // Requests read and not yet answered.
  std::int64_t in_flight() const;
  // Closes every connection and ends the I/O thread (joined).
  void stop();

  struct Impl;  // http.cpp: the I/O context, the acceptor, the sessions

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace attn::serve
