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

// The same file opened with the same checks and read in pieces: a format with a header (safetensors)
// is judged from its header before a byte of its bulk is read, and only the bytes it names are.
class InputFile {
public:
    InputFile(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what);
    ~InputFile();
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;

    std::uint64_t size() const { return size_; }
    // Exactly `bytes` bytes from `offset` into `out`, or a ConfigError naming the file (it ended early).
    void read_at(std::uint64_t offset, void* out, std::uint64_t bytes) const;

private:
    std::string name_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
};

}  // namespace tune
