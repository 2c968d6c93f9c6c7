// The rules both the estimator (estimate/flat_layout) and the trainer
// (train/param_layout) lay flat parameter buffers out by (docs/memory-model.md §1):
// every tensor's slot and every rank's shard is a multiple of the alignment, so
// a shard starts on an 8-bit Adam block and on 256 elements.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace tune {

// Tensors with fewer elements keep full-width optimizer state in 8-bit Adam
// (bitsandbytes' min_8bit_size).
inline constexpr std::uint64_t kSmallTensorElements = 4096;

// The alignment of slots and shards, in elements.
inline constexpr std::uint64_t flat_alignment(std::uint32_t adam8bit_block) {
    return std::lcm<std::uint64_t>(256, std::max<std::uint32_t>(adam8bit_block, 1));
}

inline constexpr std::uint64_t round_up(std::uint64_t n, std::uint64_t multiple) {
    return (n + multiple - 1) / multiple * multiple;
}
// Elements each of `ranks` ranks owns of an `n`-element buffer (equal, padded).
inline constexpr std::uint64_t shard_numel(std::uint64_t n, std::uint64_t ranks, std::uint64_t align) {
    return round_up((n + ranks - 1) / ranks, align);
}
// The padded length of the whole buffer: ranks equal shards.
inline constexpr std::uint64_t full_numel(std::uint64_t n, std::uint64_t ranks, std::uint64_t align) {
    return ranks * shard_numel(n, ranks, align);
}

}  // namespace tune
