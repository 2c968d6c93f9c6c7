// Workspace sizes as plain formulas, one place for each: the backends answer
// their *_workspace_bytes() queries with them and the estimator
// (estimate/estimate_memory.cpp) sizes the `workspace` and `logits`
// components with the same ones, so the two cannot drift apart
// (docs/memory-model.md §6). Header-only and dependency-free on purpose:
// the estimator includes it without linking any kernel code.
#pragma once

#include <cstdint>

namespace tune::kernels::workspace {

constexpr std::uint64_t kAlign = 256;  // every carved piece starts 256-byte aligned

constexpr std::uint64_t aligned(std::uint64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// cuBLASLt's workspace for any one GEMM: cuBLAS's recommendation for Hopper
// (Ampere needs less, but this is small next to a step).
constexpr std::uint64_t kCudaGemmBytes = 32ull << 20;

// CUDA attention, forward and backward (kernels/cuda/attention.cu): a GEMM
// workspace, then for one batch element at a time the (H, S, S) scores or
// dP in fp32 and dS in the storage dtype.
constexpr std::uint64_t cuda_attention_bytes(std::uint64_t heads, std::uint64_t seq, std::uint64_t element_bytes) {
    const std::uint64_t square = heads * seq * seq;
    return kCudaGemmBytes + aligned(square * 4) + aligned(square * element_bytes);
}

// CPU eager attention (kernels/cpu/cpu_attention.cpp), per OpenMP thread:
// two (S, S) and eight (S, D) fp32 blocks, the same for every dtype.
constexpr std::uint64_t cpu_eager_attention_bytes(std::uint64_t threads, std::uint64_t seq, std::uint64_t head_dim) {
    return 4 * threads * (2 * seq * seq + 8 * seq * head_dim);
}

// CPU flash attention (kernels/cpu/cpu_flash_attention.cpp) works on square
// tiles of kCpuFlashTile queries by kCpuFlashTile keys. Per OpenMP thread:
// the tile scratch, independent of the sequence length (scores and dP
// (tile, tile); seven (tile, D) blocks: q, k, v, dO, an accumulator and two
// transposed tiles (forward k^T, backward q^T and dO^T); three per-row
// vectors: max, sum, D = rowsum(dO * O)), then the
// backward's dK and dV accumulators (S, D) of the thread's (batch, kv head),
// all fp32. The accumulators are O(s), the size of k itself: the backward is
// one pass over the tile pairs, so one of dQ or dK, dV must be summed over
// the pairs outside the tiles (FlashAttention-2 sums dQ in its fp32 dq_accum).
constexpr std::uint64_t kCpuFlashTile = 64;
constexpr std::uint64_t cpu_flash_tile_floats(std::uint64_t head_dim) {
    return 2 * kCpuFlashTile * kCpuFlashTile + 7 * kCpuFlashTile * head_dim + 3 * kCpuFlashTile;
}
constexpr std::uint64_t cpu_flash_attention_floats(std::uint64_t seq, std::uint64_t head_dim) {
    return cpu_flash_tile_floats(head_dim) + 2 * seq * head_dim;
}
constexpr std::uint64_t cpu_flash_attention_bytes(std::uint64_t threads, std::uint64_t seq, std::uint64_t head_dim) {
    return 4 * threads * cpu_flash_attention_floats(seq, head_dim);
}

// CUDA fused attention. tune's flash kernels (kernels/cuda/flash_attention.cu)
// need none; cuDNN's graphs (kernels/cuda/host/sdpa_graph.h), which run it in
// 16 bits where cuDNN is loaded, take the backward's fp32 dQ accumulator
// (B, H, S, D) and their plan's scratch. A plan's own size is known only on the
// device: the backend uses a plan only within this bound (one MiB, plus two
// fp32 values per query row in backward), else runs its kernels. The same
// bytes whichever runs, so the estimate need not know which does.
constexpr std::uint64_t kCudnnPlanSlackBytes = 1ull << 20;
constexpr std::uint64_t cudnn_attention_plan_bytes(std::uint64_t batch, std::uint64_t heads, std::uint64_t seq,
                                                   bool backward) {
    return kCudnnPlanSlackBytes + (backward ? 2 * batch * heads * seq * 4 : 0);
}
constexpr std::uint64_t cudnn_dq_accumulator_bytes(std::uint64_t batch, std::uint64_t heads, std::uint64_t seq,
                                                   std::uint64_t head_dim) {
    return 4 * batch * heads * seq * head_dim;
}
constexpr std::uint64_t cuda_flash_attention_bytes(std::uint64_t batch, std::uint64_t heads, std::uint64_t seq,
                                                   std::uint64_t head_dim, std::uint64_t element_bytes) {
    if (element_bytes != 2) return 0;  // cuDNN's graphs take bf16 and f16 only
    return aligned(cudnn_dq_accumulator_bytes(batch, heads, seq, head_dim)) +
           aligned(cudnn_attention_plan_bytes(batch, heads, seq, true));
}

// Embedding backward on every backend: a list head per vocabulary row and a
// link per token (int32 each), so each token's rows are summed in fp32 and
// added to the table once.
constexpr std::uint64_t embedding_backward_bytes(std::uint64_t tokens, std::uint64_t vocab) {
    return aligned(4 * vocab) + aligned(4 * tokens);
}

}  // namespace tune::kernels::workspace
