// Reading a file the user named (a sweep file, a config.json, a token file, a
// safetensors file) without trusting what is there: only a regular file, and
// only up to a stated size. `/dev/zero` would otherwise grow without end and a
// FIFO would block forever; both are refused with a ConfigError naming the file.
//
//   const std::string text = read_input_file(path, 1 * MiB, "sweep file");
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace tune {

// The whole file, or a ConfigError when it cannot be opened, is not a regular file, or holds
// more than `max_bytes`. `what` names the file's role in messages ("sweep file").
std::string read_input_file(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what);

}  // namespace tune
