#pragma once
// Lion (Chen et al. 2023): p *= 1 - lr*wd; p -= lr * sign(beta1*m + (1-beta1)*g);
// m = beta2*m + (1-beta2)*g. The sign of zero is zero, as torch.sign.
#include "kernels/math/hd.h"

namespace tune::math {

struct LionHyper {
    float lr = 1e-4f;
    float beta1 = 0.9f;
    float beta2 = 0.99f;
    float weight_decay = 0.0f;
};
inline constexpr LionHyper kLionDefaults{};  // the paper's (lion-pytorch) defaults

TUNE_HD inline float sign(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); }

// One element in fp32; `decay` is false for norm weights (decay on matrices only).
TUNE_HD inline void lion_update(float& p, float& m, float g, const LionHyper& h, bool decay) {
    if (decay) p *= 1.0f - h.lr * h.weight_decay;
    p -= h.lr * sign(h.beta1 * m + (1.0f - h.beta1) * g);
    m = h.beta2 * m + (1.0f - h.beta2) * g;
}

}  // namespace tune::math
