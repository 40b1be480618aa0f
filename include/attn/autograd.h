#pragma once

#include "attn/autograd/gradcheck.h"
#include "attn/autograd/node.h"
