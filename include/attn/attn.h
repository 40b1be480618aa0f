// attn/attn.h — the whole library.
#pragma once

#include "attn/autograd.h"
#include "attn/core.h"
#include "attn/ops.h"
