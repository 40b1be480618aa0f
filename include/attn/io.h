// attn/io.h — files: safetensors, strict JSON, atomic writes, file sets (model directories), locks,
// bounded reading, SHA-256.
#pragma once

#include "attn/io/atomic_file.h"
#include "attn/io/digest.h"
#include "attn/io/dir_lock.h"
#include "attn/io/file_set.h"
#include "attn/io/json.h"
#include "attn/io/line_reader.h"
#include "attn/io/read_file.h"
#include "attn/io/safetensors.h"
