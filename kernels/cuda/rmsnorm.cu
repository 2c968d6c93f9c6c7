// RMSNorm: one block per row with fp32 reductions (forward and dx); the
// weight gradient by column tiles, each block summing its columns over all
// rows in a fixed order (no atomics, deterministic). Its tiles are 16 columns
// (one 32-byte sector of 16-bit data) by 64 row lanes, so a Llama width of
// 4096 makes 256 blocks of 1024 threads: the device full, where 32 by 8 tiles
// left one block of 256 threads per multiprocessor to wait on its loads.
// Rules: kernels/math/rmsnorm.h.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/math/rmsnorm.h"

namespace tune::kernels::cuda {

namespace {

// out (N, C), rstd (N), x (N, C), weight (C); block r handles row r.
template <class T>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* x, const T* weight, int c, float eps) {
    __shared__ float shared[32];
    const std::int64_t row = blockIdx.x;
    const T* xr = x + row * c;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < c; j += blockDim.x) ss += load(xr, j) * load(xr, j);
    const float r = math::rmsnorm_inv_rms(block_sum(ss, shared), c, eps);
    if (threadIdx.x == 0) rstd[row] = r;
    T* yr = out + row * c;
    for (int j = threadIdx.x; j < c; j += blockDim.x)
        store(yr, j, math::rmsnorm_forward(load(xr, j), load(weight, j), r));
}

// dx (N, C) overwritten or accumulated; block r handles row r.
template <class T>
__global__ void rmsnorm_dx_kernel(T* dx, const T* dout, const T* x, const T* weight, const float* rstd, int c,
                                  bool accumulate) {
    __shared__ float shared[32];
    const std::int64_t row = blockIdx.x;
    const T* xr = x + row * c;
    const T* dyr = dout + row * c;
    float dot = 0.0f;
    for (int j = threadIdx.x; j < c; j += blockDim.x) dot += load(dyr, j) * load(weight, j) * load(xr, j);
    const float mean = block_sum(dot, shared) / static_cast<float>(c);
    const float r = rstd[row];
    T* dxr = dx + row * c;
    for (int j = threadIdx.x; j < c; j += blockDim.x) {
        const float g = math::rmsnorm_backward_x(load(xr, j), load(dyr, j), load(weight, j), r, mean);
        store(dxr, j, accumulate ? load(dxr, j) + g : g);
    }
}

constexpr int kTileColumns = 16;
constexpr int kTileRows = 64;

// dweight (C) += sum over rows of dout * x * rstd. Block (16, 64) owns 16
// columns: each of its 64 row lanes strides over the rows, then the 64
// partial sums of a column are added in order.
template <class T>
__global__ void rmsnorm_dweight_kernel(T* dweight, const T* dout, const T* x, const float* rstd, std::int64_t n,
                                       int c) {
    __shared__ float partial[kTileRows][kTileColumns];
    const int col = blockIdx.x * kTileColumns + threadIdx.x;
    float acc = 0.0f;
    if (col < c)
        for (std::int64_t row = threadIdx.y; row < n; row += kTileRows)
            acc += math::rmsnorm_backward_w(load(x, row * c + col), load(dout, row * c + col), rstd[row]);
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || col >= c) return;
    float total = 0.0f;
    for (int i = 0; i < kTileRows; ++i) total += partial[i][threadIdx.x];
    store(dweight, col, load(dweight, col) + total);
}

int row_threads(std::int64_t c) { return c >= 1024 ? 1024 : (c >= 256 ? 256 : 128); }

}  // namespace

void CudaBackend::rmsnorm_forward(void* out, float* rstd, const void* x, const void* weight, std::int64_t n,
                                  std::int64_t c, float eps, DType dtype) {
    require(c > 0 && n >= 0 && c <= (1ll << 30), "rmsnorm_forward", "bad shape");
    if (n == 0) return;
    require(n <= 0x7fffffff, "rmsnorm_forward", "more than 2^31 rows");
    with_float_type(dtype, "rmsnorm_forward", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(rmsnorm_forward_kernel, static_cast<unsigned>(n), row_threads(c), 0, stream_)
        (static_cast<T*>(out), rstd, static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<int>(c), eps);
    });
    TUNE_CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
}

void CudaBackend::rmsnorm_backward(void* dx, void* dweight, const void* dout, const void* x, const void* weight,
                                   const float* rstd, std::int64_t n, std::int64_t c, bool accumulate_dx, DType dtype) {
    require(c > 0 && n >= 0 && c <= (1ll << 30), "rmsnorm_backward", "bad shape");
    if (n == 0) return;
    require(n <= 0x7fffffff, "rmsnorm_backward", "more than 2^31 rows");
    with_float_type(dtype, "rmsnorm_backward", [&](auto t) {
        using T = decltype(t);
        const auto* dy = static_cast<const T*>(dout);
        const auto* in = static_cast<const T*>(x);
        TUNE_LAUNCH(rmsnorm_dx_kernel, static_cast<unsigned>(n), row_threads(c), 0, stream_)
        (static_cast<T*>(dx), dy, in, static_cast<const T*>(weight), rstd, static_cast<int>(c), accumulate_dx);
        TUNE_CUDA_CHECK_LAUNCH("rmsnorm_dx_kernel");
        const auto tiles = static_cast<unsigned>((c + kTileColumns - 1) / kTileColumns);
        TUNE_LAUNCH(rmsnorm_dweight_kernel, tiles, dim3(kTileColumns, kTileRows), 0, stream_)
        (static_cast<T*>(dweight), dy, in, rstd, n, static_cast<int>(c));
        TUNE_CUDA_CHECK_LAUNCH("rmsnorm_dweight_kernel");
    });
}

}  // namespace tune::kernels::cuda
