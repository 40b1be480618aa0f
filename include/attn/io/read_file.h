// attn/io/read_file.h — reading a whole file, with errors that name it.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace attn::io {

// The bytes of the file at `path`. IOError naming the path for a missing or
// unreadable file ("cannot open 'x': No such file or directory"), a
// directory, or a file of more than `max_bytes` bytes.
std::string read_file_bytes(const std::string& path,
                            std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max());

}  // namespace attn::io
