// Internal to the CPU backend: deterministic parallel sums. The range is cut
// into a fixed number of blocks, so the summation order (and the result)
// does not depend on the thread count.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace tune::kernels::cpu {

inline constexpr std::int64_t kReduceBlocks = 256;

// sum over i in [0, n) of term(i), in double.
template <class Term>
double blocked_sum(std::int64_t n, int threads, Term&& term) {
    std::array<double, kReduceBlocks> partial{};
    const std::int64_t per_block = (n + kReduceBlocks - 1) / kReduceBlocks;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t blk = 0; blk < kReduceBlocks; ++blk) {
        const std::int64_t end = std::min(n, (blk + 1) * per_block);
        double acc = 0;
        for (std::int64_t i = blk * per_block; i < end; ++i) acc += term(i);
        partial[static_cast<std::size_t>(blk)] = acc;
    }
    double total = 0;
    for (double v : partial) total += v;
    return total;
}

}  // namespace tune::kernels::cpu
