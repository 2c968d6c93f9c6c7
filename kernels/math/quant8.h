#pragma once
// 8-bit blockwise quantization with bitsandbytes' "dynamic" map, and the
// blockwise 8-bit Adam update built on it (Dettmers et al. 2021).
//
// The map is create_dynamic_map(signed, max_exponent_bits=7, total_bits=8)
// from bitsandbytes/functional.py, reproduced to the bit: its float32 values
// come from torch.linspace, whose rounding we mirror for torch's default x86-64
// CPU kernel (avx2 with fused multiply-add). tests/fixtures/dynamic_map.txt,
// written by scripts/gen_dynamic_map.py with torch, is the check. (torch's
// other CPU kernels round differently: with ATEN_CPU_CAPABILITY=default or
// avx512, 38 or 75 of the 512 values differ by 1-2 ulp, so "bitsandbytes' map"
// is exact only relative to a torch kernel; we pick the default one.)
#include <math.h>  // ::fmaf, ::sqrtf, ... exist on host and device alike

#include <cstdint>

#include "kernels/math/half.h"
#include "kernels/math/hd.h"

namespace tune::math {

constexpr int kQuantMapSize = 256;

namespace detail {

// a * b + c rounded twice, never fused (nvcc would contract it by default).
TUNE_HD inline float mul_add_unfused(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(__fmul_rn(a, b), c);
#else
    const volatile float product = a * b;  // volatile: no contraction even with -ffp-contract=fast
    return product + c;
#endif
}

// Element idx of torch.linspace(start, end, steps) in float32 as torch's avx2
// kernel computes it: the first half counts up from start and the second half
// down from end (one fused multiply-add each); full 16-element chunks are
// vectorized, each 8-lane vector adding j * step (unfused) to its first element.
TUNE_HD inline float torch_linspace(float start, float end, int steps, int idx) {
    const float step = (end - start) / static_cast<float>(steps - 1);
    const int halfway = steps / 2;
    const int chunked = steps - steps % 16;
    const int first = idx < chunked ? idx - idx % 8 : idx;  // where this element's run starts
    const float base = first < halfway ? ::fmaf(step, static_cast<float>(first), start)
                                       : ::fmaf(-step, static_cast<float>(steps - first - 1), end);
    return idx == first ? base : mul_add_unfused(static_cast<float>(idx - first), step, base);
}

// Decade i (0..6) of the map: 10^(i-6) times the midpoints of linspace(0.1, 1, items).
TUNE_HD inline float dynamic_map_entry(int decade, int items, int k) {
    const double scales[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
    const float lo = torch_linspace(0.1f, 1.0f, items, k);
    const float hi = torch_linspace(0.1f, 1.0f, items, k + 1);
    return static_cast<float>(scales[decade]) * ((lo + hi) / 2.0f);
}

}  // namespace detail

// Fills code[256] in ascending order. Signed: 127 negative values, 0, 127
// positive values, 1. Unsigned: 0, 254 positive values, 1.
TUNE_HD inline void create_dynamic_map(bool is_signed, float* code) {
    int next = is_signed ? 128 : 1;
    for (int decade = 0; decade < 7; ++decade) {
        const int means = is_signed ? (1 << decade) : (2 << decade);
        for (int k = 0; k < means; ++k) {
            const int at = next++;
            code[at] = detail::dynamic_map_entry(decade, means + 1, k);
            if (is_signed) code[254 - at] = -code[at];  // mirror image below zero
        }
    }
    code[is_signed ? 127 : 0] = 0.0f;
    code[255] = 1.0f;
}

// Index of the map entry nearest to x (x normalised to [-1, 1]), with the
// binary search and midpoint tie rule of bitsandbytes' quantize kernels
// (x exactly on a midpoint keeps the entry the search ended on).
TUNE_HD inline std::uint8_t quantize_to_map(const float* code, bool is_signed, float x) {
    int pivot = 127, upper_pivot = 255, lower_pivot = 0;
    float lower = is_signed ? -1.0f : 0.0f, upper = 1.0f;
    float val = code[pivot];
    for (int i = 64; i > 0; i >>= 1) {
        if (x > val) {
            lower_pivot = pivot;
            lower = val;
            pivot += i;
        } else {
            upper_pivot = pivot;
            upper = val;
            pivot -= i;
        }
        val = code[pivot];
    }
    if (x > val) return static_cast<std::uint8_t>(x > (upper + val) * 0.5f ? upper_pivot : pivot);
    return static_cast<std::uint8_t>(x < (lower + val) * 0.5f ? lower_pivot : pivot);
}

// ---- blockwise quantization (absmax per block) ---------------------------------

TUNE_HD inline float block_absmax(const float* x, int n) {
    float m = 0.0f;
    for (int i = 0; i < n; ++i) m = ::fmaxf(m, ::fabsf(x[i]));
    return m;
}

// 1/absmax, and 0 for an all-zero block (bitsandbytes would divide by zero
// there; either way every element dequantizes to zero).
TUNE_HD inline float inverse_absmax(float absmax) { return absmax > 0.0f ? 1.0f / absmax : 0.0f; }

// Quantizes one block of n values; returns its absmax, the block's scale.
TUNE_HD inline float quantize_block(const float* code, bool is_signed, const float* x, int n, std::uint8_t* q) {
    const float absmax = block_absmax(x, n);
    const float inv = inverse_absmax(absmax);
    for (int i = 0; i < n; ++i) q[i] = quantize_to_map(code, is_signed, x[i] * inv);
    return absmax;
}

TUNE_HD inline float dequantize(const float* code, std::uint8_t q, float absmax) { return code[q] * absmax; }

TUNE_HD inline void dequantize_block(const float* code, const std::uint8_t* q, int n, float absmax, float* out) {
    for (int i = 0; i < n; ++i) out[i] = dequantize(code, q[i], absmax);
}

// ---- blockwise 8-bit Adam (bitsandbytes kOptimizerStatic8bit2StateBlockwise) ----

struct Adam8bitHyper {
    float lr = 1e-3f;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float eps = 1e-8f;
    float weight_decay = 0.0f;  // bitsandbytes Adam8bit; AdamW8bit uses 1e-2
    int block_size = 256;       // current bitsandbytes; the paper used 2048
    int min_8bit_size = 4096;   // smaller tensors keep fp32 state
};
inline constexpr Adam8bitHyper kAdam8bitDefaults{};

// Per-step constants, computed once per step like bitsandbytes does.
struct Adam8bitStep {
    float step_size;  // -lr * sqrt(1 - beta2^t) / (1 - beta1^t)
    float eps_term;   // sqrt(1 - beta2^t) * eps
    float decay;      // 1 - lr * weight_decay, applied after the step
};

TUNE_HD inline Adam8bitStep adam8bit_step(const Adam8bitHyper& h, int step, bool decay) {
    const float c1 = 1.0f - ::powf(h.beta1, static_cast<float>(step));
    const float c2 = ::sqrtf(1.0f - ::powf(h.beta2, static_cast<float>(step)));
    const float wd = decay ? h.weight_decay : 0.0f;
    return {-h.lr * c2 / c1, c2 * h.eps, 1.0f - h.lr * wd};
}

// Quantized states of one block: codes and the block's absmax for m and v.
struct Adam8bitBlock {
    std::uint8_t* m;
    std::uint8_t* v;
    float* absmax_m;
    float* absmax_v;
};

// The dynamic maps: m uses the signed one, v the unsigned one.
struct Adam8bitMaps {
    const float* signed_code;
    const float* unsigned_code;
};

// New fp32 moments of element i from the stored codes (dequantize, then EMA).
TUNE_HD inline void adam8bit_moments(const Adam8bitMaps& maps, std::uint8_t qm, std::uint8_t qv, float absmax_m,
                                     float absmax_v, float g, const Adam8bitHyper& h, float& m, float& v) {
    m = dequantize(maps.signed_code, qm, absmax_m) * h.beta1 + (1.0f - h.beta1) * g;
    v = dequantize(maps.unsigned_code, qv, absmax_v) * h.beta2 + (1.0f - h.beta2) * g * g;
}

TUNE_HD inline float adam8bit_param(float p, float m, float v, const Adam8bitStep& s) {
    return (p + s.step_size * (m / (::sqrtf(v) + s.eps_term))) * s.decay;
}

// Requantize m keeping its sign: bitsandbytes nudges a code whose map value
// has the opposite sign one step back toward the right side of zero.
TUNE_HD inline std::uint8_t requantize_m(const float* signed_code, float m, float inv_absmax) {
    auto q = quantize_to_map(signed_code, true, m * inv_absmax);
    const bool code_negative = (float_bits(signed_code[q]) >> 31) != 0;
    const bool m_negative = (float_bits(m) >> 31) != 0;
    if (code_negative != m_negative) q = static_cast<std::uint8_t>(m > 0.0f ? q + 1 : q - 1);
    return q;
}

// One block of n elements: p (storage P) and g (storage G) in place. Two
// passes over the block so no scratch buffer is needed: the first finds the
// new absmax of m and v, the second recomputes the same moments, updates p
// and requantizes with the new absmax. Non-finite gradients zero the moments
// and leave p alone, as bitsandbytes does.
template <class P, class G>
TUNE_HD inline void adam8bit_block(P* p, const G* g, int n, Adam8bitBlock state, const Adam8bitMaps& maps,
                                   const Adam8bitHyper& h, const Adam8bitStep& s) {
    const float old_m = *state.absmax_m, old_v = *state.absmax_v;
    float new_m = 0.0f, new_v = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float gi = to_float(g[i]);
        if (!is_finite(gi)) continue;
        float m, v;
        adam8bit_moments(maps, state.m[i], state.v[i], old_m, old_v, gi, h, m, v);
        new_m = ::fmaxf(new_m, ::fabsf(m));
        new_v = ::fmaxf(new_v, ::fabsf(v));
    }
    const float inv_m = inverse_absmax(new_m), inv_v = inverse_absmax(new_v);
    for (int i = 0; i < n; ++i) {
        const float gi = to_float(g[i]);
        float m = 0.0f, v = 0.0f;
        if (is_finite(gi)) {
            adam8bit_moments(maps, state.m[i], state.v[i], old_m, old_v, gi, h, m, v);
            p[i] = from_float<P>(adam8bit_param(to_float(p[i]), m, v, s));
        }
        state.m[i] = requantize_m(maps.signed_code, m, inv_m);
        state.v[i] = quantize_to_map(maps.unsigned_code, false, v * inv_v);
    }
    *state.absmax_m = new_m;
    *state.absmax_v = new_v;
}

}  // namespace tune::math
