// Fused softmax cross-entropy forward and backward, one row per iteration.
#include <cmath>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/typed.h"

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

// lse = max + log(sum exp(x - max)), the sum in double.
float log_sum_exp(const float* x, std::int64_t v) {
    float mx = -INFINITY;
    for (std::int64_t j = 0; j < v; ++j) mx = std::max(mx, x[j]);
    double sum = 0;
    for (std::int64_t j = 0; j < v; ++j) sum += std::exp(x[j] - mx);
    return mx + static_cast<float>(std::log(sum));
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
            const float lse = target >= 0 ? log_sum_exp(x, v) : 0.0f;
            a.losses[r] = target >= 0 ? lse - x[target] : 0.0f;
            if (dl == nullptr) continue;
            T* g = dl + r * v;  // may alias x: each element is read before it is written
            for (std::int64_t j = 0; j < v; ++j) {
                const float p = target >= 0 ? std::exp(x[j] - lse) - (j == target ? 1.0f : 0.0f) : 0.0f;
                cpu::store(g, j, a.grad_scale * p);
            }
        }
    };
    cpu::with_float_type(a.dlogits_dtype, body);
}

}  // namespace tune::kernels
