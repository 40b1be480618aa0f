// attn/nn.h — modules: layers, attention, positional encodings, the Transformer, Nadaraya-Watson
// regression.
#pragma once

#include "attn/nn/attention.h"
#include "attn/nn/bahdanau.h"
#include "attn/nn/conv.h"
#include "attn/nn/init.h"
#include "attn/nn/layers.h"
#include "attn/nn/module.h"
#include "attn/nn/nadaraya_watson.h"
#include "attn/nn/positional.h"
#include "attn/nn/rnn.h"
#include "attn/nn/seq2seq_model.h"
#include "attn/nn/transformer.h"
