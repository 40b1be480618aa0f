// POST /translate, /detect and /attention: LibreTranslate's requests read,
// checked, decoded through the model's loop, answered (src/serve/service.h).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attn/core/error.h"
#include "attn/io/json.h"
#include "attn/seq2seq/translator.h"
#include "attn/viz/attention_viewer.h"
#include "serve/segments.h"
#include "serve/service.h"

namespace attn::serve {

namespace {

// Hypothesis `i` of a sentence, or its best when it has fewer.
const seq2seq::Hypothesis& nth_or_best(const std::vector<seq2seq::Hypothesis>& hyps,
                                       std::size_t i) {
  return i < hyps.size() ? hyps[i] : hyps.front();
}

// The answer of a job that is done: LibreTranslate's fields, as lists when
// q was one.
HttpResponse answer(const Plan& plan, const Job& job, const data::Tokenizer& tokenizer) {
  nlohmann::json texts = nlohmann::json::array(), alternatives = nlohmann::json::array(),
                 detected = nlohmann::json::array(), attention = nlohmann::json::array();
  for (const Item& item : plan.items) {
    auto joined = [&](std::size_t rank) {
      std::vector<std::string> parts;
      for (std::size_t s : item.sentences) {
        const auto& hyps = job.hypotheses[s];
        parts.push_back(hyps.empty()
                            ? std::string()
                            : tokenizer.decode(nth_or_best(hyps, rank).ids, data::Side::target));
      }
      return join_pieces(item.pieces, parts, plan.html);
    };
    const std::string best = joined(0);
    texts.push_back(best);
    nlohmann::json alts = nlohmann::json::array();
    for (std::int64_t r = 1; r <= plan.alternatives; ++r) {
      const std::string alt = joined(static_cast<std::size_t>(r));
      if (alt != best && std::find(alts.begin(), alts.end(), alt) == alts.end())
        alts.push_back(alt);
    }
    alternatives.push_back(alts);
    detected.push_back({{"confidence", item.confidence}, {"language", item.source}});
    nlohmann::json maps = nlohmann::json::array();
    if (plan.attention)
      for (std::size_t s : item.sentences)
        maps.push_back(nlohmann::json::parse(job.attention_json[s]));
    attention.push_back(maps);
  }
  if (plan.viewer) {
    HttpResponse r;
    r.content_type = "text/html; charset=utf-8";
    r.body = viz::attention_viewer_html(job.attention_json.front(), {});
    r.headers = {{"Content-Security-Policy",
                  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"},
                 {"X-Content-Type-Options", "nosniff"}};
    return r;
  }
  nlohmann::json out;
  out["translatedText"] = plan.list ? texts : texts[0];
  if (plan.alternatives > 0) out["alternatives"] = plan.list ? alternatives : alternatives[0];
  if (plan.auto_source) out["detectedLanguage"] = plan.list ? detected : detected[0];
  if (plan.attention) out["attention"] = plan.list ? attention : attention[0];
  HttpResponse r;
  r.body = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

HttpResponse outcome_response(Outcome outcome, const Job& job, double timeout) {
  switch (outcome) {
    case Outcome::timed_out: {
      HttpResponse r = error_response(
          503, fmt::format("the translation took longer than the server's limit ({} s)", timeout));
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    case Outcome::failed: return error_response(500, "Cannot translate text: " + job.error);
    case Outcome::shut_down: {
      HttpResponse r = error_response(503, "the server is shutting down");
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    default:  // cancelled: the client left; nobody reads this
      return error_response(503, "cancelled");
  }
}

}  // namespace

Fields Server::Impl::fields(const HttpRequest& request) const {
  Fields f;
  const std::string& type = request.content_type;
  if (type == "application/json") {
    f = Fields::from_json(request.body);
  } else if (type == "application/x-www-form-urlencoded") {
    f = Fields::from_form(request.body);
  } else if (type == "multipart/form-data") {
    throw ApiError(400,
                   "Invalid request: multipart/form-data is not read here; send JSON "
                   "(application/json) or application/x-www-form-urlencoded");
  } else if (!request.body.empty()) {
    throw ApiError(400, fmt::format("Invalid request: a body of type '{}'; send JSON "
                                    "(application/json) or application/x-www-form-urlencoded",
                                    type.empty() ? std::string("(none)") : type));
  }
  f.add_query(request.query);
  return f;
}

void Server::Impl::check_key(const Fields& f) const {
  if (options.api_keys.empty()) return;
  const auto key = f.string("api_key");
  if (!key || key->empty())
    throw ApiError(403, "Please contact the server operator to get an API key");
  if (options.api_keys.count(*key) == 0) throw ApiError(403, "Invalid API key");
}

void Server::Impl::check_rate(const HttpRequest& request) {
  const int wait = limiter.admit(request.client);
  if (wait == 0) return;
  ApiError e(429, "Too many request limits violations");
  e.retry_after = wait;
  throw e;
}

std::vector<std::string> Server::Impl::texts(const Fields& f, bool& list) const {
  auto q = f.strings("q", list);
  if (!q || q->empty() || (!list && q->front().empty()))
    throw ApiError(400, "Invalid request: missing q parameter");
  if (list && options.batch_limit > 0 && static_cast<std::int64_t>(q->size()) > options.batch_limit)
    throw ApiError(400, fmt::format("Invalid request: request ({}) exceeds batch limit ({})",
                                    q->size(), options.batch_limit));
  std::int64_t chars = 0;
  for (const std::string& s : *q) chars += count_chars(s);
  if (options.char_limit > 0 && chars > options.char_limit)
    throw ApiError(400, fmt::format("Invalid request: request ({}) exceeds text limit ({})", chars,
                                    options.char_limit));
  return std::move(*q);
}

std::size_t Server::Impl::choose_model(Plan& plan, const std::vector<std::string>& q,
                                       const std::string& source, const std::string& target) const {
  plan.auto_source = source == "auto";
  if (source == target)
    throw ApiError(400, fmt::format("Invalid request: source and target are the same language ({})",
                                    io::printable_excerpt(source, 40)));
  if (!plan.auto_source && !known_source(source))
    throw ApiError(400, fmt::format("{} is not supported", io::printable_excerpt(source, 40)));
  if (!known_target(target))
    throw ApiError(400, fmt::format("{} is not supported", io::printable_excerpt(target, 40)));
  // Each q string's language (detected among those a model translates
  // into `target`), then one model for the request: the first string's.
  std::string from = plan.auto_source ? std::string() : source;
  for (const std::string& text : q) {
    Item item;
    item.source = source;
    item.confidence = 100;
    if (plan.auto_source) {
      for (const auto& g : detector.detect(text))
        if (model_of.count({g.language, target})) {
          item.source = g.language;
          item.confidence = g.confidence;
          break;
        }
      if (item.source == "auto") item.source = from.empty() ? models.front().source : from;
      if (from.empty()) from = item.source;
    }
    plan.items.push_back(std::move(item));
  }
  auto model = model_of.find({from, target});
  if (model == model_of.end())
    throw ApiError(400,
                   fmt::format("{}-{} is not supported: no model translates it", from, target));
  for (Item& item : plan.items) item.source = from;
  return model->second;
}

namespace {

// Each q string cut into pieces (sentences, or HTML text nodes' sentences),
// the translated ones tokenized into the job's sentences.
void add_sentences(Plan& plan, Job& job, const std::vector<std::string>& q, const ServedModel& m) {
  const std::int64_t max_len = m.model.net->max_len();
  for (std::size_t i = 0; i < q.size(); ++i) {
    Item& item = plan.items[i];
    item.pieces = plan.html ? split_html(q[i]) : split_sentences(q[i]);
    for (Piece& p : item.pieces) {
      if (!p.translate) continue;
      std::vector<std::int64_t> ids;
      try {
        ids = seq2seq::sentence_ids(*m.model.tokenizer, p.text, max_len, job.sentences.size());
      } catch (const ValueError&) {
        throw ApiError(400, fmt::format("Invalid request: a sentence longer than the model's {} "
                                        "tokens: '{}'",
                                        max_len - 1, io::printable_excerpt(p.text, 60)));
      }
      if (ids.empty()) {  // blank: kept as it is
        p.translate = false;
        continue;
      }
      item.sentences.push_back(job.sentences.size());
      job.sentences.push_back({p.text, std::move(ids)});
    }
  }
}

}  // namespace

void Server::Impl::translate(const HttpRequest& request, const std::shared_ptr<Exchange>& exchange,
                             bool viewer) {
  check_rate(request);
  const Fields f = fields(request);
  check_key(f);
  auto plan = std::make_shared<Plan>();
  plan->viewer = viewer;
  const std::vector<std::string> q = texts(f, plan->list);
  if (viewer && plan->list) throw ApiError(400, "Invalid request: q must be one string here");
  const auto source = f.string("source");
  const auto target = f.string("target");
  if (!source || source->empty()) throw ApiError(400, "Invalid request: missing source parameter");
  if (!target || target->empty()) throw ApiError(400, "Invalid request: missing target parameter");
  const std::string format = f.string("format").value_or("text");
  if (format != "text" && format != "html")
    throw ApiError(400, "Invalid request: format must be text or html");
  plan->html = format == "html";
  plan->alternatives = f.integer("alternatives", 0, 10).value_or(0);
  plan->attention = viewer || f.boolean("attention").value_or(false);
  const std::size_t model = choose_model(*plan, q, *source, *target);
  const ServedModel& m = models[model];
  auto job = std::make_shared<Job>();
  job->options = seq2seq::defaults_for(m.model.config);
  job->options.beam_size = f.integer("beam_size", 1, 64).value_or(job->options.beam_size);
  job->options.length_penalty =
      f.number("length_penalty", 0, 10).value_or(job->options.length_penalty);
  // Alternatives are the beam's next best: at most beam_size - 1 of them.
  plan->alternatives = std::min<std::int64_t>(plan->alternatives, job->options.beam_size - 1);
  job->options.n_best = 1 + plan->alternatives;
  job->attention = plan->attention;
  job->deadline =
      Job::Clock::now() +
      std::chrono::milliseconds(static_cast<std::int64_t>(options.request_timeout * 1000));
  add_sentences(*plan, *job, q, m);
  if (options.log_text) {
    nlohmann::json logged = q;
    exchange->log_text(logged.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  if (viewer && job->sentences.empty())
    throw ApiError(400, "Invalid request: nothing to translate");
  const data::Tokenizer& tokenizer = *m.model.tokenizer;
  if (job->sentences.empty()) return exchange->respond(answer(*plan, *job, tokenizer));
  const double timeout = options.request_timeout;
  // The job's answer, on the decoding thread when it ends (the job is
  // alive then: the loop holds it).
  job->on_done = [exchange, plan, job = job.get(), &tokenizer, timeout](Outcome outcome) {
    if (outcome != Outcome::done)
      return exchange->respond(outcome_response(outcome, *job, timeout));
    try {
      exchange->respond(answer(*plan, *job, tokenizer));
    } catch (const std::exception& e) {
      exchange->respond(error_response(500, std::string("Cannot translate text: ") + e.what()));
    }
  };
  // The loop with the fewest sentences; the model's queue limit counts
  // what waits in all of its loops.
  Scheduler* scheduler = nullptr;
  std::int64_t waiting = 0;
  for (const auto& loop : schedulers[model]) {
    waiting += loop->queued();
    if (!scheduler || loop->load() < scheduler->load()) scheduler = loop.get();
  }
  const auto n = static_cast<std::int64_t>(job->sentences.size());
  if (waiting + n > options.max_queue || !scheduler->submit(job)) {
    ApiError e(503, draining.load() ? "the server is shutting down"
                                    : "the server is busy: too many sentences are waiting");
    e.retry_after = 1;
    throw e;
  }
  exchange->on_disconnect([job, scheduler] {
    job->cancel();
    scheduler->wake();
  });
}

HttpResponse Server::Impl::detect(const HttpRequest& request) {
  check_rate(request);
  const Fields f = fields(request);
  check_key(f);
  bool list = false;
  const std::vector<std::string> q = texts(f, list);
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& text : q) {
    nlohmann::json guesses = nlohmann::json::array();
    for (const auto& g : detector.detect(text))
      guesses.push_back({{"confidence", g.confidence}, {"language", g.language}});
    out.push_back(guesses);
  }
  HttpResponse r;
  r.body = (list ? out : out[0]).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

}  // namespace attn::serve
