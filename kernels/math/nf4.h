#pragma once
// NF4 ("4-bit NormalFloat", Dettmers et al. 2023, QLoRA) with double
// quantization, as bitsandbytes stores a frozen base:
//   - blocks of 64 weights share an fp32 absmax; each weight is the index of
//     the nearest of 16 code values (quantiles of N(0, 1) scaled to [-1, 1])
//     to w / absmax, two per byte, the first in the high nibble;
//   - the absmax values are themselves quantized: minus their mean (offset),
//     in blocks of 256, to 8 bits with the signed dynamic map (quant8.h) and an
//     fp32 absmax per block of 256.
// Bits per weight: 4 + 8/64 + 32/(64*256) = 4.127 (plus one fp32 offset per tensor).
// Dequantizing: w = nf4[code] * (map[absmax_code] * absmax2 + offset).
#include <math.h>

#include <cstdint>

#include "kernels/math/hd.h"
#include "kernels/math/quant8.h"

namespace tune::math {

constexpr int kNf4Block = 64;         // weights per fp32 (then 8-bit) absmax
constexpr int kNf4AbsmaxBlock = 256;  // absmax values per second-level fp32 absmax

// The 16 NF4 code values, ascending, as published in bitsandbytes (functional.py, get_4bit_type("nf4")).
TUNE_HD inline float nf4_value(int code) {
    const float values[16] = {-1.0f,
                              -0.6961928009986877f,
                              -0.5250730514526367f,
                              -0.39491748809814453f,
                              -0.28444138169288635f,
                              -0.18477343022823334f,
                              -0.09105003625154495f,
                              0.0f,
                              0.07958029955625534f,
                              0.16093020141124725f,
                              0.24611230194568634f,
                              0.33791524171829224f,
                              0.44070982933044434f,
                              0.5626170039176941f,
                              0.7229568362236023f,
                              1.0f};
    return values[code & 15];
}

// The nearest code of x in [-1, 1]: how many midpoints between neighbouring
// codes (computed in float) lie strictly below x. A tie keeps the lower code.
TUNE_HD inline std::uint8_t nf4_quantize(float x) {
    int code = 0;
    for (int i = 0; i < 15; ++i) code += x > 0.5f * (nf4_value(i) + nf4_value(i + 1)) ? 1 : 0;
    return static_cast<std::uint8_t>(code);
}

// One block of n <= 64 weights: packed codes (n/2 bytes, n even) and its absmax.
TUNE_HD inline float nf4_quantize_block(const float* x, int n, std::uint8_t* packed) {
    const float absmax = block_absmax(x, n);
    const float inv = inverse_absmax(absmax);
    for (int i = 0; i < n; i += 2)
        packed[i / 2] = static_cast<std::uint8_t>(nf4_quantize(x[i] * inv) << 4 | nf4_quantize(x[i + 1] * inv));
    return absmax;
}

// Element i of a packed NF4 array.
TUNE_HD inline std::uint8_t nf4_code(const std::uint8_t* packed, std::int64_t i) {
    const std::uint8_t byte = packed[i / 2];
    return static_cast<std::uint8_t>(i % 2 == 0 ? byte >> 4 : byte & 15);
}

// The mean the absmax values are centred on before their 8-bit quantization:
// a sequential double sum, rounded to float once, so every implementation
// (CPU, CUDA, the NumPy reference) gets the same bits.
TUNE_HD inline float nf4_absmax_offset(const float* absmax, std::int64_t n) {
    double sum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(absmax[i]);
    return n > 0 ? static_cast<float>(sum / static_cast<double>(n)) : 0.0f;
}

// One block of n <= 256 absmax values, centred on `offset`: 8-bit codes with
// the signed dynamic map `code` (create_dynamic_map(true)), and the block's scale.
TUNE_HD inline float nf4_quantize_absmax_block(const float* code, const float* absmax, int n, float offset,
                                               std::uint8_t* q) {
    float scale = 0.0f;
    for (int i = 0; i < n; ++i) scale = ::fmaxf(scale, ::fabsf(absmax[i] - offset));
    const float inv = inverse_absmax(scale);
    for (int i = 0; i < n; ++i) q[i] = quantize_to_map(code, true, (absmax[i] - offset) * inv);
    return scale;
}

TUNE_HD inline float nf4_dequantize_absmax(const float* code, std::uint8_t q, float scale, float offset) {
    return detail::mul_add_unfused(code[q], scale, offset);  // never fused, as on the host
}

TUNE_HD inline float nf4_dequantize(std::uint8_t code, float absmax) { return nf4_value(code) * absmax; }

// Storage of n weights (n a multiple of 64): packed codes, absmax codes,
// second-level scales, the offset, each part starting 16-byte aligned.
struct Nf4Sizes {
    std::int64_t packed = 0, absmax = 0, scales = 0;
    std::int64_t scales_at = 0, offset_at = 0, bytes = 0;  // byte offsets of the fp32 parts, total bytes
};
TUNE_HD inline Nf4Sizes nf4_sizes(std::int64_t n) {
    auto up16 = [](std::int64_t b) { return (b + 15) / 16 * 16; };
    Nf4Sizes s;
    s.packed = n / 2;
    s.absmax = n / kNf4Block;
    s.scales = (s.absmax + kNf4AbsmaxBlock - 1) / kNf4AbsmaxBlock;
    s.scales_at = up16(s.packed + s.absmax);
    s.offset_at = up16(s.scales_at + 4 * s.scales);
    s.bytes = s.offset_at + 16;
    return s;
}

// ZeRO stage 3 (core/zero_plan.h) over `ranks` ranks: each rank keeps an
// equal shard of whole absmax groups (256 blocks of 64 weights = 16384
// weights), so its packed codes, absmax codes and scales are an NF4 buffer
// of `shard` weights in the layout above (with a copy of the one offset), and
// the ranks' parts gathered side by side form the NF4 buffer of `padded`
// weights. The weights past n are padding: zero codes, never dequantized.
constexpr std::int64_t kNf4ShardUnit = std::int64_t{kNf4Block} * kNf4AbsmaxBlock;
struct Nf4Shard {
    std::int64_t shard = 0;   // weights each rank keeps: a multiple of kNf4ShardUnit
    std::int64_t padded = 0;  // ranks * shard
};
TUNE_HD inline Nf4Shard nf4_shard(std::int64_t n, std::int64_t ranks) {
    const std::int64_t per_rank = (n + ranks - 1) / ranks;
    const std::int64_t shard = (per_rank + kNf4ShardUnit - 1) / kNf4ShardUnit * kNf4ShardUnit;
    return {shard, shard * ranks};
}

// The parts of an NF4 buffer of n weights starting at q.
struct Nf4Parts {
    std::uint8_t* packed;
    std::uint8_t* absmax;
    float* scales;
    float* offset;
};
TUNE_HD inline Nf4Parts nf4_parts(void* q, std::int64_t n) {
    const Nf4Sizes s = nf4_sizes(n);
    auto* base = static_cast<std::uint8_t*>(q);
    return {base, base + s.packed, reinterpret_cast<float*>(base + s.scales_at),
            reinterpret_cast<float*>(base + s.offset_at)};
}

// Weight i of an NF4 buffer, given the signed dynamic map.
TUNE_HD inline float nf4_weight(const float* map, const Nf4Parts& p, std::int64_t i) {
    const std::int64_t block = i / kNf4Block;
    const float absmax = nf4_dequantize_absmax(map, p.absmax[block], p.scales[block / kNf4AbsmaxBlock], *p.offset);
    return nf4_dequantize(nf4_code(p.packed, i), absmax);
}

}  // namespace tune::math
