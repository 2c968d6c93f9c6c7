#pragma once
// NEFTune (Jain et al. 2023): during training, embeddings get uniform noise
// (alpha / sqrt(s * d)) * U(-1, 1), s the sequence length, d the hidden size.
// The noise is a counter-based hash of (seed, element index), so the CPU and
// GPU backends draw identical noise for the same element in any order.
#include <math.h>

#include <cstdint>

#include "kernels/math/hd.h"

namespace tune::math {

// SplitMix64's output function of state x + golden gamma (Steele et al. 2014).
TUNE_HD inline std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Uniform in [-1, 1) on a 2^-23 grid: element `index` of the SplitMix64
// stream that starts at a seed-derived state.
TUNE_HD inline float uniform_pm1(std::uint64_t seed, std::uint64_t index) {
    const std::uint64_t bits = splitmix64(splitmix64(seed) + index * 0x9e3779b97f4a7c15ull);
    const float unit = static_cast<float>(bits >> 40) * 5.9604644775390625e-8f;  // [0, 1), 24 bits
    return 2.0f * unit - 1.0f;
}

TUNE_HD inline float neftune_scale(float alpha, int seq_len, int hidden) {
    return alpha / ::sqrtf(static_cast<float>(seq_len) * static_cast<float>(hidden));
}

// The noised embedding element; the caller derives `seed` per micro-batch.
TUNE_HD inline float neftune_noise(float embedding, float scale, std::uint64_t seed, std::uint64_t index) {
    return embedding + scale * uniform_pm1(seed, index);
}

}  // namespace tune::math
