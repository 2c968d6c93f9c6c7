// sum_squares: the partial square norm for global gradient-norm clipping; gradient_multiplier: the
// clip coefficient over the loss scale from those sums, on the device.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reductions.cuh"
#include "kernels/math/grad_clip.h"

namespace tune::kernels::cuda {

namespace {

template <class T>
struct SquareTerm {
    const T* x;
    __device__ float operator()(std::int64_t i) const {
        const float v = load(x, i);
        return v * v;
    }
};

struct AddToSum {
    float* sum;
    __device__ void operator()(float total) const { *sum += total; }
};

}  // namespace

void CudaBackend::sum_squares(float* sum, const void* x, std::int64_t n, DType dtype) {
    if (n <= 0) return;
    static_assert(kReduceBlocks == BackendScratch::kPartials);
    with_float_type(dtype, "sum_squares", [&](auto t) {
        using T = decltype(t);
        reduce_sum(stream_, scratch_.partials, n, SquareTerm<T>{static_cast<const T*>(x)}, AddToSum{sum});
    });
    TUNE_CUDA_CHECK_LAUNCH("partial_sums_kernel");
}

namespace {

__global__ void gradient_multiplier_kernel(float* out, const float* sums, std::int64_t count, float max_norm,
                                           float loss_scale) {
    *out = math::gradient_multiplier(count == 2 ? sums[0] - sums[1] : sums[0], max_norm, loss_scale);
}

}  // namespace

void CudaBackend::gradient_multiplier(float* out, const float* sums, std::int64_t count, float max_norm,
                                      float loss_scale) {
    require(count == 1 || count == 2, "gradient_multiplier", "one sum, or a sum and the squares counted twice");
    TUNE_LAUNCH(gradient_multiplier_kernel, 1, 1, 0, stream_)(out, sums, count, max_norm, loss_scale);
    TUNE_CUDA_CHECK_LAUNCH("gradient_multiplier_kernel");
}

}  // namespace tune::kernels::cuda
