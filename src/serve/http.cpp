// The HTTP/1.1 server on Boost.Beast (src/serve/http.h).
#include "serve/http.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "attn/core/error.h"

namespace attn::serve {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

HttpResponse error_response(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = nlohmann::json{{"error", message}}.dump(-1, ' ', false,
                                                   nlohmann::json::error_handler_t::replace);
  return r;
}

namespace {

// After an answer that ends a connection whose request was not read to its
// end (413, a malformed request), the unread bytes are read and dropped
// for at most this long before the socket closes: closing with unread data
// would reset the connection, and the client could lose the answer.
constexpr auto kLinger = std::chrono::seconds(5);
constexpr std::size_t kLingerBytes = std::size_t{64} << 20;
// The answer of a connection refused at the connection limit.
constexpr const char* kRefused =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    "Connection: close\r\nContent-Length: 56\r\n\r\n"
    "{\"error\":\"too many connections; try again in a moment\"}\n";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

struct Session;

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  HttpOptions options;
  Handler handler;
  Metrics& metrics;
  Logger logger;
  std::set<Session*> sessions;  // I/O thread only
  std::atomic<std::int64_t> in_flight{0};
  std::atomic<bool> draining{false};
  std::uint16_t port = 0;
  // Destroyed first (reverse order), while the members above still live:
  // the handlers it destroys hold sessions, whose destructors use them.
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_retry{ioc};
  std::thread thread;

  Impl(HttpOptions o, Handler h, Metrics& m, Logger l)
      : options(std::move(o)), handler(std::move(h)), metrics(m), logger(std::move(l)) {}
  void accept();
  void refuse(tcp::socket socket);
};

class ExchangeImpl;

struct Session : std::enable_shared_from_this<Session> {
  Session(tcp::socket socket, HttpServer::Impl& server) : stream(std::move(socket)), srv(server) {
    beast::error_code ec;
    const auto remote = stream.socket().remote_endpoint(ec);
    client = ec ? std::string("?") : remote.address().to_string();
    srv.sessions.insert(this);
    srv.metrics.connections(static_cast<std::int64_t>(srv.sessions.size()));
  }
  ~Session() {
    srv.sessions.erase(this);
    srv.metrics.connections(static_cast<std::int64_t>(srv.sessions.size()));
  }

  void read_header();
  void on_header(beast::error_code ec);
  void read_body();
  void on_body(beast::error_code ec);
  void fail_read(beast::error_code ec);
  void dispatch();
  void watch();
  void on_readable(beast::error_code ec);
  void write(HttpResponse response);
  void finish_write(beast::error_code ec, bool close_after);
  void linger();
  void close() {
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream.close();
  }
  bool idle() const { return !busy; }
  bool draining() const { return srv.draining.load(); }

  beast::tcp_stream stream;
  HttpServer::Impl& srv;
  beast::flat_buffer buffer;
  std::optional<http::request_parser<http::string_body>> parser;
  std::string client, method, path, log_text;
  unsigned version = 11;
  bool keep_alive = true, head = false, busy = false, gone = false;
  Clock::time_point started;
  std::shared_ptr<ExchangeImpl> exchange;
  std::array<char, 4096> drain_buffer{};
  std::size_t drained = 0;
};

class ExchangeImpl : public Exchange, public std::enable_shared_from_this<ExchangeImpl> {
 public:
  ExchangeImpl(std::weak_ptr<Session> session, std::weak_ptr<HttpServer::Impl> server,
               AccessRecord record)
      : session_(std::move(session)),
        server_(std::move(server)),
        record_(std::move(record)),
        started_(Clock::now()) {}
  void respond(HttpResponse response) override {
    if (answered_.exchange(true)) return;
    auto server = server_.lock();
    if (!server) return;
    // The task holds the server weakly: one left in a stopped context must
    // not keep it alive.
    net::post(server->ioc, [self = shared_from_this(), response = std::move(response)]() mutable {
      self->deliver(std::move(response));
    });
  }
  void on_disconnect(std::function<void()> f) override { on_gone_ = std::move(f); }
  void log_text(std::string text) override { text_ = std::move(text); }
  // I/O thread.
  void client_gone() {
    if (answered_.load() || !on_gone_) return;
    auto f = std::move(on_gone_);
    f();
  }
  const std::string& text() const { return text_; }

 private:
  // On the I/O thread: the answer written, or (its client gone) counted and
  // logged as 499, nginx's "client closed request".
  void deliver(HttpResponse response) {
    if (auto s = session_.lock(); s && !s->gone) return s->write(std::move(response));
    auto server = server_.lock();
    if (!server) return;
    --server->in_flight;
    const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    server->metrics.request_done(route_label(record_.path), 499, seconds);
    AccessRecord r = record_;
    r.status = 499;
    r.ms = seconds * 1000;
    r.text = text_;
    if (server->logger) server->logger(r);
  }

  std::weak_ptr<Session> session_;
  std::weak_ptr<HttpServer::Impl> server_;
  AccessRecord record_;
  Clock::time_point started_;
  std::atomic<bool> answered_{false};
  std::function<void()> on_gone_;
  std::string text_;
};

void Session::read_header() {
  parser.emplace();
  parser->header_limit(srv.options.max_header_bytes);
  parser->body_limit(srv.options.max_body_bytes);
  stream.expires_after(srv.options.read_timeout);
  http::async_read_header(
      stream, buffer, *parser,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
}

void Session::on_header(beast::error_code ec) {
  if (ec) return fail_read(ec);
  auto& req = parser->get();
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    // The client waits for this before it sends the body (curl, for more than 1 KB).
    auto text = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    net::async_write(stream, net::buffer(*text),
                     [self = shared_from_this(), text](beast::error_code ec2, std::size_t) {
                       if (ec2) return self->close();
                       self->read_body();
                     });
    return;
  }
  read_body();
}

void Session::read_body() {
  stream.expires_after(srv.options.read_timeout);
  http::async_read(
      stream, buffer, *parser,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_body(ec); });
}

void Session::on_body(beast::error_code ec) {
  if (ec) return fail_read(ec);
  dispatch();
}

void Session::fail_read(beast::error_code ec) {
  // A client that left or stalled (slowloris, a body that never ends): closed.
  if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == net::error::operation_aborted ||
      ec == http::error::partial_message || draining())
    return close();
  keep_alive = false;
  head = false;
  method = parser && parser->is_header_done() ? std::string(parser->get().method_string()) : "?";
  path = parser && parser->is_header_done() ? std::string(parser->get().target()) : "?";
  path = path.substr(0, path.find('?'));
  started = Clock::now();
  busy = true;
  ++srv.in_flight;
  if (ec == http::error::body_limit)
    write(error_response(
        413, fmt::format("the request body is larger than {} bytes", srv.options.max_body_bytes)));
  else if (ec == http::error::header_limit)
    write(error_response(431, fmt::format("the request's headers are larger than {} bytes",
                                          srv.options.max_header_bytes)));
  else
    write(error_response(400, "malformed HTTP request: " + ec.message()));
}

void Session::dispatch() {
  auto& req = parser->get();
  HttpRequest r;
  r.method = std::string(req.method_string());
  const std::string target(req.target());
  const std::size_t q = target.find('?');
  r.path = target.substr(0, q);
  r.query = q == std::string::npos ? "" : target.substr(q + 1);
  const std::string type(req[http::field::content_type]);
  r.content_type = lower(type.substr(0, type.find(';')));
  while (!r.content_type.empty() && r.content_type.back() == ' ') r.content_type.pop_back();
  r.body = std::move(req.body());
  r.client = client;
  method = r.method;
  path = r.path;
  version = req.version();
  keep_alive = req.keep_alive();
  head = req.method() == http::verb::head;
  log_text.clear();
  started = Clock::now();
  busy = true;
  ++srv.in_flight;
  exchange = std::make_shared<ExchangeImpl>(weak_from_this(), srv.weak_from_this(),
                                            AccessRecord{client, method, path, "", 0, 0, 0});
  if (draining()) {
    exchange->respond(error_response(503, "the server is shutting down"));
    return;
  }
  stream.expires_never();
  watch();
  try {
    srv.handler(std::move(r), exchange);
  } catch (const std::exception& e) {
    exchange->respond(error_response(500, std::string("internal error: ") + e.what()));
  }
}

// While the request is answered, a wait for the socket to become readable:
// end of file then means the client left (its work is dropped).
void Session::watch() {
  stream.socket().async_wait(
      tcp::socket::wait_read,
      [self = shared_from_this()](beast::error_code ec) { self->on_readable(ec); });
}

void Session::on_readable(beast::error_code ec) {
  if (ec || !busy || gone) return;  // cancelled: the answer is being written
  char c = 0;
  const ssize_t n = ::recv(stream.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return;  // more bytes (a pipelined request): the client is there
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return watch();
  gone = true;
  auto ex = exchange;
  close();
  if (ex) ex->client_gone();
}

void Session::write(HttpResponse response) {
  --srv.in_flight;
  if (exchange) log_text = exchange->text();
  beast::error_code ignored;
  stream.socket().cancel(ignored);  // the disconnect watch
  const bool close_after = !keep_alive || draining();
  auto res = std::make_shared<http::response<http::string_body>>();
  res->version(version);
  res->result(static_cast<unsigned>(response.status));
  res->set(http::field::server, "attn");
  res->set(http::field::content_type, response.content_type == "application/json"
                                          ? "application/json; charset=utf-8"
                                          : response.content_type);
  for (const auto& [k, v] : srv.options.headers) res->set(k, v);
  for (const auto& [k, v] : response.headers) res->set(k, v);
  res->keep_alive(!close_after);
  const std::size_t bytes = response.body.size();
  if (head) {
    res->content_length(bytes);  // the GET's length, no body
  } else {
    res->body() = std::move(response.body);
    res->prepare_payload();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  srv.metrics.request_done(route_label(path), response.status, seconds);
  if (srv.logger)
    srv.logger({client, method, path, log_text, response.status, seconds * 1000, bytes});
  stream.expires_after(srv.options.write_timeout);
  http::async_write(
      stream, *res,
      [self = shared_from_this(), res, close_after](beast::error_code ec, std::size_t) {
        self->finish_write(ec, close_after);
      });
}

void Session::finish_write(beast::error_code ec, bool close_after) {
  busy = false;
  exchange.reset();
  if (ec) return close();
  if (!close_after) return read_header();
  // The request may not have been read to its end: read and drop what the
  // client still sends, then close (kLinger).
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream.expires_after(kLinger);
  linger();
}

void Session::linger() {
  stream.async_read_some(net::buffer(drain_buffer),
                         [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                           self->drained += n;
                           if (ec || self->drained > kLingerBytes) return self->close();
                           self->linger();
                         });
}

void HttpServer::Impl::refuse(tcp::socket socket) {
  metrics.connection_refused();
  auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
  stream->expires_after(std::chrono::seconds(1));
  net::async_write(*stream, net::buffer(kRefused, std::strlen(kRefused)),
                   [stream](beast::error_code, std::size_t) {
                     beast::error_code ec;
                     stream->socket().shutdown(tcp::socket::shutdown_both, ec);
                     stream->close();
                   });
}

// The handlers hold the server by a plain pointer: it outlives them (its
// I/O thread is joined before it goes, and a handler left in the stopped
// context is destroyed with it); a shared one would keep it alive forever.
void HttpServer::Impl::accept() {
  acceptor.async_accept([self = this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !self->acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors (EMFILE, ENFILE) or another passing error: try
      // again shortly rather than spin.
      self->accept_retry.expires_after(std::chrono::milliseconds(50));
      self->accept_retry.async_wait([self](beast::error_code e) {
        if (!e) self->accept();
      });
      return;
    }
    if (self->sessions.size() >= self->options.max_connections)
      self->refuse(std::move(socket));
    else
      std::make_shared<Session>(std::move(socket), *self)->read_header();
    self->accept();
  });
}

HttpServer::HttpServer(HttpOptions options, Handler handler, Metrics& metrics, Logger logger)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(handler), metrics,
                                   std::move(logger))) {
  Impl& m = *impl_;
  beast::error_code ec;
  const auto address = net::ip::make_address(m.options.host, ec);
  ATTN_CHECK(!ec, IOError, "serve: '{}' is not an IP address ({})", m.options.host, ec.message());
  const tcp::endpoint endpoint(address, m.options.port);
  m.acceptor.open(endpoint.protocol(), ec);
  if (!ec) m.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(endpoint, ec);
  if (!ec) m.acceptor.listen(net::socket_base::max_listen_connections, ec);
  ATTN_CHECK(!ec, IOError, "serve: cannot listen on {}:{}: {}", m.options.host, m.options.port,
             ec.message());
  m.port = m.acceptor.local_endpoint().port();
  m.accept();
  m.thread = std::thread([impl = impl_] { impl->ioc.run(); });
}

HttpServer::~HttpServer() { stop(); }

std::uint16_t HttpServer::port() const { return impl_->port; }

std::int64_t HttpServer::in_flight() const { return impl_->in_flight.load(); }

void HttpServer::drain() {
  impl_->draining = true;
  net::post(impl_->ioc, [impl = impl_.get()] {
    beast::error_code ec;
    impl->acceptor.close(ec);
    std::vector<Session*> idle;
    for (Session* s : impl->sessions)
      if (s->idle()) idle.push_back(s);
    for (Session* s : idle) s->close();
  });
}

void HttpServer::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->draining = true;
  net::post(impl_->ioc, [impl = impl_.get()] {
    beast::error_code ec;
    impl->acceptor.close(ec);
    impl->accept_retry.cancel();
    for (Session* s : impl->sessions) s->close();
    impl->ioc.stop();
  });
  impl_->thread.join();
}

}  // namespace attn::serve
