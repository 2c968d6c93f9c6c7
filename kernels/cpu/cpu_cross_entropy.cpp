// Fused softmax cross-entropy forward and backward, one row per iteration:
// max, sum of exponentials, then the gradient in a third pass; a vocabulary
// shard runs the same passes as three stages the shards combine between.
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/typed.h"
#include "kernels/cpu/vectorize.h"
#include "kernels/math/vocab_shard.h"

namespace tune::kernels {

namespace {

void check(const CrossEntropyArgs& a) {
    cpu::require(a.vocab > 0 && a.rows >= 0 && a.vocab_begin >= 0 && a.vocab_begin + a.vocab <= a.total_vocab(),
                 "cross_entropy", "bad shape");
    cpu::require(a.logits != nullptr && a.targets != nullptr && a.losses != nullptr, "cross_entropy", "null buffer");
    cpu::require(a.stage == CrossEntropyStage::whole || a.stats != nullptr, "cross_entropy", "a stage without stats");
    for (std::int64_t r = 0; r < a.rows; ++r)
        if (a.targets[r] >= a.total_vocab())
            throw BackendError("cpu backend: cross_entropy: target " + std::to_string(a.targets[r]) + " at row " +
                               std::to_string(r) + " outside the vocabulary of " + std::to_string(a.total_vocab()));
}

// A vocabulary shard's stages (kernels/backend.h CrossEntropyStage), row by row.
template <class T>
void shard_stage(const CrossEntropyArgs& a, int threads) {
    const std::int64_t v = a.vocab, n = a.rows;
    float* row_max = a.stats;
    float* sum_exp = a.stats + n;
    float* target_logit = a.stats + 2 * n;
    auto* dl = static_cast<T*>(a.dlogits);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t r = 0; r < n; ++r) {
        const float* x = a.logits + r * v;
        const std::int64_t target = math::shard_column(a.targets[r], a.vocab_begin, v);
        const bool ignored = a.targets[r] < 0;
        if (a.stage == CrossEntropyStage::max) {
            row_max[r] = cpu::lane_max(x, v);
        } else if (a.stage == CrossEntropyStage::sum) {
            const float mx = row_max[r];
            sum_exp[r] = cpu::lane_sum(v, [&](std::int64_t j) { return cpu::exp_vec(x[j] - mx); });
            target_logit[r] = target >= 0 ? x[target] : 0.0f;
        } else {
            a.losses[r] = ignored ? 0.0f : math::shard_loss(row_max[r], sum_exp[r], target_logit[r]);
            if (dl == nullptr) continue;
            T* g = dl + r * v;
            for (std::int64_t j = 0; j < v; ++j)
                cpu::store(
                    g, j,
                    ignored ? 0.0f : math::shard_gradient(x[j], row_max[r], sum_exp[r], j == target, a.grad_scale));
        }
    }
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
    if (a.stage != CrossEntropyStage::whole) {
        cpu::with_float_type(a.dlogits_dtype, [&](auto t) { shard_stage<decltype(t)>(a, threads_); });
        return;
    }
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
