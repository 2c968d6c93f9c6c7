// The element-wise optimizers: AdamW, Lion and SGD (LOMO's update), each
// rule from kernels/math applied to fp32 blocks by the shared block loop.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/optimizer_loop.h"
#include "kernels/decay_runs.h"
#include "kernels/math/adamw.h"
#include "kernels/math/lion.h"
#include "kernels/math/lomo.h"

namespace tune::kernels {

namespace {

// Hyperparameters by value and restrict arrays: the compiler then knows the
// stores cannot change them, and vectorizes.
TUNE_CPU_CLONES void adamw_run(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                               std::int64_t n, math::AdamWHyper h, math::AdamWStep s) {
    for (std::int64_t i = 0; i < n; ++i) math::adamw_update(p[i], m[i], v[i], g[i], h, s);
}

TUNE_CPU_CLONES void lion_run(float* __restrict p, const float* __restrict g, float* __restrict m, std::int64_t n,
                              math::LionHyper h, bool decay) {
    for (std::int64_t i = 0; i < n; ++i) math::lion_update(p[i], m[i], g[i], h, decay);
}

TUNE_CPU_CLONES void sgd_run(float* __restrict p, const float* __restrict g, std::int64_t n, math::LomoHyper h,
                             bool decay) {
    for (std::int64_t i = 0; i < n; ++i) p[i] = math::lomo_update(p[i], g[i], h, decay);
}

}  // namespace

void CpuBackend::adamw_update(const ParamTensor& t, void* m, void* v, DType sd, const AdamWParams& hp) {
    cpu::check_param(t, "adamw_update");
    cpu::require(is_float(sd), "adamw_update", "state must be float storage");
    if (t.undecayed_count > 0) {  // a run of tensors: each stretch of one decay as a tensor
        for_each_decay_run(t, [&](std::int64_t b, std::int64_t e, bool decay) {
            adamw_update(slice(t, b, e, decay), advance(m, sd, b), advance(v, sd, b), sd, hp);
        });
        return;
    }
    const math::AdamWHyper h{hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay};
    const math::AdamWStep step = math::adamw_step(h, cpu::step_of(hp), t.decay);
    cpu::update_blocks(t, threads_, [&](cpu::ParamBlock& b) {
        float mb[cpu::kOptimBlock], vb[cpu::kOptimBlock];
        cpu::load_block(m, sd, b.begin, b.len, mb);
        cpu::load_block(v, sd, b.begin, b.len, vb);
        adamw_run(b.p, b.g, mb, vb, b.len, h, step);
        cpu::store_block(m, sd, b.begin, b.len, mb);
        cpu::store_block(v, sd, b.begin, b.len, vb);
    });
}

void CpuBackend::lion_update(const ParamTensor& t, void* m, DType sd, const LionParams& hp) {
    cpu::check_param(t, "lion_update");
    cpu::require(is_float(sd), "lion_update", "state must be float storage");
    if (t.undecayed_count > 0) {
        for_each_decay_run(t, [&](std::int64_t b, std::int64_t e, bool decay) {
            lion_update(slice(t, b, e, decay), advance(m, sd, b), sd, hp);
        });
        return;
    }
    const math::LionHyper h{hp.lr, hp.beta1, hp.beta2, hp.weight_decay};
    cpu::update_blocks(t, threads_, [&](cpu::ParamBlock& b) {
        float mb[cpu::kOptimBlock];
        cpu::load_block(m, sd, b.begin, b.len, mb);
        lion_run(b.p, b.g, mb, b.len, h, t.decay);
        cpu::store_block(m, sd, b.begin, b.len, mb);
    });
}

void CpuBackend::sgd_update(const ParamTensor& t, const SgdParams& hp) {
    cpu::check_param(t, "sgd_update");
    if (t.undecayed_count > 0) {
        for_each_decay_run(t,
                           [&](std::int64_t b, std::int64_t e, bool decay) { sgd_update(slice(t, b, e, decay), hp); });
        return;
    }
    const math::LomoHyper h{.lr = hp.lr, .weight_decay = hp.weight_decay};
    cpu::update_blocks(t, threads_, [&](cpu::ParamBlock& b) { sgd_run(b.p, b.g, b.len, h, t.decay); });
}

}  // namespace tune::kernels
