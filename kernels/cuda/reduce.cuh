// Warp and block reductions in fp32 with a fixed order for a given launch
// shape, so repeated runs give the same bits.
#pragma once

#include <cuda_runtime.h>

namespace tune::kernels::cuda {

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result. `shared` holds 32 floats; the block must not use
// it again before a __syncthreads().
__device__ __forceinline__ float block_sum(float v, float* shared) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads();  // earlier readers of `shared` are done
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < warps ? shared[lane] : 0.0f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* shared) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < warps ? shared[lane] : -INFINITY;
    return warp_max(v);
}

}  // namespace tune::kernels::cuda
