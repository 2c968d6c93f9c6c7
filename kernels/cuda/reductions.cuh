// Deterministic sums over a whole buffer: a first pass of blocks writes one
// partial each into the backend's scratch, a second single-block pass adds
// them in order. The launch shape depends on n alone (one block per 256
// elements, at most 1024), so the same n gives the same bits; a small
// tensor does not pay for 1024 blocks of which nearly all add nothing.
#pragma once

#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"

namespace tune::kernels::cuda {

constexpr int kReduceBlocks = 1024;  // = BackendScratch::kPartials

// partials[blockIdx.x] = sum of term(i) over this block's grid-stride share.
template <class Term>
__global__ void partial_sums_kernel(float* partials, std::int64_t n, Term term) {
    __shared__ float shared[32];
    float acc = 0.0f;
    TUNE_GRID_STRIDE(i, n) acc += term(i);
    acc = block_sum(acc, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// finish(total) with total the sum of the first `count` partials; one block
// of at least `count` threads (a multiple of 32).
template <class Finish>
__global__ void finish_sum_kernel(const float* partials, int count, Finish finish) {
    __shared__ float shared[32];
    const float total = block_sum(static_cast<int>(threadIdx.x) < count ? partials[threadIdx.x] : 0.0f, shared);
    if (threadIdx.x == 0) finish(total);
}

// Blocks of the first pass over n elements.
inline int reduce_blocks(std::int64_t n) {
    return static_cast<int>(std::min<std::int64_t>(grid_for(n), kReduceBlocks));
}

// finish(sum of term(i) for i < n), both passes enqueued on `stream`;
// `partials` holds kReduceBlocks floats.
template <class Term, class Finish>
void reduce_sum(cudaStream_t stream, float* partials, std::int64_t n, Term term, Finish finish) {
    const int blocks = reduce_blocks(n);
    TUNE_LAUNCH(partial_sums_kernel, static_cast<unsigned>(blocks), kThreads, 0, stream)(partials, n, term);
    const int threads = (blocks + 31) / 32 * 32;
    TUNE_LAUNCH(finish_sum_kernel, 1, threads, 0, stream)(partials, blocks, finish);
}

}  // namespace tune::kernels::cuda
