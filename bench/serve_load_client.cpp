// serve_load_client: the clients of bench/serve_load.py, on Boost.Beast.
//
//   serve_load_client --port P --sentences FILE --clients C
//                     [--host 127.0.0.1] [--source en] [--target fr] [--seconds S]
//
// C kept-alive connections, all driven by one thread (Asio, asynchronous),
// send the lines of FILE as LibreTranslate requests (POST /translate, JSON
// {"q", "source", "target"}), each line once between them in order, or with
// --seconds round and round until that many seconds have passed. The
// connections are opened before the clock starts; a request is timed from
// its first byte written to its answer read. Written to stdout, one JSON
// object a line: each answer {"i": line index, "us": microseconds, "status",
// "text": translatedText or null}, then {"wall_s", "cpu_s"} (the wall time
// from the first request to the last answer, and this process's CPU time
// over it). Exit 1 with one line on stderr if a connection fails.
//
// One thread and no parser of its own: the generator takes as little of the
// cores as a client can, so that on a machine shared with the server the
// server's figures are the server's.
#include <sys/resource.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1", source = "en", target = "fr", sentences;
  int port = 0, clients = 1;
  double seconds = 0;
};

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "serve_load_client: %s\n", message.c_str());
  std::exit(1);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) fail(flag + " needs a value");
    const std::string value = argv[++i];
    try {
      if (flag == "--host")
        o.host = value;
      else if (flag == "--port")
        o.port = std::stoi(value);
      else if (flag == "--sentences")
        o.sentences = value;
      else if (flag == "--clients")
        o.clients = std::stoi(value);
      else if (flag == "--source")
        o.source = value;
      else if (flag == "--target")
        o.target = value;
      else if (flag == "--seconds")
        o.seconds = std::stod(value);
      else
        fail("unknown flag " + flag);
    } catch (const std::logic_error&) {
      fail(flag + ": not a number: " + value);
    }
  }
  if (o.port <= 0 || o.port > 65535) fail("--port: 1 to 65535");
  if (o.clients < 1) fail("--clients: at least 1");
  if (o.sentences.empty()) fail("--sentences FILE is required");
  return o;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// What every connection shares: the bodies, the next line to send, the end.
struct Work {
  Options options;
  std::vector<std::string> bodies;
  std::size_t next = 0;
  Clock::time_point until = Clock::time_point::max();
  std::string out;  // the answers' lines, written at the end

  // The next line's index, or false when every line was sent (or time is up).
  bool take(std::size_t& i) {
    if (options.seconds > 0) {
      if (Clock::now() >= until) return false;
      i = next++ % bodies.size();
      return true;
    }
    if (next >= bodies.size()) return false;
    i = next++;
    return true;
  }
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(asio::io_context& io, Work& work) : stream_(io), work_(work) {}

  void connect(const asio::ip::tcp::resolver::results_type& at) {
    beast::error_code ec;
    stream_.socket().connect(*at.begin(), ec);
    if (ec) fail("connect: " + ec.message());
    stream_.socket().set_option(asio::ip::tcp::no_delay(true));
  }

  void send() {
    if (!work_.take(index_)) {
      beast::error_code ec;
      stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
      return;
    }
    request_ = {http::verb::post, "/translate", 11};
    request_.set(http::field::host, work_.options.host);
    request_.set(http::field::content_type, "application/json");
    request_.keep_alive(true);
    request_.body() = work_.bodies[index_];
    request_.prepare_payload();
    response_ = {};
    start_ = Clock::now();
    http::async_write(stream_, request_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        if (ec) fail("write: " + ec.message());
                        self->receive();
                      });
  }

 private:
  void receive() {
    http::async_read(stream_, buffer_, response_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) fail("read: " + ec.message());
                       self->record();
                       self->send();
                     });
  }

  void record() {
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count();
    nlohmann::json line{{"i", index_}, {"us", us}, {"status", response_.result_int()}};
    line["text"] = nullptr;
    if (response_.result_int() == 200) {
      const auto body = nlohmann::json::parse(response_.body(), nullptr, false);
      if (body.is_object() && body.contains("translatedText"))
        line["text"] = body["translatedText"];
    }
    work_.out += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    work_.out += '\n';
  }

  beast::tcp_stream stream_;
  Work& work_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  std::size_t index_ = 0;
  Clock::time_point start_;
};

}  // namespace

int main(int argc, char** argv) {
  Work work;
  work.options = parse(argc, argv);
  const Options& o = work.options;
  std::ifstream in(o.sentences);
  if (!in) fail("cannot read " + o.sentences);
  for (std::string line; std::getline(in, line);)
    work.bodies.push_back(
        nlohmann::json{{"q", line}, {"source", o.source}, {"target", o.target}}.dump(
            -1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (work.bodies.empty()) fail(o.sentences + " holds no line");

  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  beast::error_code ec;
  const auto at = resolver.resolve(o.host, std::to_string(o.port), ec);
  if (ec) fail("resolve " + o.host + ": " + ec.message());
  std::vector<std::shared_ptr<Connection>> connections;
  for (int c = 0; c < o.clients; ++c) {
    connections.push_back(std::make_shared<Connection>(io, work));
    connections.back()->connect(at);
  }
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  if (o.seconds > 0)
    work.until =
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  for (auto& c : connections) c->send();
  connections.clear();  // each lives while its handlers do
  io.run();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  std::fwrite(work.out.data(), 1, work.out.size(), stdout);
  std::printf("%s\n", nlohmann::json{{"wall_s", wall}, {"cpu_s", cpu}}.dump().c_str());
  return 0;
}
