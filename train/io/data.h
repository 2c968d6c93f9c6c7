// Training tokens as one stream: micro-batch k of B rows of S tokens reads
// the window of B*S + 1 tokens starting at k*B*S (inputs are its first B*S
// tokens, targets the same shifted by one). A rank r of N with B rows each
// reads its part of the global micro-batch of N*B rows, starting r*B*S later.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace tune::train {

class TokenSource {
public:
    virtual ~TokenSource() = default;
    // count tokens of the stream from position `start` (wrapping for files).
    virtual void read(std::uint64_t start, std::int32_t* out, std::int64_t count) const = 0;
};

// Seeded synthetic stream over [0, vocab): runs of 8 tokens in an arithmetic
// progression from a random start, so a model can learn something.
std::unique_ptr<TokenSource> synthetic_tokens(std::uint64_t seed, std::uint64_t vocab);

// Little-endian uint32 token ids; ids outside [0, vocab) are an error.
std::unique_ptr<TokenSource> file_tokens(const std::filesystem::path& path, std::uint64_t vocab);

// Stream position of micro-batch `k` for rank `rank` of a global batch of
// world*rows rows of `context` tokens.
inline std::uint64_t window_start(std::uint64_t k, std::uint64_t rows, std::uint64_t context, std::uint64_t rank,
                                  std::uint64_t world) {
    return (k * world + rank) * rows * context;
}

}  // namespace tune::train
