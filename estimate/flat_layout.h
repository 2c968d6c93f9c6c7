// How the trainer lays parameters out in flat buffers, and how ZeRO shards
// them (docs/memory-model.md §1). The estimator counts bytes from this; the
// trainer builds the same layout on its side.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "core/flat_buffer.h"
#include "core/pipeline_stages.h"

namespace tune {

// `count` identical flat buffers, as the optimizer-state formulas need them.
struct BufferKind {
    std::uint64_t numel = 0;       // slots summed: a multiple of the alignment
    std::uint64_t small = 0;       // elements in tensors under kSmallTensorElements (unpadded)
    std::uint64_t stats = 0;       // Adafactor: rows + cols per matrix, numel per vector
    std::uint64_t max_tensor = 0;  // largest tensor's numel (LOMO holds one gradient)
    std::uint64_t count = 0;
    std::uint64_t tensors = 0;  // tensors in the buffer
    std::uint64_t sums = 0;     // Adafactor over shards: fp32 partial sums, rows + cols per matrix + 3 per tensor
};

struct FlatLayout {
    std::uint64_t align = 256;  // elements: lcm(256, adam8bit_block)
    BufferKind layer;           // one per layer
    BufferKind outer;           // embedding + final norm + LM head
};

FlatLayout flat_layout(const ModelSpec& model, std::uint32_t adam8bit_block, OuterParts parts = {});
// LoRA's adapter buffer of one layer (count = layers): A (r, in) then B (out, r)
// per targeted linear, q, k, v, o and, for all-linear, gate, up, down (§9).
BufferKind adapter_buffer(const ModelSpec& model, std::uint32_t rank, LoraTargets targets,
                          std::uint32_t adam8bit_block);

}  // namespace tune
