// Token embedding lookup and its gradient (scatter-add into the table).
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/typed.h"

namespace tune::kernels {

namespace {

constexpr std::int64_t kColumnBlock = 256;

void check_tokens(const std::int32_t* tokens, std::int64_t n, std::int64_t vocab, const char* op) {
    for (std::int64_t i = 0; i < n; ++i)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            throw BackendError(std::string("cpu backend: ") + op + ": token " + std::to_string(tokens[i]) +
                               " at " + std::to_string(i) + " outside the vocabulary of " + std::to_string(vocab));
}

}  // namespace

void CpuBackend::embedding_forward(void* out, const std::int32_t* tokens, const void* table, std::int64_t n,
                                   std::int64_t c, std::int64_t vocab, DType dtype) {
    check_tokens(tokens, n, vocab, "embedding_forward");
    const auto row_bytes = static_cast<std::size_t>(c) * dtype_bytes(dtype);
    auto* dst = static_cast<unsigned char*>(out);
    const auto* src = static_cast<const unsigned char*>(table);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
        std::memcpy(dst + static_cast<std::size_t>(i) * row_bytes, src + static_cast<std::size_t>(tokens[i]) * row_bytes,
                    row_bytes);
}

// Threads own disjoint column blocks, so repeated tokens never race.
void CpuBackend::embedding_backward(void* dtable, const std::int32_t* tokens, const void* dout, std::int64_t n,
                                    std::int64_t c, std::int64_t vocab, DType dtype, Workspace) {
    check_tokens(tokens, n, vocab, "embedding_backward");
    cpu::with_float_type(dtype, [&](auto t) {
        using T = decltype(t);
        auto* dt = static_cast<T*>(dtable);
        const auto* dy = static_cast<const T*>(dout);
        const std::int64_t blocks = (c + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t blk = 0; blk < blocks; ++blk) {
            const std::int64_t j0 = blk * kColumnBlock, j1 = std::min(c, j0 + kColumnBlock);
            for (std::int64_t i = 0; i < n; ++i) {
                T* row = dt + static_cast<std::int64_t>(tokens[i]) * c;
                const T* g = dy + i * c;
                for (std::int64_t j = j0; j < j1; ++j) cpu::store(row, j, cpu::load(row, j) + cpu::load(g, j));
            }
        }
    });
}

}  // namespace tune::kernels
