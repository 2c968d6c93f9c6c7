// Token embedding lookup and its gradient (scatter-add into the table).
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/typed.h"
#include "kernels/math/vocab_shard.h"
#include "kernels/workspace_bytes.h"

namespace tune::kernels {

namespace {

constexpr std::int64_t kColumnBlock = 256;

void check_tokens(const std::int32_t* tokens, std::int64_t n, std::int64_t vocab, const char* op) {
    for (std::int64_t i = 0; i < n; ++i)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            throw BackendError(std::string("cpu backend: ") + op + ": token " + std::to_string(tokens[i]) + " at " +
                               std::to_string(i) + " outside the vocabulary of " + std::to_string(vocab));
}

}  // namespace

void CpuBackend::embedding_forward(void* out, const std::int32_t* tokens, const void* table, std::int64_t n,
                                   std::int64_t c, std::int64_t vocab, DType dtype, VocabRange range) {
    check_tokens(tokens, n, range.total_or(vocab), "embedding_forward");
    const auto row_bytes = static_cast<std::size_t>(c) * dtype_bytes(dtype);
    auto* dst = static_cast<unsigned char*>(out);
    const auto* src = static_cast<const unsigned char*>(table);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t row = math::vocab_row(tokens[i], range.begin, vocab);
        unsigned char* to = dst + static_cast<std::size_t>(i) * row_bytes;
        if (row < 0)
            std::memset(to, 0, row_bytes);  // another shard's token: all zero bits, +0 in every dtype
        else
            std::memcpy(to, src + static_cast<std::size_t>(row) * row_bytes, row_bytes);
    }
}

std::uint64_t CpuBackend::embedding_backward_workspace_bytes(std::int64_t n, std::int64_t, std::int64_t vocab,
                                                             DType) const {
    return workspace::embedding_backward_bytes(static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(vocab));
}

// Each token's rows of dout are summed in fp32 and added to its table row
// once (one rounding per element, as on CUDA; rounding after every
// occurrence drifts by an ulp per repeat in 16 bits). The workspace holds
// each token's list of rows in order: head[token] its first row, next[row]
// the following one. Threads own disjoint column blocks, so they never race.
void CpuBackend::embedding_backward(void* dtable, const std::int32_t* tokens, const void* dout, std::int64_t n,
                                    std::int64_t c, std::int64_t vocab, DType dtype, Workspace ws, VocabRange range) {
    check_tokens(tokens, n, range.total_or(vocab), "embedding_backward");
    cpu::require_workspace(ws.ptr, ws.bytes, embedding_backward_workspace_bytes(n, c, vocab, dtype),
                           "embedding_backward");
    if (n == 0) return;
    auto* head = static_cast<std::int32_t*>(ws.ptr);
    auto* next = reinterpret_cast<std::int32_t*>(static_cast<unsigned char*>(ws.ptr) +
                                                 workspace::aligned(4 * static_cast<std::uint64_t>(vocab)));
    std::fill(head, head + vocab, -1);
    // Each row's table row, or -1 for another shard's token (no gradient here).
    const auto row_of = [&](std::int64_t i) { return math::vocab_row(tokens[i], range.begin, vocab); };
    for (std::int64_t i = n; i-- > 0;) {
        const std::int64_t row = row_of(i);
        if (row < 0) continue;
        next[i] = head[row];
        head[row] = static_cast<std::int32_t>(i);
    }
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        auto* dt = static_cast<T*>(dtable);
        const auto* dy = static_cast<const T*>(dout);
        const std::int64_t blocks = (c + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t blk = 0; blk < blocks; ++blk) {
            const std::int64_t j0 = blk * kColumnBlock, j1 = std::min(c, j0 + kColumnBlock);
            float acc[kColumnBlock];
            for (std::int64_t i = 0; i < n; ++i) {
                const std::int64_t token_row = row_of(i);
                if (token_row < 0 || head[token_row] != i) continue;  // the token's first row stands for its list
                std::fill(acc, acc + (j1 - j0), 0.0f);
                for (std::int64_t r = i; r >= 0; r = next[r]) {
                    const T* g = dy + r * c;
                    for (std::int64_t j = j0; j < j1; ++j) acc[j - j0] += cpu::load(g, j);
                }
                T* row = dt + token_row * c;
                for (std::int64_t j = j0; j < j1; ++j) cpu::store(row, j, cpu::load(row, j) + acc[j - j0]);
            }
        }
    });
}

}  // namespace tune::kernels
