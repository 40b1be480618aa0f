// attn/core.h — tensor, dtypes, errors, threads, random numbers.
#pragma once

#include "attn/core/dtype.h"
#include "attn/core/error.h"
#include "attn/core/rng.h"
#include "attn/core/shape.h"
#include "attn/core/storage.h"
#include "attn/core/tensor.h"
#include "attn/core/threads.h"
