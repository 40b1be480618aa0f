// attn/seq2seq.h — training, checkpoints, model directories, decoding, translation, BLEU, the
// hyperparameter table, ONNX export.
#pragma once

#include "attn/seq2seq/bleu.h"
#include "attn/seq2seq/checkpoint.h"
#include "attn/seq2seq/decode.h"
#include "attn/seq2seq/hparams.h"
#include "attn/seq2seq/loss.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/onnx_export.h"
#include "attn/seq2seq/report.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translate.h"
