#pragma once
// AdamW (Loshchilov & Hutter) as torch.optim.AdamW computes it: decoupled
// weight decay p *= 1 - lr*wd first (matrices only: the caller says `decay`),
// then the bias-corrected Adam step p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
#include <math.h>  // ::sqrtf, ::pow exist on host and device alike

#include "kernels/math/hd.h"

namespace tune::math {

struct AdamWHyper {
    float lr = 1e-3f;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float eps = 1e-8f;
    float weight_decay = 1e-2f;
};
inline constexpr AdamWHyper kAdamWDefaults{};  // torch.optim.AdamW defaults

// Per-step scalars; torch computes them in double and hands floats to the kernels.
struct AdamWStep {
    float step_size;              // lr / (1 - beta1^t)
    float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
    float decay;                  // 1 - lr * weight_decay, or 1 where decay is off
};

TUNE_HD inline AdamWStep adamw_step(const AdamWHyper& h, int step, bool decay) {
    const double bc1 = 1.0 - ::pow(static_cast<double>(h.beta1), step);
    const double bc2 = 1.0 - ::pow(static_cast<double>(h.beta2), step);
    const double wd = decay ? static_cast<double>(h.weight_decay) : 0.0;
    return {static_cast<float>(h.lr / bc1), static_cast<float>(::sqrt(bc2)),
            static_cast<float>(1.0 - static_cast<double>(h.lr) * wd)};
}

// One element, all in fp32: p, m, v updated in place from gradient g.
TUNE_HD inline void adamw_update(float& p, float& m, float& v, float g, const AdamWHyper& h, const AdamWStep& s) {
    p *= s.decay;
    m = m * h.beta1 + (1.0f - h.beta1) * g;
    v = v * h.beta2 + (1.0f - h.beta2) * g * g;
    const float denom = ::sqrtf(v) / s.bias_correction2_sqrt + h.eps;
    p -= s.step_size * (m / denom);
}

}  // namespace tune::math
