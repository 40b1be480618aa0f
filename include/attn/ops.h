// attn/ops.h — every op family.
#pragma once

#include "attn/ops/elementwise.h"
#include "attn/ops/reduce.h"
