// The element loop the element-wise optimizers share: p and g (times
// grad_scale) read as fp32, the rule updates p and its states at index i,
// then p and the optional low-precision copy are stored.
//
// A call over a run of tensors (ParamTensor::undecayed) is one launch for up
// to kDecayRanges undecayed ranges: the ranges travel by value in the kernel's
// arguments, and each thread walks them with a cursor, since its grid-stride
// indices only grow. A flat buffer of a Llama layer has two (its norms).
#pragma once

#include <algorithm>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/op_checks.h"

namespace tune::kernels::cuda {

inline void check_param(const ParamTensor& t, const char* op) {
    require(t.n >= 0 && (t.n == 0 || (t.param != nullptr && t.grad != nullptr)), op, "null tensor");
    require(is_float(t.param_dtype) && is_float(t.grad_dtype), op, "param and grad must be float storage");
    require(t.param_copy == nullptr || is_float(t.copy_dtype), op, "copy must be float storage");
    check_undecayed(t, "cuda", op);
}

// What multiplies each gradient: grad_scale, times the device's multiplier where there is one.
__device__ __forceinline__ float grad_scale_of(const ParamTensor& t) {
    return t.grad_multiplier != nullptr ? t.grad_scale * *t.grad_multiplier : t.grad_scale;
}

inline constexpr int kDecayRanges = 16;

// The undecayed ranges of one launch's stretch [begin, end) of the tensor.
struct DecayRanges {
    std::int64_t begin = 0, end = 0;
    int count = 0;
    ElementRange r[kDecayRanges];
};

// rule(float& p, float g, std::int64_t i, bool decay) for every element of the stretch.
template <class Rule>
__global__ void update_params_kernel(ParamTensor t, DecayRanges ranges, Rule rule) {
    int next = 0;  // the first range that does not end at or before i
    const std::int64_t n = ranges.end - ranges.begin;
    const float scale = grad_scale_of(t);
    TUNE_GRID_STRIDE(k, n) {
        const std::int64_t i = ranges.begin + k;
        while (next < ranges.count && ranges.r[next].end <= i) ++next;
        const bool decay = t.decay && !(next < ranges.count && ranges.r[next].begin <= i);
        float p = load_any(t.param, t.param_dtype, i);
        rule(p, load_any(t.grad, t.grad_dtype, i) * scale, i, decay);
        store_any(t.param, t.param_dtype, i, p);
        if (t.param_copy != nullptr) store_any(t.param_copy, t.copy_dtype, i, p);
    }
}

// One launch per kDecayRanges undecayed ranges (one launch for a single tensor).
template <class Rule>
void update_params(cudaStream_t stream, const ParamTensor& t, Rule rule) {
    if (t.n == 0) return;
    ParamTensor plain = t;
    plain.undecayed = nullptr, plain.undecayed_count = 0;  // host memory: not for the device
    std::int64_t first = 0;
    do {
        DecayRanges d;
        d.begin = first == 0 ? 0 : t.undecayed[first].begin;
        d.count = static_cast<int>(std::min<std::int64_t>(kDecayRanges, t.undecayed_count - first));
        std::copy_n(t.undecayed + first, d.count, d.r);
        first += d.count;
        d.end = first < t.undecayed_count ? t.undecayed[first].begin : t.n;
        TUNE_LAUNCH(update_params_kernel, grid_for(d.end - d.begin), kThreads, 0, stream)(plain, d, rule);
        TUNE_CUDA_CHECK_LAUNCH("update_params_kernel");
    } while (first < t.undecayed_count);
}

}  // namespace tune::kernels::cuda
