// The LM head and the cross-entropy together, in chunks of rows, so the
// (N, V) fp32 logits never exist at once: per chunk of R rows, logits (R, V)
// = hidden @ weight^T, fused loss + dlogits, then dhidden and dweight. Built
// only from Backend ops, so it runs the same on every backend.
#pragma once

#include <cstdint>

#include "kernels/backend.h"

namespace tune::kernels {

// A vocabulary-parallel head's shards combine their rows' statistics between
// the cross-entropy's stages (kernels/backend.h CrossEntropyStage): in place,
// each value becomes the max, or the sum, of that value over the shards.
class RowCombine {
public:
    virtual ~RowCombine() = default;
    virtual void max(float* values, std::int64_t n) const = 0;
    virtual void sum(float* values, std::int64_t n) const = 0;
};

struct LmHeadLossArgs {
    std::int64_t rows = 0;                  // N tokens
    std::int64_t hidden = 0;                // C
    std::int64_t vocab = 0;                 // V
    std::int64_t chunk_rows = 0;            // R rows of logits at a time; 0 or >= N: all rows at once
    DType dtype = DType::f32;               // of hidden, weight, dhidden, dweight
    const void* x = nullptr;                // (N, C) final-norm output
    const void* weight = nullptr;           // (V, C) lm_head.weight
    const std::int32_t* targets = nullptr;  // (N); negative: ignored row
    float* losses = nullptr;                // (N) per-token loss
    void* dx = nullptr;                     // (N, C) overwritten; nullptr: forward only
    void* dweight = nullptr;                // (V, C) accumulates; null for a frozen head
    float dweight_beta = 1.0f;              // 0: dweight holds nothing yet, the first chunk overwrites it
    float grad_scale = 1.0f;                // loss_scale / tokens in the optimizer step
    // Vocabulary-parallel (with `combine`): `weight` holds rows [vocab_begin, vocab_begin + vocab) of a
    // vocabulary of vocab_total, targets are ids of the whole vocabulary, and dx is this shard's part of
    // a sum over the shards, which the caller completes.
    const RowCombine* combine = nullptr;
    std::int64_t vocab_begin = 0;
    std::int64_t vocab_total = 0;
};

// Rows per chunk actually used (chunk_rows clamped to [1, N]).
std::int64_t lm_head_chunk_rows(const LmHeadLossArgs& args);

// fp32 logits (R, V), 16-bit dlogits (R, V) when dtype is not f32, the
// largest GEMM workspace of the chunk and, vocabulary-parallel, the three
// fp32 row statistics (R each), each part 256-byte aligned.
std::uint64_t lm_head_loss_workspace_bytes(const Backend& backend, const LmHeadLossArgs& args);

void lm_head_loss(Backend& backend, const LmHeadLossArgs& args, Workspace ws);

}  // namespace tune::kernels
