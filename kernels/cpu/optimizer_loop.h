// Internal to the CPU backend: the element loop every optimizer shares.
// Reads p and g (scaled by grad_scale) as fp32, lets the rule update p
// (and its states at index i), then stores p and the optional copy.
#pragma once

#include <algorithm>

#include "kernels/backend.h"
#include "kernels/cpu/typed.h"

namespace tune::kernels::cpu {

inline void check_param(const ParamTensor& t, const char* op) {
    require(t.n >= 0 && (t.n == 0 || (t.param != nullptr && t.grad != nullptr)), op, "null tensor");
    require(is_float(t.param_dtype) && is_float(t.grad_dtype), op, "param and grad must be float storage");
    require(t.param_copy == nullptr || is_float(t.copy_dtype), op, "copy must be float storage");
}

// rule(float& p, float g, std::int64_t i) over [begin, end).
template <class Rule>
void update_range(const ParamTensor& t, std::int64_t begin, std::int64_t end, Rule&& rule) {
    for (std::int64_t i = begin; i < end; ++i) {
        float p = load_any(t.param, t.param_dtype, i);
        rule(p, load_any(t.grad, t.grad_dtype, i) * t.grad_scale, i);
        store_any(t.param, t.param_dtype, i, p);
        if (t.param_copy != nullptr) store_any(t.param_copy, t.copy_dtype, i, p);
    }
}

template <class Rule>
void update_params(const ParamTensor& t, int threads, Rule&& rule) {
    constexpr std::int64_t kChunk = 4096;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t start = 0; start < t.n; start += kChunk)
        update_range(t, start, std::min(t.n, start + kChunk), rule);
}

}  // namespace tune::kernels::cpu
