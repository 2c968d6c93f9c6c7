// Deterministic sums over a whole buffer: a first pass of a fixed number of
// blocks writes one partial each into the backend's scratch, a second
// single-block pass adds them in order. Same launch shape, same bits.
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

// finish(total) with total the sum of the kReduceBlocks partials; one block of 1024 threads.
template <class Finish>
__global__ void finish_sum_kernel(const float* partials, Finish finish) {
    __shared__ float shared[32];
    const float total = block_sum(partials[threadIdx.x], shared);
    if (threadIdx.x == 0) finish(total);
}

}  // namespace tune::kernels::cuda
