// LM head + cross-entropy in row chunks, from Backend ops only.
#include "kernels/lm_head_loss.h"

#include <algorithm>

#include "kernels/error.h"

namespace tune::kernels {

namespace {

constexpr std::uint64_t kAlign = 256;

std::uint64_t aligned(std::uint64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The three GEMMs of a chunk of `r` rows starting at row r0.
struct ChunkGemms {
    GemmArgs logits, dx, dweight;
};

ChunkGemms chunk_gemms(const LmHeadLossArgs& a, std::int64_t r0, std::int64_t r, float* logits, const void* dlogits,
                       DType dlogits_dtype) {
    const std::int64_t C = a.hidden, V = a.vocab;
    const auto* x = static_cast<const unsigned char*>(a.x) + r0 * C * dtype_bytes(a.dtype);
    ChunkGemms g;
    // logits (r, V) = x (r, C) @ W^T, W (V, C)
    g.logits = GemmArgs{.m = r,
                        .n = V,
                        .k = C,
                        .trans_a = false,
                        .trans_b = true,
                        .a = x,
                        .lda = C,
                        .b = a.weight,
                        .ldb = C,
                        .c = logits,
                        .ldc = V,
                        .a_dtype = a.dtype,
                        .b_dtype = a.dtype,
                        .c_dtype = DType::f32};
    // dx (r, C) = dlogits (r, V) @ W (V, C)
    auto* dx = a.dx == nullptr ? nullptr : static_cast<unsigned char*>(a.dx) + r0 * C * dtype_bytes(a.dtype);
    g.dx = GemmArgs{.m = r,
                    .n = C,
                    .k = V,
                    .a = dlogits,
                    .lda = V,
                    .b = a.weight,
                    .ldb = C,
                    .c = dx,
                    .ldc = C,
                    .a_dtype = dlogits_dtype,
                    .b_dtype = a.dtype,
                    .c_dtype = a.dtype};
    // dW (V, C) += dlogits^T (V, r) @ x (r, C); the first chunk overwrites a fresh dW
    g.dweight = GemmArgs{.m = V,
                         .n = C,
                         .k = r,
                         .trans_a = true,
                         .a = dlogits,
                         .lda = V,
                         .b = x,
                         .ldb = C,
                         .c = a.dweight,
                         .ldc = C,
                         .beta = r0 == 0 ? a.dweight_beta : 1.0f,
                         .a_dtype = dlogits_dtype,
                         .b_dtype = a.dtype,
                         .c_dtype = a.dtype};
    return g;
}

}  // namespace

std::int64_t lm_head_chunk_rows(const LmHeadLossArgs& a) {
    if (a.chunk_rows <= 0 || a.chunk_rows >= a.rows) return std::max<std::int64_t>(a.rows, 1);
    return a.chunk_rows;
}

std::uint64_t lm_head_loss_workspace_bytes(const Backend& backend, const LmHeadLossArgs& a) {
    const std::int64_t r = lm_head_chunk_rows(a);
    const auto cells = static_cast<std::uint64_t>(r * a.vocab);
    const std::uint64_t dlogits = a.dtype == DType::f32 ? 0 : aligned(cells * dtype_bytes(a.dtype));
    const ChunkGemms g = chunk_gemms(a, 0, r, nullptr, nullptr, a.dtype);
    std::uint64_t gemm = backend.gemm_workspace_bytes(g.logits);
    if (a.dx != nullptr)
        gemm = std::max({gemm, backend.gemm_workspace_bytes(g.dx), backend.gemm_workspace_bytes(g.dweight)});
    const std::uint64_t stats = a.combine != nullptr ? 3 * aligned(4 * static_cast<std::uint64_t>(r)) : 0;
    return aligned(cells * 4) + dlogits + aligned(gemm) + stats;
}

namespace {

// The loss and dlogits of one chunk: one fused call, or a shard's three stages with the rows' statistics
// combined over the shards in between.
void chunk_loss(Backend& backend, const LmHeadLossArgs& a, CrossEntropyArgs ce, float* stats, std::int64_t r) {
    if (a.combine == nullptr) return backend.cross_entropy(ce);
    ce.vocab_begin = a.vocab_begin, ce.vocab_total = a.vocab_total;
    ce.stats = stats;
    ce.stage = CrossEntropyStage::max;
    backend.cross_entropy(ce);
    a.combine->max(stats, r);
    ce.stage = CrossEntropyStage::sum;
    backend.cross_entropy(ce);
    a.combine->sum(stats + r, 2 * r);
    ce.stage = CrossEntropyStage::finish;
    backend.cross_entropy(ce);
}

}  // namespace

void lm_head_loss(Backend& backend, const LmHeadLossArgs& a, Workspace ws) {
    const std::uint64_t need = lm_head_loss_workspace_bytes(backend, a);
    if (ws.ptr == nullptr || ws.bytes < need)
        throw BackendError("lm_head_loss: workspace of " + std::to_string(ws.bytes) + " bytes, needs " +
                           std::to_string(need));
    const std::int64_t chunk = lm_head_chunk_rows(a);
    const auto cells = static_cast<std::uint64_t>(chunk * a.vocab);
    auto* base = static_cast<unsigned char*>(ws.ptr);
    auto* logits = reinterpret_cast<float*>(base);
    // fp32 gradients overwrite the logits; 16-bit ones get their own buffer
    // in the GEMM dtype (A and B of a GEMM share a dtype).
    const bool separate = a.dtype != DType::f32;
    const std::uint64_t logits_bytes = aligned(cells * 4);
    void* dlogits = separate ? static_cast<void*>(base + logits_bytes) : static_cast<void*>(logits);
    const std::uint64_t used = logits_bytes + (separate ? aligned(cells * dtype_bytes(a.dtype)) : 0);
    // The statistics sit at the end, (3, R) over three aligned parts: compact for the chunk's rows.
    const std::uint64_t stats_bytes = a.combine != nullptr ? 3 * aligned(4 * static_cast<std::uint64_t>(chunk)) : 0;
    auto* stats = reinterpret_cast<float*>(base + need - stats_bytes);
    const Workspace gemm_ws{base + used, need - stats_bytes - used};
    for (std::int64_t r0 = 0; r0 < a.rows; r0 += chunk) {
        const std::int64_t r = std::min(chunk, a.rows - r0);
        const ChunkGemms g = chunk_gemms(a, r0, r, logits, dlogits, a.dtype);
        backend.gemm(g.logits, gemm_ws);
        chunk_loss(backend, a,
                   CrossEntropyArgs{.rows = r,
                                    .vocab = a.vocab,
                                    .logits = logits,
                                    .targets = a.targets + r0,
                                    .losses = a.losses + r0,
                                    .dlogits = a.dx == nullptr ? nullptr : dlogits,
                                    .dlogits_dtype = a.dtype,
                                    .grad_scale = a.grad_scale},
                   stats, r);
        if (a.dx == nullptr) continue;
        if (a.dweight != nullptr) backend.gemm(g.dweight, gemm_ws);  // null: a frozen head (LoRA)
        backend.gemm(g.dx, gemm_ws);
    }
}

}  // namespace tune::kernels
