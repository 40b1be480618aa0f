// attn serve — the translator as an HTTP service: LibreTranslate's API, a
// web page, continuous batching (attn/serve/server.h, docs/serve.md).
#include <sys/resource.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "attn/core/threads.h"
#include "attn/ops/quantize.h"
#include "attn/seq2seq/translator.h"
#include "attn/serve/server.h"
#include "commands.h"
#include "model_args.h"
#include "precision_flag.h"
#include "signals.h"

namespace attn::cli {
namespace {

struct ServeArgs {
  std::vector<std::string> models, langs;
  serve::ServeOptions options;
  std::string api_keys, precision = "f32", quantize = "auto";
  int port = 5000;
  double grace = 10;
};

// Descriptors: the soft limit raised to the hard one, and the connection
// cap kept below it (a refused connection still needs one for a moment;
// the models, logs and the listening socket need a few more).
std::size_t connection_cap(std::size_t wanted) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return wanted;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  constexpr rlim_t kReserve = 64;
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > wanted + 2 * kReserve) return wanted;
  const std::size_t cap =
      rl.rlim_cur > 2 * kReserve ? static_cast<std::size_t>((rl.rlim_cur - kReserve) / 2) : 1;
  fmt::print(stderr,
             "attn: warning: --max-connections {}: this process may open {} files (ulimit -n); "
             "serving at most {} connections\n",
             wanted, static_cast<unsigned long long>(rl.rlim_cur), cap);
  return cap;
}

int run_serve(ServeArgs& a) {
  if (a.langs.size() > a.models.size())
    throw CLI::ValidationError(
        "--lang", fmt::format("{} language pairs for {} models", a.langs.size(), a.models.size()));
  serve::ServeOptions& o = a.options;
  o.port = static_cast<std::uint16_t>(a.port);
  o.precision = precision_for(a.precision, "decoding in f32");
  if (!a.api_keys.empty()) o.api_keys = serve::read_api_keys(a.api_keys);
  o.max_connections = connection_cap(o.max_connections);
  // The decoding threads are not this one: they are told the count
  // (attn's --threads, ATTN_NUM_THREADS, or the cores) that this one has.
  if (o.threads == 0) o.threads = get_num_threads();
  // This thread forms no team of its own (loading the models runs on it
  // alone): libgomp keeps a team's idle workers spinning, ready for the
  // next fork, only while the threads it manages are no more than the
  // cores, and the decoding loops' teams need them (a lone sentence on two
  // threads: 2.6 ms with this thread's team gone, 4.2 ms with it).
  set_num_threads(1);
  std::vector<serve::ServedModel> models;
  for (std::size_t i = 0; i < a.models.size(); ++i) {
    serve::ServedModel m;
    m.dir = a.models[i];
    m.model = load_model_for_cli(m.dir);  // read once, checked against its manifest
    // The languages the model directory records (config.json), unless
    // --lang names them; serve::parse_language_pair reads --lang.
    if (i < a.langs.size()) {
      try {
        std::tie(m.source, m.target) = serve::parse_language_pair(a.langs[i]);
      } catch (const ValueError& e) {
        throw CLI::ValidationError("--lang", e.what());
      }
    } else {
      m.source = m.model.config.source_lang;
      m.target = m.model.config.target_lang;
      if (m.source.empty() || m.target.empty())
        throw ErrorWithHint(fmt::format("model '{}' records no languages", m.dir),
                            fmt::format("name them with --lang SRC-TGT (one per --model, in "
                                        "order), or record them with 'attn convert "
                                        "--source-lang SRC --target-lang TGT'"));
    }
    models.push_back(std::move(m));
  }
  std::string pairs;
  for (const serve::ServedModel& m : models)
    pairs += (pairs.empty() ? "" : ", ") + m.source + "-" + m.target;
  // --quantize auto: int8 where every model's own default is int8 (a
  // subword model on a CPU with an int8 kernel), as attn translate decides.
  o.int8 = a.quantize == "int8";
  if (a.quantize == "auto") {
    o.int8 = true;
    for (const serve::ServedModel& m : models)
      o.int8 = o.int8 && seq2seq::default_quantization(m.model.config) == Quantization::int8;
  }
  if (o.int8 && !int8_supported()) {
    fmt::print(stderr, "attn: warning: --quantize int8: int8 products: {}; decoding in f32\n",
               attn::int8_description());
    o.int8 = false;
  }
  StopScope stop("\nattn serve: interrupted again; exiting now\n");
  serve::Server server(std::move(models), o);
  fmt::print("attn serve: listening on http://{}:{} ({})\n", o.host, server.port(), pairs);
  flush_stdout();
  // A signal asks to stop (signals.h: it is received by a thread of its
  // own, never by a handler); this thread only waits for it.
  while (stop_signal() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fmt::print(stderr,
             "attn serve: stopping: no new connections; finishing the requests in flight (up to "
             "{} s; a second signal ends at once)\n",
             a.grace);
  const std::int64_t cut = server.shutdown(a.grace);
  if (cut > 0)
    fmt::print(stderr, "attn serve: {} requests were still running after {} s: answered 503\n", cut,
               a.grace);
  fmt::print(stderr, "attn serve: stopped\n");
  return 0;
}

void setup_serve(CLI::App& parent, Context& ctx) {
  auto a = std::make_shared<ServeArgs>();
  serve::ServeOptions& o = a->options;
  CLI::App* sub = parent.add_subcommand(
      "serve", "Serve translation models over HTTP: LibreTranslate's API and a web page");
  sub->add_option("--model", a->models, "Model directory (one language pair); repeat for more")
      ->required();
  sub->add_option("--lang", a->langs,
                  "The language pair of each --model, in order, as SOURCE-TARGET (ISO 639-1); "
                  "default: the languages its directory records")
      ->option_text("SRC-TGT");
  sub->add_option("--host", o.host, "Address to listen on")->capture_default_str();
  sub->add_option("--port", a->port, "Port; 0: a free one (printed)")
      ->check(in_range(0, 65535))
      ->capture_default_str();
  sub->add_option("--char-limit", o.char_limit,
                  "Most characters of a request's text (all of q); 0: none")
      ->check(in_range<std::int64_t>(0, 1 << 30))
      ->capture_default_str();
  sub->add_option("--batch-limit", o.batch_limit, "Most strings in a q list; 0: none")
      ->check(in_range<std::int64_t>(0, 1 << 30))
      ->capture_default_str();
  sub->add_option("--req-limit", o.req_limit, "Most requests per client per minute; 0: none")
      ->check(in_range<std::int64_t>(0, 1 << 30))
      ->capture_default_str();
  add_file_option(sub, "--api-keys", a->api_keys,
                  "A file of API keys, one per line: every translation then needs one (api_key)");
  sub->add_option("--cors-origin", o.cors_origin,
                  "Access-Control-Allow-Origin of every answer; '' for none")
      ->capture_default_str();
  sub->add_option("--max-body-bytes", o.max_body_bytes, "Largest request body (more: 413)")
      ->check(in_range<std::uint64_t>(1024, std::uint64_t{1} << 32))
      ->capture_default_str();
  sub->add_option("--max-queue", o.max_queue,
                  "Most sentences waiting for a model's decoding batch (more: 503)")
      ->check(in_range<std::int64_t>(1, 1 << 24))
      ->capture_default_str();
  sub->add_option("--max-batch-tokens", o.max_batch_tokens,
                  "A decoding batch's budget: beam size x (source + longest output) tokens "
                  "summed over its sentences")
      ->check(in_range<std::int64_t>(16, 1 << 26))
      ->capture_default_str();
  sub->add_option("--max-batch-size", o.max_batch_size,
                  "At most N sentences in a decoding batch (each --beam-size rows; a batch of "
                  "mixed beam sizes holds at most the rows of N of the newcomer's). 0 "
                  "(default): attn translate's batch, 32 sentences, or in int8 and bf16 64 rows "
                  "(16 sentences of beam 4), whose caches stay in the CPU's")
      ->check(in_range<std::int64_t>(0, 1 << 20))
      ->option_text("N")
      ->capture_default_str();
  sub->add_option("--request-timeout", o.request_timeout,
                  "Seconds from a request's arrival to its answer (then 503)")
      ->check(in_range(0.001, 86400.0))
      ->capture_default_str();
  sub->add_option("--read-timeout", o.read_timeout,
                  "Seconds to read a request's headers, and then its body (then the connection "
                  "closes); also how long an idle connection is kept")
      ->check(in_range(0.001, 3600.0))
      ->capture_default_str();
  sub->add_option("--max-connections", o.max_connections,
                  "Open connections at once; more are answered 503 and closed")
      ->check(in_range<std::size_t>(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--threads", o.threads, "Threads of each model's decoding (default: --threads)")
      ->check(in_range(1, 1024))
      ->option_text("N");
  sub->add_option("--inter-threads", o.inter_threads,
                  "Decoding loops per model, each its own continuous batch on --threads / N "
                  "threads; a request goes to the loop with the fewest sentences (as translate's "
                  "--inter-threads); while the other loops are idle, a model's first loop runs on "
                  "all the threads. 0 (default): one loop per thread; the translations are the "
                  "same")
      ->check(in_range(0, 1024))
      ->option_text("N");
  add_precision_flag(sub, a->precision, "");
  sub->add_option("--quantize", a->quantize,
                  "none (f32), int8 (Linear weights in int8, on AVX-512 VNNI or AVX2, else "
                  "f32), or auto: int8 where the CPU runs it, as attn translate")
      ->check(CLI::IsMember({"auto", "none", "int8"}))
      ->capture_default_str();
  sub->add_option("--grace", a->grace,
                  "Seconds that SIGTERM or Ctrl-C lets requests in flight finish")
      ->check(in_range(0.0, 86400.0))
      ->capture_default_str();
  sub->add_flag("--log-text", o.log_text,
                "Add each request's text to its access-log line (never an API key)");
  sub->footer(
      "One access-log line per request goes to stderr: client, method and path, status, "
      "milliseconds, bytes. SIGTERM or Ctrl-C: stop accepting, finish what is in flight (up to "
      "--grace seconds), exit 0; a second signal exits at once. See docs/serve.md.");
  set_action(sub, ctx, [a](const Context&) { return run_serve(*a); });
}

const Registration serve_reg{"", "serve", 16, setup_serve};

}  // namespace
}  // namespace attn::cli
