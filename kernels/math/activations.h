#pragma once
// SiLU and the SwiGLU gate of the Llama MLP: out = silu(gate) * up.
#include <math.h>  // ::expf exists on host and device alike

#include "kernels/math/hd.h"

namespace tune::math {

TUNE_HD inline float sigmoid(float x) { return 1.0f / (1.0f + ::expf(-x)); }

// x * sigmoid(x); for very negative x, expf overflows to Inf and the result is -0.
TUNE_HD inline float silu(float x) { return x / (1.0f + ::expf(-x)); }

// d silu / dx = s * (1 + x * (1 - s)) with s = sigmoid(x).
TUNE_HD inline float silu_grad(float x) {
    const float s = sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
}

TUNE_HD inline float swiglu(float gate, float up) { return silu(gate) * up; }

// Gradients of swiglu with respect to gate and up, given d out.
TUNE_HD inline void swiglu_backward(float gate, float up, float dout, float& dgate, float& dup) {
    dup = dout * silu(gate);
    dgate = dout * up * silu_grad(gate);
}

}  // namespace tune::math
