// Fused softmax cross-entropy forward and backward, one row per iteration:
// max, sum of exponentials, then the gradient in a third pass.
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/typed.h"
#include "kernels/cpu/vectorize.h"

namespace tune::kernels {

namespace {

void check(const CrossEntropyArgs& a) {
    cpu::require(a.vocab > 0 && a.rows >= 0, "cross_entropy", "bad shape");
    cpu::require(a.logits != nullptr && a.targets != nullptr && a.losses != nullptr, "cross_entropy", "null buffer");
    for (std::int64_t r = 0; r < a.rows; ++r)
        if (a.targets[r] >= a.vocab)
            throw BackendError("cpu backend: cross_entropy: target " + std::to_string(a.targets[r]) + " at row " +
                               std::to_string(r) + " outside the vocabulary of " + std::to_string(a.vocab));
}

// log(sum exp(x)) of one row, shifted by its max.
TUNE_CPU_CLONES float log_sum_exp(const float* x, std::int64_t v) {
    const float mx = cpu::lane_max(x, v);
    return mx + std::log(cpu::lane_sum(v, [&](std::int64_t j) { return cpu::exp_vec(x[j] - mx); }));
}

// g = scale * softmax(x), from the row's log-sum-exp; g may alias x.
template <class T>
TUNE_CPU_CLONES void softmax_scaled(T* g, const float* x, std::int64_t v, float lse, float scale) {
    for (std::int64_t j = 0; j < v; ++j) cpu::store(g, j, scale * cpu::exp_vec(x[j] - lse));
}

}  // namespace

void CpuBackend::cross_entropy(const CrossEntropyArgs& a) {
    check(a);
    const std::int64_t v = a.vocab;
    auto body = [&](auto t) {
        using T = decltype(t);
        auto* dl = static_cast<T*>(a.dlogits);
#pragma omp parallel for num_threads(threads_) schedule(static)
        for (std::int64_t r = 0; r < a.rows; ++r) {
            const float* x = a.logits + r * v;
            const std::int32_t target = a.targets[r];
            T* g = dl == nullptr ? nullptr : dl + r * v;
            if (target < 0) {  // ignored row
                a.losses[r] = 0.0f;
                for (std::int64_t j = 0; g != nullptr && j < v; ++j) cpu::store(g, j, 0.0f);
                continue;
            }
            const float lse = log_sum_exp(x, v);
            const float x_target = x[target];  // read before g, which may alias x, is written
            a.losses[r] = lse - x_target;
            if (g == nullptr) continue;
            softmax_scaled(g, x, v, lse, a.grad_scale);
            cpu::store(g, target, a.grad_scale * (cpu::exp_vec(x_target - lse) - 1.0f));
        }
    };
    cpu::with_float_type(a.dlogits_dtype, body);
}

}  // namespace tune::kernels
