#pragma once
// LOMO (Lv et al. 2023): fused SGD applied to each gradient as backward
// produces it. The gradient is unscaled by the loss scale, clipped by value
// and/or by a global-norm coefficient from a first backward pass, then
// p = p*(1 - lr*wd) - lr*g in fp32; the caller stores p in its own dtype.
#include "kernels/math/hd.h"

namespace tune::math {

struct LomoHyper {
    float lr = 1e-3f;
    float weight_decay = 0.0f;
    float clip_value = 0.0f;  // <= 0: no value clipping (LOMO's clip_grad_value=None)
    float clip_norm = 0.0f;   // <= 0: no norm clipping (LOMO's clip_grad_norm=None)
};
inline constexpr LomoHyper kLomoDefaults{};  // OpenLMLab LOMO defaults

// The gradient LOMO applies: g / loss_scale, clamped to +-clip_value, times
// the global-norm clip coefficient (1 when norm clipping is off).
TUNE_HD inline float lomo_grad(float g, float inv_loss_scale, float clip_value, float clip_coef) {
    g *= inv_loss_scale;
    if (clip_value > 0.0f) g = g > clip_value ? clip_value : (g < -clip_value ? -clip_value : g);
    return g * clip_coef;
}

// The new fp32 parameter; `decay` is false for norm weights.
TUNE_HD inline float lomo_update(float p, float g, const LomoHyper& h, bool decay) {
    if (decay) p *= 1.0f - h.lr * h.weight_decay;
    return p - h.lr * g;
}

}  // namespace tune::math
