#include "train/io/data.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "core/config_error.h"
#include "core/input_file.h"

namespace tune::train {

namespace {

std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

class SyntheticTokens final : public TokenSource {
public:
    SyntheticTokens(std::uint64_t seed, std::uint64_t vocab) : seed_(mix(seed ^ 0x5eed70c3u)), vocab_(vocab) {}
    void read(std::uint64_t start, std::int32_t* out, std::int64_t count) const override {
        for (std::int64_t i = 0; i < count; ++i) {
            const std::uint64_t p = start + static_cast<std::uint64_t>(i);
            const std::uint64_t run = mix(seed_ + (p / 8));
            out[i] = static_cast<std::int32_t>((run + 7 * (p % 8)) % vocab_);
        }
    }

private:
    std::uint64_t seed_;
    std::uint64_t vocab_;
};

class FileTokens final : public TokenSource {
public:
    explicit FileTokens(std::vector<std::int32_t> tokens) : tokens_(std::move(tokens)) {}
    void read(std::uint64_t start, std::int32_t* out, std::int64_t count) const override {
        const std::uint64_t n = tokens_.size();
        for (std::int64_t i = 0; i < count; ++i) out[i] = tokens_[(start + static_cast<std::uint64_t>(i)) % n];
    }

private:
    std::vector<std::int32_t> tokens_;
};

}  // namespace

std::unique_ptr<TokenSource> synthetic_tokens(std::uint64_t seed, std::uint64_t vocab) {
    return std::make_unique<SyntheticTokens>(seed, vocab);
}

std::unique_ptr<TokenSource> file_tokens(const std::filesystem::path& path, std::uint64_t vocab) {
    // A trial reads a few thousand tokens per step; the whole file is held in memory.
    constexpr std::uint64_t kMaxTokenFileBytes = 4ull << 30;
    const std::string text = read_input_file(path, kMaxTokenFileBytes, "token file");
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    if (text.empty() || text.size() % 4 != 0)
        throw ConfigError(fmt::format("token file {}: {} bytes is not a non-empty whole number of uint32 ids",
                                      path.string(), text.size()));
    std::vector<std::int32_t> tokens(text.size() / 4);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const std::uint32_t id = std::uint32_t{bytes[4 * i]} | std::uint32_t{bytes[4 * i + 1]} << 8 |
                                 std::uint32_t{bytes[4 * i + 2]} << 16 | std::uint32_t{bytes[4 * i + 3]} << 24;
        if (id >= vocab)
            throw ConfigError(fmt::format("token file {}: token {} at index {} is outside the vocabulary of {}",
                                          path.string(), id, i, vocab));
        tokens[i] = static_cast<std::int32_t>(id);
    }
    return std::make_unique<FileTokens>(std::move(tokens));
}

}  // namespace tune::train
