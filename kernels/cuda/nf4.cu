// NF4 quantize and dequantize (QLoRA's frozen base): the rules are
// kernels/math/nf4.h's, the ones the CPU backend runs. Quantizing runs once
// per trial: one thread per block of 64, one thread for the offset (a
// sequential double sum, so every backend gets its bits), one thread per
// block of 256 absmax values. Dequantizing (every GEMM of a QLoRA layer) is
// element-wise; each CUDA block first builds the signed 8-bit map in shared memory.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/nf4.h"

namespace tune::kernels::cuda {

namespace {

__global__ void nf4_blocks_kernel(math::Nf4Parts p, const float* x, float* absmax, std::int64_t blocks) {
    TUNE_GRID_STRIDE(b, blocks)
    absmax[b] = math::nf4_quantize_block(x + b * math::kNf4Block, math::kNf4Block, p.packed + b * math::kNf4Block / 2);
}

__global__ void nf4_offset_kernel(math::Nf4Parts p, const float* absmax, std::int64_t blocks) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *p.offset = math::nf4_absmax_offset(absmax, blocks);
}

__global__ void nf4_absmax_kernel(math::Nf4Parts p, const float* absmax, std::int64_t blocks) {
    __shared__ float map[math::kQuantMapSize];
    if (threadIdx.x == 0) math::create_dynamic_map(true, map);
    __syncthreads();
    const std::int64_t groups = (blocks + math::kNf4AbsmaxBlock - 1) / math::kNf4AbsmaxBlock;
    TUNE_GRID_STRIDE(g, groups) {
        const std::int64_t first = g * math::kNf4AbsmaxBlock;
        const std::int64_t left = blocks - first;
        const int count = static_cast<int>(left < math::kNf4AbsmaxBlock ? left : math::kNf4AbsmaxBlock);
        p.scales[g] = math::nf4_quantize_absmax_block(map, absmax + first, count, *p.offset, p.absmax + first);
    }
}

__global__ void nf4_dequantize_kernel(void* out, DType dtype, math::Nf4Parts p, std::int64_t begin,
                                      std::int64_t count) {
    __shared__ float map[math::kQuantMapSize];
    if (threadIdx.x == 0) math::create_dynamic_map(true, map);
    __syncthreads();
    TUNE_GRID_STRIDE(i, count) store_any(out, dtype, i, math::nf4_weight(map, p, begin + i));
}

}  // namespace

void CudaBackend::nf4_quantize(void* q, const float* x, std::int64_t n, float* absmax) {
    require(n >= 0 && n % math::kNf4Block == 0, "nf4_quantize", "n must be a multiple of 64");
    if (n == 0) return;
    const math::Nf4Parts p = math::nf4_parts(q, n);
    const std::int64_t blocks = n / math::kNf4Block;
    TUNE_LAUNCH(nf4_blocks_kernel, grid_for(blocks), kThreads, 0, stream_)(p, x, absmax, blocks);
    TUNE_CUDA_CHECK_LAUNCH("nf4_blocks_kernel");
    TUNE_LAUNCH(nf4_offset_kernel, 1, 32, 0, stream_)(p, absmax, blocks);
    TUNE_CUDA_CHECK_LAUNCH("nf4_offset_kernel");
    const std::int64_t groups = (blocks + math::kNf4AbsmaxBlock - 1) / math::kNf4AbsmaxBlock;
    TUNE_LAUNCH(nf4_absmax_kernel, grid_for(groups), kThreads, 0, stream_)(p, absmax, blocks);
    TUNE_CUDA_CHECK_LAUNCH("nf4_absmax_kernel");
}

void CudaBackend::nf4_dequantize(void* out, DType dtype, const void* q, std::int64_t n, std::int64_t begin,
                                 std::int64_t count) {
    require(n >= 0 && n % math::kNf4Block == 0, "nf4_dequantize", "n must be a multiple of 64");
    require(begin >= 0 && count >= 0 && begin + count <= n, "nf4_dequantize", "range outside the buffer");
    if (count == 0) return;
    const math::Nf4Parts p = math::nf4_parts(const_cast<void*>(q), n);
    TUNE_LAUNCH(nf4_dequantize_kernel, grid_for(count), kThreads, 0, stream_)(out, dtype, p, begin, count);
    TUNE_CUDA_CHECK_LAUNCH("nf4_dequantize_kernel");
}

}  // namespace tune::kernels::cuda
