// attn/data.h — corpora, d2l's preprocessing, vocabularies, batches.
#pragma once

#include "attn/data/nmt.h"
#include "attn/data/text.h"
#include "attn/data/vocab.h"
