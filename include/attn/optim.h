// attn/optim.h — optimizers, gradient clipping, learning-rate schedules, data parallelism.
#pragma once

#include "attn/optim/data_parallel.h"
#include "attn/optim/optimizer.h"
#include "attn/optim/schedule.h"
