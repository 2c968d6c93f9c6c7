// Internal to the CPU backend: the block loop every optimizer shares. Each
// block of up to kOptimBlock elements is loaded as fp32 (the gradient
// already multiplied by grad_scale), updated by the optimizer's body on
// plain float arrays (so its rule vectorizes), then stored back to the
// parameter and its optional copy.
#pragma once

#include <algorithm>

#include "kernels/backend.h"
#include "kernels/cpu/typed.h"
#include "kernels/cpu/vectorize.h"
#include "kernels/op_checks.h"

namespace tune::kernels::cpu {

inline constexpr std::int64_t kOptimBlock = 1024;

struct ParamBlock {
    std::int64_t begin = 0, len = 0;
    float p[kOptimBlock];
    float g[kOptimBlock];
};

inline void check_param(const ParamTensor& t, const char* op) {
    require(t.n >= 0 && (t.n == 0 || (t.param != nullptr && t.grad != nullptr)), op, "null tensor");
    require(is_float(t.param_dtype) && is_float(t.grad_dtype), op, "param and grad must be float storage");
    require(t.param_copy == nullptr || is_float(t.copy_dtype), op, "copy must be float storage");
    check_undecayed(t, "cpu", op);
}

// What multiplies each gradient: grad_scale, times the multiplier where there is one (host memory here).
inline float grad_scale_of(const ParamTensor& t) {
    return t.grad_multiplier != nullptr ? t.grad_scale * *t.grad_multiplier : t.grad_scale;
}

// The step an Adam update applies: AdamWParams::device_step where set (host memory here), else `step`.
inline int step_of(const AdamWParams& hp) {
    return hp.device_step != nullptr ? *hp.device_step : static_cast<int>(hp.step);
}

TUNE_CPU_CLONES inline void scale_run(float* x, std::int64_t n, float s) {
    for (std::int64_t i = 0; i < n; ++i) x[i] *= s;
}

// body(ParamBlock&) for every block, in parallel.
template <class Body>
void update_blocks(const ParamTensor& t, int threads, Body&& body) {
    const std::int64_t blocks = (t.n + kOptimBlock - 1) / kOptimBlock;
    const float scale = grad_scale_of(t);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t k = 0; k < blocks; ++k) {
        ParamBlock b;
        b.begin = k * kOptimBlock;
        b.len = std::min(kOptimBlock, t.n - b.begin);
        load_block(t.param, t.param_dtype, b.begin, b.len, b.p);
        load_block(t.grad, t.grad_dtype, b.begin, b.len, b.g);
        if (scale != 1.0f) scale_run(b.g, b.len, scale);
        body(b);
        store_block(t.param, t.param_dtype, b.begin, b.len, b.p);
        if (t.param_copy != nullptr) store_block(t.param_copy, t.copy_dtype, b.begin, b.len, b.p);
    }
}

}  // namespace tune::kernels::cpu
