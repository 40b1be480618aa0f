// Continuous batching: sentences that join and leave a decoding batch at
// any step (attn/seq2seq/decode.h, DecodingBatch).
//
// Slots. Each sentence owns, while it decodes, one source slot (its encoded
// source's cross-attention keys and values) and beam_size cache rows; beam b
// of the sentence writes the keys and values of its step-t token at column t
// of the sentence's row b, and reads its earlier keys through its own list
// of rows (key p in row keys[p]): a beam that continues another copies that
// list, never the keys. Column t of the sentence's rows is new at step t, so
// no write ever overwrites a key that a live beam still reads. Slots and rows
// freed by sentences that leave are handed to the next ones; when the batch
// runs empty the caches are released (unless kept: keep_caches).
#include <algorithm>
#include <limits>
#include <list>
#include <map>
#include <set>

#include "attn/autograd/node.h"
#include "attn/ops/precision.h"
#include "attn/seq2seq/decode.h"
#include "seq2seq/search.h"

namespace attn::seq2seq {

namespace {

// Numbers handed out and given back (source slots, cache rows): the
// smallest free one first, so the caches stay as small as the batch.
class FreeList {
 public:
  std::int64_t take() {
    if (free_.empty()) return next_++;
    const std::int64_t n = *free_.begin();
    free_.erase(free_.begin());
    return n;
  }
  void give(std::int64_t n) { free_.insert(n); }
  void reset() {
    free_.clear();
    next_ = 0;
  }

 private:
  std::set<std::int64_t> free_;
  std::int64_t next_ = 0;
};

struct Entry {
  DecodingBatch::Handle handle = 0;
  DecodeOptions options;
  std::vector<std::int64_t> source;
  std::int64_t slot = -1;  // source slot
  std::vector<std::int64_t> rows;  // cache rows: beam b writes row rows[b]
  search::Sentence search;
  // Per live beam, the cache row of its key at each position before t.
  std::vector<std::vector<std::int64_t>> keys;
  std::int64_t t = 0;  // steps done: the position of its beams' next inputs
};

}  // namespace

struct DecodingBatch::Impl {
  nn::EncoderDecoder* net = nullptr;
  std::int64_t bos = 0, eos = 0;
  Handle next_handle = 1;
  std::list<Entry> queued, active;  // in the order added
  FreeList slots, rows;
  nn::SlotCache cache;
  bool keep_caches = false;
  search::SearchBuffers buffers;

  void join_queued();
  nn::RowStep build_step() const;
  void release(Entry& e) {
    if (e.slot >= 0) slots.give(e.slot);
    for (std::int64_t r : e.rows) this->rows.give(r);
    e.slot = -1;
    e.rows.clear();
  }
  void release_if_empty() {
    if (!queued.empty() || !active.empty()) return;
    if (!keep_caches) cache = nn::SlotCache{};
    slots.reset();
    rows.reset();
  }
};

DecodingBatch::DecodingBatch(nn::Seq2SeqModel& net, std::int64_t bos, std::int64_t eos)
    : impl_(std::make_unique<Impl>()) {
  impl_->net = dynamic_cast<nn::EncoderDecoder*>(&net);
  ATTN_CHECK(impl_->net != nullptr, ValueError,
             "DecodingBatch: continuous batching decodes Transformers, not a {} model",
             net.architecture());
  const std::int64_t V = net.tgt_vocab_size();
  ATTN_CHECK(bos >= 0 && bos < V && eos >= 0 && eos < V, ValueError,
             "DecodingBatch: bos {} and eos {} must be target ids in [0, {})", bos, eos, V);
  impl_->bos = bos;
  impl_->eos = eos;
  net.eval();
}

DecodingBatch::~DecodingBatch() = default;

DecodingBatch::Handle DecodingBatch::add(std::vector<std::int64_t> source,
                                         const DecodeOptions& options) {
  options.validate();
  ATTN_CHECK(!options.keep_attention, ValueError,
             "DecodingBatch: keep_attention is not available here (decode() records it)");
  const std::int64_t max_len = impl_->net->max_len();
  ATTN_CHECK(!source.empty() && static_cast<std::int64_t>(source.size()) <= max_len, ValueError,
             "DecodingBatch: a source of {} ids, outside [1, {}] (the model's max_len)",
             source.size(), max_len);
  const std::int64_t V = impl_->net->config.src_vocab_size;
  for (std::int64_t id : source)
    ATTN_CHECK(id >= 0 && id < V, ValueError,
               "DecodingBatch: source id {} is outside the vocabulary [0, {})", id, V);
  Entry e;
  e.handle = impl_->next_handle++;
  e.options = options;
  e.source = std::move(source);
  impl_->queued.push_back(std::move(e));
  return impl_->queued.back().handle;
}

bool DecodingBatch::remove(Handle handle) {
  for (std::list<Entry>* list : {&impl_->queued, &impl_->active})
    for (auto it = list->begin(); it != list->end(); ++it)
      if (it->handle == handle) {
        impl_->release(*it);
        list->erase(it);
        impl_->release_if_empty();
        return true;
      }
  return false;
}

std::int64_t DecodingBatch::sentences() const {
  return static_cast<std::int64_t>(impl_->queued.size() + impl_->active.size());
}

std::int64_t DecodingBatch::rows() const {
  std::int64_t n = static_cast<std::int64_t>(impl_->queued.size());
  for (const Entry& e : impl_->active) n += static_cast<std::int64_t>(e.search.beams.size());
  return n;
}

std::int64_t DecodingBatch::cache_bytes() const { return impl_->cache.bytes(); }

void DecodingBatch::keep_caches(bool keep) { impl_->keep_caches = keep; }

// The queued sources, encoded (those of one length together, none padded)
// into source slots of their own; each joins with one beam at step 0.
void DecodingBatch::Impl::join_queued() {
  std::map<std::size_t, std::vector<Entry*>> by_length;
  for (Entry& e : queued) by_length[e.source.size()].push_back(&e);
  for (auto& [length, group] : by_length) {
    const auto n = static_cast<std::int64_t>(group.size());
    const auto Ts = static_cast<std::int64_t>(length);
    Tensor src = Tensor::empty({n, Ts}, DType::i64);
    std::vector<std::int64_t> group_slots;
    for (std::int64_t b = 0; b < n; ++b) {
      Entry& e = *group[static_cast<std::size_t>(b)];
      std::copy(e.source.begin(), e.source.end(), src.data<std::int64_t>() + b * Ts);
      e.slot = slots.take();
      group_slots.push_back(e.slot);
    }
    net->encode_sources(src, group_slots, cache);
  }
  for (Entry& e : queued) {
    for (std::int64_t b = 0; b < e.options.beam_size; ++b) e.rows.push_back(rows.take());
    e.search.limit =
        max_decode_length(static_cast<std::int64_t>(e.source.size()), net->max_len(), e.options);
    e.search.beams.emplace_back();
    e.keys.emplace_back();
  }
  active.splice(active.end(), queued);
}

// Every live row's input: its last token (<bos> first) at its position,
// its source slot, and the cache rows of its keys.
nn::RowStep DecodingBatch::Impl::build_step() const {
  std::int64_t R = 0, P = 0;
  for (const Entry& e : active) {
    R += static_cast<std::int64_t>(e.search.beams.size());
    P = std::max(P, e.t + 1);
  }
  nn::RowStep s;
  s.tokens = Tensor::empty({R, 1}, DType::i64);
  s.positions = Tensor::empty({R}, DType::i64);
  s.source_slots = Tensor::empty({R}, DType::i64);
  s.source_lens = Tensor::empty({R}, DType::i64);
  s.write_rows = Tensor::empty({R}, DType::i64);
  s.key_rows = Tensor::empty({R, P}, DType::i64);
  std::int64_t* tokens = s.tokens.data<std::int64_t>();
  std::int64_t* positions = s.positions.data<std::int64_t>();
  std::int64_t* source_slots = s.source_slots.data<std::int64_t>();
  std::int64_t* source_lens = s.source_lens.data<std::int64_t>();
  std::int64_t* write = s.write_rows.data<std::int64_t>();
  std::int64_t* keys = s.key_rows.data<std::int64_t>();
  std::int64_t r = 0;
  for (const Entry& e : active) {
    for (std::size_t b = 0; b < e.search.beams.size(); ++b, ++r) {
      const std::vector<std::int64_t>& ids = e.search.beams[b].ids;
      tokens[r] = ids.empty() ? bos : ids.back();
      positions[r] = e.t;
      source_slots[r] = e.slot;
      source_lens[r] = static_cast<std::int64_t>(e.source.size());
      write[r] = e.rows[b];
      std::int64_t* row = keys + r * P;
      std::copy(e.keys[b].begin(), e.keys[b].end(), row);
      std::fill(row + e.t, row + P, e.rows[b]);  // its own key, then unused entries
    }
  }
  return s;
}

std::vector<DecodingBatch::Done> DecodingBatch::step() {
  Impl& m = *impl_;
  autograd::NoGradGuard no_grad;
  BatchInvariant invariant;
  if (!m.queued.empty()) m.join_queued();
  std::vector<Done> done;
  if (m.active.empty()) return done;
  const nn::RowStep input = m.build_step();
  // Every row greedy without scores: each row's argmax alone (step_argmax).
  bool argmax_only = true;
  std::vector<double> row_log_prob;
  std::vector<std::int64_t> row_beam_size;
  for (const Entry& e : m.active) {
    argmax_only = argmax_only && e.options.beam_size == 1 && !e.options.scores;
    for (const search::Beam& beam : e.search.beams) {
      row_log_prob.push_back(beam.log_prob);
      row_beam_size.push_back(e.options.beam_size);
    }
  }
  const Tensor out = m.net->step_rows(input, m.cache, argmax_only).contiguous();
  search::rank_rows(out, argmax_only, row_log_prob, row_beam_size, m.buffers);
  std::vector<std::int64_t> parents;
  std::int64_t row = 0;
  for (auto it = m.active.begin(); it != m.active.end();) {
    Entry& e = *it;
    const auto n = static_cast<std::int64_t>(e.search.beams.size());
    if (search::advance_sentence(e.search, e.t, e.options, m.eos, row, n, {}, m.buffers, parents)) {
      done.push_back({e.handle, search::best_hypotheses(e.search, e.options.n_best, false)});
      m.release(e);
      it = m.active.erase(it);
    } else {
      std::vector<std::vector<std::int64_t>> keys(e.search.beams.size());
      for (std::size_t b = 0; b < keys.size(); ++b) {
        const auto p = static_cast<std::size_t>(parents[b]);
        keys[b] = e.keys[p];
        keys[b].push_back(e.rows[p]);
      }
      e.keys = std::move(keys);
      ++e.t;
      ++it;
    }
    row += n;
  }
  m.release_if_empty();
  return done;
}

}  // namespace attn::seq2seq
