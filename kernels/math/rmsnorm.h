#pragma once
// RMSNorm as transformers' LlamaRMSNorm: y = w * x / sqrt(mean(x^2) + eps),
// statistics in fp32. Per row, the backend reduces sum(x^2) for the forward
// and sum(dy * w * x) for the backward, then calls these per element.
#include <math.h>

#include "kernels/math/hd.h"

namespace tune::math {

// 1 / sqrt(mean(x^2) + eps) of a row of n values.
TUNE_HD inline float rmsnorm_inv_rms(float sum_sq, int n, float eps) {
    return 1.0f / ::sqrtf(sum_sq / static_cast<float>(n) + eps);
}

TUNE_HD inline float rmsnorm_forward(float x, float w, float inv_rms) { return w * (x * inv_rms); }

// dx_i = r * (dy_i w_i) - r^3 x_i * mean_j(dy_j w_j x_j), with r = inv_rms and
// mean_dyw_x = sum_j(dy_j w_j x_j) / n.
TUNE_HD inline float rmsnorm_backward_x(float x, float dy, float w, float inv_rms, float mean_dyw_x) {
    return inv_rms * (dy * w) - inv_rms * inv_rms * inv_rms * x * mean_dyw_x;
}

// This row's contribution to dw_i.
TUNE_HD inline float rmsnorm_backward_w(float x, float dy, float inv_rms) { return dy * x * inv_rms; }

}  // namespace tune::math
