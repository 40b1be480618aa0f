// attn/serve.h — the translation server (LibreTranslate's HTTP API, a web
// page, continuous batching).
#pragma once

#include "attn/serve/server.h"
