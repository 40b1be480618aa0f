// attn/seq2seq/translator.h — a model and its tokenizer: text in, text out.
//
// For models whose tokenizer is a data::Tokenizer (SentencePiece models:
// cased text in, detokenized text out). d2l's word models keep d2l's own
// pipeline in seq2seq/translate.h (lowercased, tokenized output, d2l's cut
// of long sources); both decode with seq2seq::decode.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "attn/data/batching.h"
#include "attn/data/corpus.h"
#include "attn/data/tokenizer.h"
#include "attn/nn/transformer.h"
#include "attn/ops/quantize.h"
#include "attn/seq2seq/decode.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translate.h"

namespace attn::seq2seq {

struct TextTranslation {
  std::string source;
  std::vector<std::int64_t> source_ids;  // with <eos>, as the encoder read it
  std::vector<std::int64_t> ids;  // the translation, without <bos> and <eos>
  std::string text;  // tokenizer.decode(ids)
  // Of the hypothesis (seq2seq/decode.h); 0 for an empty source, NaN where
  // greedy decoding ran without scores (DecodeOptions::scores).
  double log_prob = 0, score = 0;
  bool eos = true;  // false: stopped at the length limit without <eos>
};

// The decoding a model gets where its caller says nothing; the CLI's flags,
// the server's request fields and the Python keywords all start from here:
//   a word model (d2l's): greedy (beam 1), length penalty 0, at most the
//     model's num_steps tokens, as d2l decodes;
//   a subword model (a translator): beam 4, length penalty 0.6 (GNMT), and
//     max_length 0, which translate_texts reads as at most
//     kSubwordLengthFactor x the source's ids (with <eos>).
// n_best 1, scores computed.
inline constexpr double kSubwordLengthFactor = 3;
DecodeOptions defaults_for(const ModelConfig& model);

// The quantization a model decodes with where its caller says nothing: int8
// (attn/ops/quantize.h) for a subword model (a translator) where this CPU
// runs an int8 kernel (AVX-512 VNNI or AVX2: int8_supported()), none (f32)
// otherwise, and always for d2l's word models, which keep the book's
// numbers. int8 changed held-out BLEU by -0.28 to +0.05 on the tatoeba
// models measured, and translates 2.5x faster than f32 on AVX-512 VNNI
// (docs/design.md, "int8 weights"); Quantization::none is the f32
// reference.
Quantization default_quantization(const ModelConfig& model);

// The pieces of translate_texts, for callers that decode sentences their own
// way (a server's DecodingBatch): the same ids, options and text.
//
// A sentence's source ids: the tokenizer's and <eos>; empty for a blank
// sentence (spaces only: translated to the empty text without decoding).
// ValueError "translate: sentence N is ..." (N = index + 1) for one longer
// than max_len with its <eos>.
std::vector<std::int64_t> sentence_ids(const data::Tokenizer& tokenizer,
                                       const std::string& sentence, std::int64_t max_len,
                                       std::size_t index = 0);
// The options translate_texts decodes with: max_length 0 without a
// max_length_factor means at most kSubwordLengthFactor x the source's ids.
DecodeOptions text_decode_options(DecodeOptions options);
// A hypothesis of `source` (whose ids were `source_ids`) as text.
TextTranslation text_translation(const data::Tokenizer& tokenizer, const std::string& source,
                                 const std::vector<std::int64_t>& source_ids, const Hypothesis& h);

// How translate_texts runs its batches.
struct BatchOptions {
  // At most this many sentences of similar length per decode() call
  // (CTranslate2's max_batch_size); 0: automatic_batch_size(). Smaller
  // batches keep a step's caches and logits in the CPU's caches, larger ones
  // make bigger matrix products: with the tatoeba model and two batches side
  // by side, int8 beam 4 took 1.53 s with 128 sentences a batch, 1.2 s with
  // 32 and 0.98 s with 16; f32 beam 4 2.6 s with 32 and 2.7 s with 16
  // (docs/design/decoding.md). The translations do not depend on it: a
  // Transformer's batches are decoded by a DecodingBatch (seq2seq/decode.h),
  // where a sentence gets the same bits in any batch; other models'
  // (Bahdanau) and keep_attention's by decode(), whose encoder pads each
  // batch to its longest source, so that there a sentence's last bits may
  // depend on it.
  std::size_t batch_size = 0;
  // Batches decoded side by side, each on one thread of an OpenMP team with
  // its ops on that thread alone, the longest batches first (CTranslate2's
  // inter_threads): a decoding step of a small model is many short ops, and
  // one batch per thread spends no time forking and joining a team for each
  // of them nor waiting on the ops that run on one thread. 0: one per thread
  // of attn's pool (get_num_threads()); 1: one batch at a time, its ops on
  // all of attn's threads. Only where there are several
  // batches and the model decodes side by side safely
  // (nn::Seq2SeqModel::concurrent_decoding(): the Transformer), and not with
  // options.keep_attention; otherwise 1. Every thread of the team joins the
  // calling thread's precision and quantization scopes (ops/precision.h,
  // ops/quantize.h) and multiplies by the same kept copies of the weights.
  int workers = 0;
  // Called before each batch, on the thread that decodes it: an exception
  // from it ends translate_texts, which rethrows it once the batches already
  // under way side by side have finished (a caller that can be interrupted,
  // such as the Python module on Ctrl-C, checks its flag here). Empty: none.
  std::function<void()> before_batch;
};

// How many sentences a caller that reads a stream hands translate_texts at
// a time (`attn translate` reading stdin, the Python module's
// Translator.translate): enough batches of alike lengths to keep the
// threads busy to the chunk's end, in bounded memory. The translations of a
// stream cut so are those of its chunks translated one after another.
inline constexpr std::size_t kTextChunk = 1024;

// The batch size of BatchOptions::batch_size 0 for decoding with
// `beam_size` beams on this thread: 32 sentences; while this thread's
// products run in bf16 (a bf16 PrecisionScope) or int8 (a QuantizeScope),
// whose kernels are as fast on few rows, batches of 64 rows instead:
// min(32, max(1, 64 / beam_size)) sentences (16 for beam 4).
std::size_t automatic_batch_size(std::int64_t beam_size);

// Translates every sentence with decode() (greedy or beam search, `options`),
// in batches of sentences of similar length (`batching`). Sources are never
// cut: one longer than the model's positions (max_len, with its <eos>) is
// refused (ValueError naming its number and length). options.max_length 0
// means: at most kSubwordLengthFactor x the source's ids (with <eos>) tokens, and never more
// than max_len. An empty sentence translates to an empty one. Returns per
// sentence at most options.n_best translations, best first. The
// translations do not depend on batching.workers (every product and kernel
// splits its work the same way on one thread as on several). A
// Transformer's batches (without keep_attention) run through a
// DecodingBatch, all of a batch's sentences joining at its first step: with
// the model's weights frozen (a PrecisionScope given its parameters), a
// sentence's translation is then the same bits whatever the other sentences
// (and so what `attn serve` answers for it).
std::vector<std::vector<TextTranslation>> translate_texts(nn::Seq2SeqModel& net,
                                                          const data::Tokenizer& tokenizer,
                                                          const std::vector<std::string>& sentences,
                                                          const DecodeOptions& options = {},
                                                          const BatchOptions& batching = {});

// Every attention map of one translation (as seq2seq::attention_maps), its
// tokens shown as the tokenizer's pieces.
AttentionMaps attention_maps(nn::Seq2SeqModel& net, const data::Tokenizer& tokenizer,
                             const TextTranslation& translation);

// One validation of a translator: the per-token cross-entropy of `pairs`
// (teacher forcing), its perplexity, and sacreBLEU's corpus BLEU (13a) of
// the translations of their sources (decoded with `options`) against their
// targets (`text`, the same pairs as written). With a communicator of more
// than one process (a data-parallel run: every process calls it with the
// same arguments) each process scores its share of the pairs
// (optim::shard_rows) and the sums — cross-entropy, tokens, BLEU's counts
// and lengths — are added up, so every process returns the validation of
// the whole set.
Validation validate_translator(nn::Seq2SeqModel& net, const data::Tokenizer& tokenizer,
                               const std::vector<data::SentencePair>& text,
                               const data::TokenizedPairs& pairs, const DecodeOptions& options = {},
                               optim::Communicator* comm = nullptr);

}  // namespace attn::seq2seq
