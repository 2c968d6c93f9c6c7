// Softmax cross-entropy fused with its backward: one block per row, which
// walks the vocabulary in blockDim-wide chunks twice (an online max/sum of
// exponentials, then the gradient), so the logits are read twice and never
// copied. A negative target ignores its row; one >= V is reported. A
// vocabulary shard runs the same walks as three launches, one per stage.
#include <math.h>

#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/math/vocab_shard.h"

namespace tune::kernels::cuda {

namespace {

constexpr int kRowThreads = 512;

// log(sum(exp(x))) of one row (V) over the block.
__device__ float row_log_sum_exp(const float* x, std::int64_t vocab, float* shared) {
    float mx = -INFINITY, sum = 0.0f;  // this thread's running max and sum of exp(x - mx)
    for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
        const float v = x[j];
        if (v > mx) {
            sum = sum * expf(mx - v) + 1.0f;
            mx = v;
        } else {
            sum += expf(v - mx);
        }
    }
    const float row_max = block_max(mx, shared);
    const float scaled = mx == -INFINITY ? 0.0f : sum * expf(mx - row_max);
    return row_max + logf(block_sum(scaled, shared));
}

// A target past the vocabulary, reported once for its row: the row stops there.
__device__ bool target_past(std::int32_t target, std::int64_t row, std::int64_t vocab, DeviceErrorRecord* errors) {
    if (target < vocab) return false;
    if (threadIdx.x == 0) report_device_error(errors, DeviceErrorCode::target_out_of_range, target, row, vocab);
    return true;
}

// losses (N), dlogits (N, V) in T (may alias logits when T is float).
template <class T>
__global__ void cross_entropy_kernel(const float* logits, const std::int32_t* targets, float* losses, T* dlogits,
                                     std::int64_t vocab, float grad_scale, DeviceErrorRecord* errors) {
    __shared__ float shared[32];
    const std::int64_t row = blockIdx.x;
    const float* x = logits + row * vocab;
    const std::int32_t target = targets[row];
    if (target_past(target, row, vocab, errors)) return;
    const bool ignored = target < 0;
    const float lse = ignored ? 0.0f : row_log_sum_exp(x, vocab, shared);
    if (threadIdx.x == 0) losses[row] = ignored ? 0.0f : lse - x[target];
    if (dlogits == nullptr) return;
    __syncthreads();  // x[target] is read above before any thread overwrites it (aliasing)
    T* g = dlogits + row * vocab;
    for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
        const float p = ignored ? 0.0f : expf(x[j] - lse) - (j == target ? 1.0f : 0.0f);
        store(g, j, grad_scale * p);
    }
}

// A vocabulary shard's stage (kernels/backend.h CrossEntropyStage): one block per row.
// stats (3, N): the row max, the sum of exponentials, the target's logit.
template <class T>
__global__ void cross_entropy_shard_kernel(const float* logits, const std::int32_t* targets, float* losses, T* dlogits,
                                           float* stats, std::int64_t rows, std::int64_t vocab, std::int64_t begin,
                                           std::int64_t total, int stage, float grad_scale, DeviceErrorRecord* errors) {
    __shared__ float shared[32];
    const std::int64_t row = blockIdx.x;
    const float* x = logits + row * vocab;
    const std::int32_t target = targets[row];
    if (target_past(target, row, total, errors)) return;
    const std::int64_t column = math::shard_column(target, begin, vocab);
    float* row_max = stats + row;
    float* sum_exp = stats + rows + row;
    float* target_logit = stats + 2 * rows + row;
    if (stage == static_cast<int>(CrossEntropyStage::max)) {
        float mx = -INFINITY;
        for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) mx = fmaxf(mx, x[j]);
        mx = block_max(mx, shared);
        if (threadIdx.x == 0) *row_max = mx;
        return;
    }
    if (stage == static_cast<int>(CrossEntropyStage::sum)) {
        const float mx = *row_max;
        float sum = 0.0f;
        for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) sum += expf(x[j] - mx);
        sum = block_sum(sum, shared);
        if (threadIdx.x == 0) *sum_exp = sum, *target_logit = column >= 0 ? x[column] : 0.0f;
        return;
    }
    const bool ignored = target < 0;
    if (threadIdx.x == 0) losses[row] = ignored ? 0.0f : math::shard_loss(*row_max, *sum_exp, *target_logit);
    if (dlogits == nullptr) return;
    T* g = dlogits + row * vocab;
    for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
        store(g, j, ignored ? 0.0f : math::shard_gradient(x[j], *row_max, *sum_exp, j == column, grad_scale));
}

void cross_entropy_shard(const CrossEntropyArgs& a, cudaStream_t stream, DeviceErrorRecord* errors) {
    with_float_type(a.dlogits_dtype, "cross_entropy", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(cross_entropy_shard_kernel, static_cast<unsigned>(a.rows), kRowThreads, 0, stream)
        (a.logits, a.targets, a.losses, static_cast<T*>(a.dlogits), a.stats, a.rows, a.vocab, a.vocab_begin,
         a.total_vocab(), static_cast<int>(a.stage), a.grad_scale, errors);
    });
    TUNE_CUDA_CHECK_LAUNCH("cross_entropy_shard_kernel");
}

}  // namespace

void CudaBackend::cross_entropy(const CrossEntropyArgs& a) {
    require(a.vocab > 0 && a.rows >= 0 && a.rows <= 0x7fffffff, "cross_entropy", "bad shape");
    require(a.logits != nullptr && a.targets != nullptr && a.losses != nullptr, "cross_entropy", "null buffer");
    require(a.dlogits == nullptr || a.dlogits_dtype == DType::f32 || a.dlogits != static_cast<const void*>(a.logits),
            "cross_entropy", "dlogits may alias logits only when f32");
    require(a.vocab_begin >= 0 && a.vocab_begin + a.vocab <= a.total_vocab(), "cross_entropy", "bad shard");
    require(a.stage == CrossEntropyStage::whole || a.stats != nullptr, "cross_entropy", "a stage without stats");
    if (a.rows == 0) return;
    if (a.stage != CrossEntropyStage::whole) return cross_entropy_shard(a, stream_, scratch_.errors);
    with_float_type(a.dlogits_dtype, "cross_entropy", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(cross_entropy_kernel, static_cast<unsigned>(a.rows), kRowThreads, 0, stream_)
        (a.logits, a.targets, a.losses, static_cast<T*>(a.dlogits), a.vocab, a.grad_scale, scratch_.errors);
    });
    TUNE_CUDA_CHECK_LAUNCH("cross_entropy_kernel");
}

}  // namespace tune::kernels::cuda
