// The element-wise optimizers: AdamW, Lion and SGD (LOMO's update), each
// rule from kernels/math applied by the shared element loop.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/optimizer_loop.cuh"
#include "kernels/math/adamw.h"
#include "kernels/math/lion.h"
#include "kernels/math/lomo.h"

namespace tune::kernels::cuda {

namespace {

struct AdamWRule {
    void* m;
    void* v;
    DType state;
    math::AdamWHyper h;
    math::AdamWStep decayed, undecayed;
    __device__ void operator()(float& p, float g, std::int64_t i, bool decay) const {
        float mi = load_any(m, state, i), vi = load_any(v, state, i);
        math::adamw_update(p, mi, vi, g, h, decay ? decayed : undecayed);
        store_any(m, state, i, mi);
        store_any(v, state, i, vi);
    }
};

struct LionRule {
    void* m;
    DType state;
    math::LionHyper h;
    __device__ void operator()(float& p, float g, std::int64_t i, bool decay) const {
        float mi = load_any(m, state, i);
        math::lion_update(p, mi, g, h, decay);
        store_any(m, state, i, mi);
    }
};

struct SgdRule {
    math::LomoHyper h;
    __device__ void operator()(float& p, float g, std::int64_t, bool decay) const {
        p = math::lomo_update(p, g, h, decay);
    }
};

}  // namespace

void CudaBackend::adamw_update(const ParamTensor& t, void* m, void* v, DType state_dtype, const AdamWParams& hp) {
    check_param(t, "adamw_update");
    require(is_float(state_dtype), "adamw_update", "state must be float storage");
    const math::AdamWHyper h{hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay};
    const int step = static_cast<int>(hp.step);
    update_params(stream_, t,
                  AdamWRule{m, v, state_dtype, h, math::adamw_step(h, step, true), math::adamw_step(h, step, false)});
}

void CudaBackend::lion_update(const ParamTensor& t, void* m, DType state_dtype, const LionParams& hp) {
    check_param(t, "lion_update");
    require(is_float(state_dtype), "lion_update", "state must be float storage");
    update_params(stream_, t, LionRule{m, state_dtype, math::LionHyper{hp.lr, hp.beta1, hp.beta2, hp.weight_decay}});
}

void CudaBackend::sgd_update(const ParamTensor& t, const SgdParams& hp) {
    check_param(t, "sgd_update");
    math::LomoHyper h;
    h.lr = hp.lr;
    h.weight_decay = hp.weight_decay;
    update_params(stream_, t, SgdRule{h});
}

}  // namespace tune::kernels::cuda
