// attn/seq2seq.h — training, checkpoints, model directories, translation, BLEU, the hyperparameter
// table.
#pragma once

#include "attn/seq2seq/bleu.h"
#include "attn/seq2seq/checkpoint.h"
#include "attn/seq2seq/hparams.h"
#include "attn/seq2seq/loss.h"
#include "attn/seq2seq/model_dir.h"
#include "attn/seq2seq/report.h"
#include "attn/seq2seq/trainer.h"
#include "attn/seq2seq/translate.h"
