#pragma once
// Rotary position embedding, rotate-half form, as Hugging Face transformers'
// LlamaRotaryEmbedding / apply_rotary_pos_emb compute it in float32:
//   inv_freq[i] = 1 / theta^(float(2i) / head_dim),  i < head_dim/2
//   angle = pos * inv_freq[i];  element i pairs with element i + head_dim/2:
//   y[i] = x[i] cos - x[i+h] sin,   y[i+h] = x[i+h] cos + x[i] sin
// rope_scaling changes inv_freq only (transformers' modeling_rope_utils):
//   linear: inv_freq / factor;
//   llama3 (_compute_llama3_parameters): wavelengths 2*pi/inv_freq beyond
//   original/low_freq_factor divide by factor, those under
//   original/high_freq_factor stay, and those between blend the two with
//   smooth = (original/wavelen - low) / (high - low).
#include <math.h>  // ::powf, ::cosf, ::sinf exist on host and device alike

#include "kernels/math/hd.h"

namespace tune::math {

enum class RopeScalingKind : int { none, linear, llama3 };

struct RopeFrequencies {
    float theta = 10000.0f;
    RopeScalingKind scaling = RopeScalingKind::none;
    float factor = 1.0f;
    float low_freq_factor = 1.0f, high_freq_factor = 4.0f;
    float original_context = 8192.0f;
};

TUNE_HD inline float rope_inv_freq(int i, int head_dim, const RopeFrequencies& f) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float inv = 1.0f / ::powf(f.theta, exponent);
    if (f.scaling == RopeScalingKind::linear) return inv / f.factor;
    if (f.scaling != RopeScalingKind::llama3) return inv;
    const float wavelen = 2.0f * 3.14159265358979f / inv;
    if (wavelen < f.original_context / f.high_freq_factor) return inv;
    if (wavelen > f.original_context / f.low_freq_factor) return inv / f.factor;
    const float smooth = (f.original_context / wavelen - f.low_freq_factor) / (f.high_freq_factor - f.low_freq_factor);
    return (1.0f - smooth) * inv / f.factor + smooth * inv;
}

// The angle is rounded to fp32 before cos/sin, as transformers does.
TUNE_HD inline float rope_angle(int pos, int i, int head_dim, const RopeFrequencies& f) {
    return static_cast<float>(pos) * rope_inv_freq(i, head_dim, f);
}

TUNE_HD inline void rope_cos_sin(int pos, int i, int head_dim, const RopeFrequencies& f, float& c, float& s) {
    const float angle = rope_angle(pos, i, head_dim, f);
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
TUNE_HD inline void rope_apply(float* x, int head_dim, int pos, const RopeFrequencies& f, bool inverse) {
    const int half = head_dim / 2;
    for (int i = 0; i < half; ++i) {
        float c, s;
        rope_cos_sin(pos, i, head_dim, f, c, s);
        if (inverse) {
            rope_rotate_backward(x[i], x[i + half], c, s, x[i], x[i + half]);
        } else {
            rope_rotate(x[i], x[i + half], c, s, x[i], x[i + half]);
        }
    }
}

}  // namespace tune::math
