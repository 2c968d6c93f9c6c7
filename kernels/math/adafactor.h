#pragma once
// Adafactor (Shazeer & Stern 2018) as transformers.optimization.Adafactor
// computes it with its defaults, split into the pieces a backend loops over:
//
//   per step      t, beta2t = 1 - t^decay_rate, rho = min(1e-2, 1/sqrt(t)),
//                 lr = max(eps2, RMS(p)) * rho            (RMS(p) before the update)
//   per element   u = g^2 + eps1, summed per row and per column (or kept whole for vectors)
//   statistics    row <- beta2t*row + (1-beta2t)*mean_over_columns(u), col likewise
//   per element   update = g / sqrt((row / mean(row)) * col)     [vectors: g / sqrt(v)]
//   per tensor    divisor = max(1, RMS(update) / clip_threshold)
//   per element   p <- p - lr*wd*p - lr * update / divisor
//
// Over ZeRO shards the row/column sums and the sums of squares are partial
// sums completed by an all-reduce before the next piece runs.
#include <math.h>  // ::sqrtf, ::powf exist on host and device alike

#include "kernels/math/hd.h"

namespace tune::math {

struct AdafactorHyper {
    float eps1 = 1e-30f;  // added to g^2
    float eps2 = 1e-3f;   // floor of the parameter scale
    float clip_threshold = 1.0f;
    float decay_rate = -0.8f;
    float weight_decay = 0.0f;
    bool scale_parameter = true;
    bool relative_step = true;
    bool warmup_init = false;
    float lr = 0.0f;  // only used when relative_step is false
                      // beta1 is None in the defaults: no first moment is kept, and none is supported.
};
inline constexpr AdafactorHyper kAdafactorDefaults{};  // transformers' defaults

// ---- per step ----------------------------------------------------------------------

TUNE_HD inline float adafactor_beta2t(int step, const AdafactorHyper& h) {
    return 1.0f - ::powf(static_cast<float>(step), h.decay_rate);
}

// The relative step size rho (the learning rate itself when relative_step is off).
TUNE_HD inline float adafactor_rho(int step, const AdafactorHyper& h) {
    if (!h.relative_step) return h.lr;
    const float min_step = h.warmup_init ? 1e-6f * static_cast<float>(step) : 1e-2f;
    const float inv_sqrt = 1.0f / ::sqrtf(static_cast<float>(step));
    return min_step < inv_sqrt ? min_step : inv_sqrt;
}

// Root mean square of n values from their sum of squares.
TUNE_HD inline float rms_from_sum_sq(float sum_sq, float n) { return ::sqrtf(sum_sq / n); }

// This tensor's learning rate; param_rms is RMS(p) before the update.
TUNE_HD inline float adafactor_lr(float param_rms, int step, const AdafactorHyper& h) {
    float scale = 1.0f;
    if (h.scale_parameter) scale = param_rms > h.eps2 ? param_rms : h.eps2;
    return scale * adafactor_rho(step, h);
}

// ---- second-moment statistics ---------------------------------------------------------

// The quantity whose running means Adafactor keeps.
TUNE_HD inline float adafactor_sq(float g, const AdafactorHyper& h) { return g * g + h.eps1; }

// Running mean update of one statistic (a row, a column or a vector element)
// given the mean of adafactor_sq over what it summarises.
TUNE_HD inline float adafactor_ema(float stat, float mean_sq, float beta2t) {
    return stat * beta2t + mean_sq * (1.0f - beta2t);
}

// ---- the update ---------------------------------------------------------------------------

// Factored (matrices): row_mean is the mean of all rows' statistics.
TUNE_HD inline float adafactor_factored_update(float g, float row, float row_mean, float col) {
    return (1.0f / ::sqrtf(row / row_mean)) * (1.0f / ::sqrtf(col)) * g;
}

// Unfactored (vectors): v is the element's own running mean.
TUNE_HD inline float adafactor_unfactored_update(float g, float v) { return (1.0f / ::sqrtf(v)) * g; }

// What the update is divided by, from the sum of squares of all n update values.
TUNE_HD inline float adafactor_clip_divisor(float update_sum_sq, float n, const AdafactorHyper& h) {
    const float ratio = rms_from_sum_sq(update_sum_sq, n) / h.clip_threshold;
    return ratio > 1.0f ? ratio : 1.0f;
}

// The new parameter; `decay` is false for norm weights.
TUNE_HD inline float adafactor_apply(float p, float update, float lr, float divisor, const AdafactorHyper& h,
                                     bool decay) {
    if (decay && h.weight_decay != 0.0f) p += p * (-h.weight_decay * lr);
    return p - (update / divisor) * lr;
}

}  // namespace tune::math
