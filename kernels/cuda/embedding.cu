// Token embedding: a row gather forward; backward adds each row of dout to
// its token's table row. Repeated tokens are chained into per-token lists
// (workspace: a list head per vocabulary row, a link per token), and one
// block per distinct token and tile of columns sums its list in fp32 and adds
// it to the table once, so no 16-bit atomics and one rounding per table element.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/vocab_shard.h"
#include "kernels/workspace_bytes.h"

namespace tune::kernels::cuda {

namespace {

// out (N, C) = table (V, C) rows at tokens (N); one block per token.
// Another shard's token gives a zero row.
template <class T>
__global__ void embedding_forward_kernel(T* out, const std::int32_t* tokens, const T* table, std::int64_t c,
                                         std::int64_t vocab, std::int64_t begin, std::int64_t total,
                                         DeviceErrorRecord* errors) {
    const std::int64_t i = blockIdx.x;
    const std::int32_t token = tokens[i];
    if (token < 0 || token >= total) {
        if (threadIdx.x == 0) report_device_error(errors, DeviceErrorCode::token_out_of_range, token, i, total);
        return;
    }
    const std::int64_t row = math::vocab_row(token, begin, vocab);
    for (std::int64_t j = threadIdx.x; j < c; j += blockDim.x) out[i * c + j] = row < 0 ? T{} : table[row * c + j];
}

// next[i] = the previous list head of token[i]; head[token] = i. Heads start at -1.
// Another shard's token joins no list.
__global__ void embedding_link_kernel(std::int32_t* head, std::int32_t* next, const std::int32_t* tokens,
                                      std::int64_t n, std::int64_t vocab, std::int64_t begin, std::int64_t total,
                                      DeviceErrorRecord* errors) {
    TUNE_GRID_STRIDE(i, n) {
        const std::int32_t token = tokens[i];
        next[i] = -1;
        if (token < 0 || token >= total) {
            report_device_error(errors, DeviceErrorCode::token_out_of_range, token, i, total);
            continue;
        }
        const std::int64_t row = math::vocab_row(token, begin, vocab);
        if (row >= 0) next[i] = atomicExch(&head[row], static_cast<std::int32_t>(i));
    }
}

// Columns a thread sums per list walk: the walk's loads of `next` are serial,
// so each walk serves this many of a thread's columns at once.
constexpr int kEmbeddingColumnsPerThread = 4;
constexpr std::int64_t kEmbeddingTileColumns = std::int64_t{kThreads} * kEmbeddingColumnsPerThread;

// Block (i, y) works only when row i is its token's list head: it walks the
// list (rows with the same token) once and adds their sum over its tile of
// columns (y) to the table row. A token repeated L times costs one walk of L
// rows per tile, side by side over the tiles; a block once walked the whole
// list for each of its columns in turn (26.6 ms on an H100 for 8192 rows of
// one token at 2048 columns).
template <class T>
__global__ void embedding_accumulate_kernel(T* dtable, const std::int32_t* tokens, const T* dout,
                                            const std::int32_t* head, const std::int32_t* next, std::int64_t c,
                                            std::int64_t vocab, std::int64_t begin) {
    const std::int64_t i = blockIdx.x;
    const std::int64_t token = math::vocab_row(tokens[i], begin, vocab);  // the table's row
    if (token < 0 || head[token] != i) return;
    const std::int64_t first = blockIdx.y * kEmbeddingTileColumns + threadIdx.x;
    float acc[kEmbeddingColumnsPerThread] = {};
    for (std::int32_t r = static_cast<std::int32_t>(i); r >= 0; r = next[r])
        for (int k = 0; k < kEmbeddingColumnsPerThread; ++k) {
            const std::int64_t j = first + std::int64_t{k} * blockDim.x;  // coalesced across the block
            if (j < c) acc[k] += load(dout, r * c + j);
        }
    for (int k = 0; k < kEmbeddingColumnsPerThread; ++k) {
        const std::int64_t j = first + std::int64_t{k} * blockDim.x;
        if (j < c) store(dtable, token * c + j, load(dtable, token * c + j) + acc[k]);
    }
}

}  // namespace

void CudaBackend::embedding_forward(void* out, const std::int32_t* tokens, const void* table, std::int64_t n,
                                    std::int64_t c, std::int64_t vocab, DType dtype, VocabRange range) {
    require(n >= 0 && c > 0 && vocab > 0 && n <= 0x7fffffff, "embedding_forward", "bad shape");
    if (n == 0) return;
    with_float_type(dtype, "embedding_forward", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(embedding_forward_kernel, static_cast<unsigned>(n), kThreads, 0, stream_)
        (static_cast<T*>(out), tokens, static_cast<const T*>(table), c, vocab, range.begin, range.total_or(vocab),
         scratch_.errors);
    });
    TUNE_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

std::uint64_t CudaBackend::embedding_backward_workspace_bytes(std::int64_t n, std::int64_t, std::int64_t vocab,
                                                              DType) const {
    return workspace::embedding_backward_bytes(static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(vocab));
}

void CudaBackend::embedding_backward(void* dtable, const std::int32_t* tokens, const void* dout, std::int64_t n,
                                     std::int64_t c, std::int64_t vocab, DType dtype, Workspace ws, VocabRange range) {
    require(n >= 0 && c > 0 && vocab > 0 && n <= 0x7fffffff && vocab <= 0x7fffffff, "embedding_backward", "bad shape");
    if (n == 0) return;
    require(ws.ptr != nullptr && ws.bytes >= embedding_backward_workspace_bytes(n, c, vocab, dtype),
            "embedding_backward", "workspace smaller than embedding_backward_workspace_bytes()");
    auto* head = static_cast<std::int32_t*>(ws.ptr);
    auto* next = reinterpret_cast<std::int32_t*>(static_cast<char*>(ws.ptr) +
                                                 workspace::aligned(4 * static_cast<std::uint64_t>(vocab)));
    TUNE_CUDA_CHECK(cudaMemsetAsync(head, 0xff, 4 * static_cast<std::uint64_t>(vocab), stream_));  // all -1
    TUNE_LAUNCH(embedding_link_kernel, grid_for(n), kThreads, 0, stream_)
    (head, next, tokens, n, vocab, range.begin, range.total_or(vocab), scratch_.errors);
    TUNE_CUDA_CHECK_LAUNCH("embedding_link_kernel");
    with_float_type(dtype, "embedding_backward", [&](auto t) {
        using T = decltype(t);
        const dim3 grid(static_cast<unsigned>(n),
                        static_cast<unsigned>((c + kEmbeddingTileColumns - 1) / kEmbeddingTileColumns));
        TUNE_LAUNCH(embedding_accumulate_kernel, grid, kThreads, 0, stream_)
        (static_cast<T*>(dtable), tokens, static_cast<const T*>(dout), head, next, c, vocab, range.begin);
    });
    TUNE_CUDA_CHECK_LAUNCH("embedding_accumulate_kernel");
}

}  // namespace tune::kernels::cuda
