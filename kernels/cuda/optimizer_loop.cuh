// The element loop the element-wise optimizers share: p and g (times
// grad_scale) read as fp32, the rule updates p and its states at index i,
// then p and the optional low-precision copy are stored.
#pragma once

#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"

namespace tune::kernels::cuda {

inline void check_param(const ParamTensor& t, const char* op) {
    require(t.n >= 0 && (t.n == 0 || (t.param != nullptr && t.grad != nullptr)), op, "null tensor");
    require(is_float(t.param_dtype) && is_float(t.grad_dtype), op, "param and grad must be float storage");
    require(t.param_copy == nullptr || is_float(t.copy_dtype), op, "copy must be float storage");
}

// rule(float& p, float g, std::int64_t i) for every element.
template <class Rule>
__global__ void update_params_kernel(ParamTensor t, Rule rule) {
    TUNE_GRID_STRIDE(i, t.n) {
        float p = load_any(t.param, t.param_dtype, i);
        rule(p, load_any(t.grad, t.grad_dtype, i) * t.grad_scale, i);
        store_any(t.param, t.param_dtype, i, p);
        if (t.param_copy != nullptr) store_any(t.param_copy, t.copy_dtype, i, p);
    }
}

template <class Rule>
void update_params(cudaStream_t stream, const ParamTensor& t, Rule rule) {
    if (t.n == 0) return;
    TUNE_LAUNCH(update_params_kernel, grid_for(t.n), kThreads, 0, stream)(t, rule);
    TUNE_CUDA_CHECK_LAUNCH("update_params_kernel");
}

}  // namespace tune::kernels::cuda
