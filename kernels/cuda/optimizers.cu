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
    const std::int32_t* device_step;  // where set, the step's scalars come from it at launch
    __device__ AdamWRule at_launch() const {
        if (device_step == nullptr) return *this;
        AdamWRule r = *this;
        r.decayed = math::adamw_step(h, *device_step, true);
        r.undecayed = math::adamw_step(h, *device_step, false);
        return r;
    }
    template <int W>
    __device__ void operator()(float (&p)[W], const float (&g)[W], std::int64_t i, const bool (&decay)[W]) const {
        float mi[W], vi[W];
        load_w<W>(m, state, i, mi);
        load_w<W>(v, state, i, vi);
        for (int j = 0; j < W; ++j) math::adamw_update(p[j], mi[j], vi[j], g[j], h, decay[j] ? decayed : undecayed);
        store_w<W>(m, state, i, mi);
        store_w<W>(v, state, i, vi);
    }
    bool packs_at(std::int64_t i) const { return aligned16(m, state, i) && aligned16(v, state, i); }
};

struct LionRule {
    void* m;
    DType state;
    math::LionHyper h;
    template <int W>
    __device__ void operator()(float (&p)[W], const float (&g)[W], std::int64_t i, const bool (&decay)[W]) const {
        float mi[W];
        load_w<W>(m, state, i, mi);
        for (int j = 0; j < W; ++j) math::lion_update(p[j], mi[j], g[j], h, decay[j]);
        store_w<W>(m, state, i, mi);
    }
    __device__ LionRule at_launch() const { return *this; }
    bool packs_at(std::int64_t i) const { return aligned16(m, state, i); }
};

struct SgdRule {
    math::LomoHyper h;
    template <int W>
    __device__ void operator()(float (&p)[W], const float (&g)[W], std::int64_t, const bool (&decay)[W]) const {
        for (int j = 0; j < W; ++j) p[j] = math::lomo_update(p[j], g[j], h, decay[j]);
    }
    __device__ SgdRule at_launch() const { return *this; }
    bool packs_at(std::int64_t) const { return true; }
};

}  // namespace

void CudaBackend::adamw_update(const ParamTensor& t, void* m, void* v, DType state_dtype, const AdamWParams& hp) {
    check_param(t, "adamw_update");
    require(is_float(state_dtype), "adamw_update", "state must be float storage");
    const math::AdamWHyper h{hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay};
    const int step = static_cast<int>(hp.step);
    update_params(stream_, t,
                  AdamWRule{m, v, state_dtype, h, math::adamw_step(h, step, true), math::adamw_step(h, step, false),
                            hp.device_step});
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
