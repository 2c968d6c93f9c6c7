#pragma once
// Global gradient-norm clipping as torch.nn.utils.clip_grad_norm_: gradients
// are scaled by min(1, max_norm / (norm + 1e-6)). The norm is the square root
// of a sum of squares the backend reduces (over shards: partial sums + all-reduce).
#include <math.h>

#include "kernels/math/hd.h"

namespace tune::math {

// max_norm <= 0 disables clipping.
TUNE_HD inline float clip_coefficient(float total_norm, float max_norm) {
    if (max_norm <= 0.0f) return 1.0f;
    const float coef = max_norm / (total_norm + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

TUNE_HD inline float global_norm(float sum_of_squares) { return ::sqrtf(sum_of_squares); }

// What multiplies each gradient at the update, from the sum of squares of the
// loss-scaled gradients: the clip coefficient of the true norm, over the loss scale.
TUNE_HD inline float gradient_multiplier(float sum_of_squares, float max_norm, float loss_scale) {
    return clip_coefficient(global_norm(sum_of_squares) / loss_scale, max_norm) / loss_scale;
}

}  // namespace tune::math
