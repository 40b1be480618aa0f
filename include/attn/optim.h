// attn/optim.h — optimizers, gradient clipping.
#pragma once

#include "attn/optim/optimizer.h"
