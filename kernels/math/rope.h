#pragma once
// Rotary position embedding, rotate-half form, as Hugging Face transformers'
// LlamaRotaryEmbedding / apply_rotary_pos_emb compute it in float32:
//   inv_freq[i] = 1 / theta^(float(2i) / head_dim),  i < head_dim/2
//   angle = pos * inv_freq[i];  element i pairs with element i + head_dim/2:
//   y[i] = x[i] cos - x[i+h] sin,   y[i+h] = x[i+h] cos + x[i] sin
#include <math.h>  // ::powf, ::cosf, ::sinf exist on host and device alike

#include "kernels/math/hd.h"

namespace tune::math {

TUNE_HD inline float rope_inv_freq(int i, int head_dim, float theta) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    return 1.0f / ::powf(theta, exponent);
}

// The angle is rounded to fp32 before cos/sin, as transformers does.
TUNE_HD inline float rope_angle(int pos, int i, int head_dim, float theta) {
    return static_cast<float>(pos) * rope_inv_freq(i, head_dim, theta);
}

TUNE_HD inline void rope_cos_sin(int pos, int i, int head_dim, float theta, float& c, float& s) {
    const float angle = rope_angle(pos, i, head_dim, theta);
    c = ::cosf(angle);
    s = ::sinf(angle);
}

// Rotates the pair (x[i], x[i + head_dim/2]).
TUNE_HD inline void rope_rotate(float x1, float x2, float c, float s, float& y1, float& y2) {
    y1 = x1 * c - x2 * s;
    y2 = x2 * c + x1 * s;
}

// The backward of a rotation is the rotation by the opposite angle.
TUNE_HD inline void rope_rotate_backward(float dy1, float dy2, float c, float s, float& dx1, float& dx2) {
    dx1 = dy1 * c + dy2 * s;
    dx2 = dy2 * c - dy1 * s;
}

// One head vector of head_dim floats at position pos, in place (forward, or
// backward when `inverse`).
TUNE_HD inline void rope_apply(float* x, int head_dim, int pos, float theta, bool inverse) {
    const int half = head_dim / 2;
    for (int i = 0; i < half; ++i) {
        float c, s;
        rope_cos_sin(pos, i, head_dim, theta, c, s);
        if (inverse) {
            rope_rotate_backward(x[i], x[i + half], c, s, x[i], x[i + half]);
        } else {
            rope_rotate(x[i], x[i + half], c, s, x[i], x[i + half]);
        }
    }
}

}  // namespace tune::math
