// The element-wise optimizers: AdamW, Lion and SGD (LOMO's update), each
// rule from kernels/math applied by the shared element loop.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/optimizer_loop.h"
#include "kernels/math/adamw.h"
#include "kernels/math/lion.h"
#include "kernels/math/lomo.h"

namespace tune::kernels {

void CpuBackend::adamw_update(const ParamTensor& t, void* m, void* v, DType state_dtype, const AdamWParams& hp) {
    cpu::check_param(t, "adamw_update");
    cpu::require(is_float(state_dtype), "adamw_update", "state must be float storage");
    const math::AdamWHyper h{hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay};
    const math::AdamWStep step = math::adamw_step(h, static_cast<int>(hp.step), t.decay);
    cpu::update_params(t, threads_, [&](float& p, float g, std::int64_t i) {
        float mi = cpu::load_any(m, state_dtype, i), vi = cpu::load_any(v, state_dtype, i);
        math::adamw_update(p, mi, vi, g, h, step);
        cpu::store_any(m, state_dtype, i, mi);
        cpu::store_any(v, state_dtype, i, vi);
    });
}

void CpuBackend::lion_update(const ParamTensor& t, void* m, DType state_dtype, const LionParams& hp) {
    cpu::check_param(t, "lion_update");
    cpu::require(is_float(state_dtype), "lion_update", "state must be float storage");
    const math::LionHyper h{hp.lr, hp.beta1, hp.beta2, hp.weight_decay};
    cpu::update_params(t, threads_, [&](float& p, float g, std::int64_t i) {
        float mi = cpu::load_any(m, state_dtype, i);
        math::lion_update(p, mi, g, h, t.decay);
        cpu::store_any(m, state_dtype, i, mi);
    });
}

void CpuBackend::sgd_update(const ParamTensor& t, const SgdParams& hp) {
    cpu::check_param(t, "sgd_update");
    const math::LomoHyper h{.lr = hp.lr, .weight_decay = hp.weight_decay};
    cpu::update_params(t, threads_, [&](float& p, float g, std::int64_t) { p = math::lomo_update(p, g, h, t.decay); });
}

}  // namespace tune::kernels
