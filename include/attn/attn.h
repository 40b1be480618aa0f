// attn/attn.h — the whole public API, one umbrella header per layer, and the
// version (attn/version.h).
#pragma once

#include "attn/autograd.h"
#include "attn/core.h"
#include "attn/data.h"
#include "attn/io.h"
#include "attn/nn.h"
#include "attn/ops.h"
#include "attn/optim.h"
#include "attn/seq2seq.h"
#include "attn/serve.h"
#include "attn/version.h"
#include "attn/viz.h"
