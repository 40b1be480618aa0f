// attn/ops.h — every op family.
#pragma once

#include "attn/ops/attention.h"
#include "attn/ops/conv.h"
#include "attn/ops/dropout.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/index.h"
#include "attn/ops/loss.h"
#include "attn/ops/matmul.h"
#include "attn/ops/norm.h"
#include "attn/ops/positions.h"
#include "attn/ops/precision.h"
#include "attn/ops/reduce.h"
#include "attn/ops/rnn.h"
#include "attn/ops/softmax.h"
