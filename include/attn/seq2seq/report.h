// attn/seq2seq/report.h — what `attn train` shows at the end of a run: d2l's
// test sentences with their BLEU, the loss curve, the attention maps of a
// translation, and the latency of translating one sentence.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translate.h"

namespace attn::seq2seq {

// d2l 10.7's four test pairs: English source, French reference.
const std::vector<std::pair<std::string, std::string>>& d2l_test_pairs();

struct ScoredTranslation {
  std::string source, prediction, reference;
  double bleu = 0;  // d2l's bleu(prediction, reference, k = 2)
};

// Translates every source (greedy, one batch) and scores it against its
// reference as d2l does.
std::vector<ScoredTranslation> translate_and_score(
    nn::Seq2SeqModel& net, const data::Vocab& src_vocab, const data::Vocab& tgt_vocab,
    const std::vector<std::pair<std::string, std::string>>& pairs, std::int64_t num_steps);

// The median wall time of `runs` calls of `fn`, in milliseconds.
double median_ms(const std::function<void()>& fn, int runs);

// The most tokens an attention picture shows along an axis: a longer
// sentence is cut to its first kMaxPictureTokens tokens, and the picture's
// title says so. Keeps a picture's size bounded whatever num_steps is.
inline constexpr std::size_t kMaxPictureTokens = 64;

// The maps cut to the first `n` query and key tokens.
AttentionMaps first_tokens(const AttentionMaps& maps, std::size_t n);

// One figure per attention kind, rows = layers, columns = heads, of at most
// kMaxPictureTokens tokens a side (the title says when a sentence was cut):
// <stem>-encoder, <stem>-decoder-self, <stem>-decoder-cross (.svg and .png);
// a kind with no layers (a Bahdanau model has cross-attention only) is left
// out. Returns the PNG files written.
std::vector<std::string> save_attention_figures(const AttentionMaps& maps, std::int64_t num_heads,
                                                const std::string& stem);

// Every attention weight of one translation as JSON, for tools and the
// attention viewer: {"source", "translation", "source_tokens",
// "target_tokens", "num_layers", "num_heads", "attention": {"encoder",
// "decoder_self", "decoder_cross"}}, each kind nested [layer][head][query]
// [key] (queries and keys as in AttentionMaps; the whole sentence, not cut).
// A kind the model lacks is an empty list; num_layers and num_heads are those
// of the first kind that has weights. The weights are f32 values written as
// the shortest decimal that reads back as the same float.
std::string attention_maps_json(const AttentionMaps& maps, const std::string& source,
                                const std::string& translation);

// The training loss as a line plot, <stem>.svg and <stem>.png, against
// epochs (of `batches_per_epoch` steps): per whole epoch (d2l's plot) when
// `step_losses` is empty, else the mean of the step losses in about 100
// windows (a run cut short in its first epoch still has a curve). With
// validations, their per-token loss beside it.
void save_loss_plot(const std::vector<double>& epoch_losses, const std::vector<double>& step_losses,
                    std::int64_t batches_per_epoch, const std::vector<Validation>& validations,
                    const std::string& stem);

// The validation BLEU against minutes of training, <stem>.svg and .png.
void save_bleu_plot(const std::vector<Validation>& validations, const std::string& stem);

}  // namespace attn::seq2seq
