// sum_squares: the partial square norm for global gradient-norm clipping.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reductions.cuh"

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

}  // namespace tune::kernels::cuda
