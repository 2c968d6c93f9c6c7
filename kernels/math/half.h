#pragma once
// 16-bit floating-point storage types (bf16, fp16) and their conversions to
// and from fp32. Arithmetic is always done in fp32; these types only store.
// Encoding rounds to nearest, ties to even; NaN stays NaN (quieted),
// overflow becomes Inf, fp16 subnormals are produced and decoded exactly.
#include <cstdint>
#include <cstring>

#include "kernels/math/hd.h"

namespace tune::math {

struct bf16 {
    std::uint16_t bits;
};
struct fp16 {
    std::uint16_t bits;
};

TUNE_HD inline std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
#endif
}

TUNE_HD inline float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}

TUNE_HD inline bool is_finite(float f) { return (float_bits(f) & 0x7f800000u) != 0x7f800000u; }
TUNE_HD inline bool is_finite(bf16 h) { return (h.bits & 0x7f80u) != 0x7f80u; }
TUNE_HD inline bool is_finite(fp16 h) { return (h.bits & 0x7c00u) != 0x7c00u; }

// ---- bf16: the top half of an fp32 -------------------------------------------

TUNE_HD inline float to_float(bf16 h) { return bits_float(std::uint32_t{h.bits} << 16); }

TUNE_HD inline bf16 to_bf16(float f) {
    const std::uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign and payload top, force quiet
        return bf16{static_cast<std::uint16_t>((x >> 16) | 0x0040u)};
    }
    // Adding 0x7fff plus the lowest kept bit rounds half to even; a carry out
    // of the mantissa bumps the exponent, up to Inf, which is the right answer.
    const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
    return bf16{static_cast<std::uint16_t>(rounded >> 16)};
}

// ---- fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits ---------------------

TUNE_HD inline float to_float(fp16 h) {
    const std::uint32_t sign = std::uint32_t{h.bits & 0x8000u} << 16;
    const std::uint32_t exp = (h.bits >> 10) & 0x1fu;
    const std::uint32_t mant = h.bits & 0x3ffu;
    if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant << 13));  // Inf, NaN
    if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
    // Subnormal (or zero): mant * 2^-24, exact in fp32 and never itself subnormal.
    const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return bits_float(sign | float_bits(magnitude));
}

namespace detail {

// |f| (as fp32 bits) below 2^-14 in fp16 subnormal units of 2^-24, rounded half to even.
TUNE_HD inline std::uint16_t fp16_subnormal(std::uint32_t abs_bits) {
    const std::uint32_t exp = abs_bits >> 23;
    if (exp < 102u) return 0;  // below 2^-25: rounds to zero
    const std::uint32_t mant = (abs_bits & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exp;  // 14..24
    std::uint32_t q = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry into the smallest normal
    return static_cast<std::uint16_t>(q);
}

}  // namespace detail

TUNE_HD inline fp16 to_fp16(float f) {
    const std::uint32_t x = float_bits(f);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return fp16{static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu))};
    if (a >= 0x477ff000u) return fp16{static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 65520 (and Inf)
    if (a < 0x38800000u) return fp16{static_cast<std::uint16_t>(sign | detail::fp16_subnormal(a))};
    // Normal: re-bias the exponent (127 -> 15), then round the 13 dropped bits half to even.
    const std::uint32_t rebased = a - (112u << 23);
    const std::uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
    return fp16{static_cast<std::uint16_t>(sign | (rounded >> 13))};
}

// ---- generic access for code templated on the storage type --------------------

TUNE_HD inline float to_float(float f) { return f; }

template <class T>
TUNE_HD inline T from_float(float f);
template <>
TUNE_HD inline float from_float<float>(float f) {
    return f;
}
template <>
TUNE_HD inline bf16 from_float<bf16>(float f) {
    return to_bf16(f);
}
template <>
TUNE_HD inline fp16 from_float<fp16>(float f) {
    return to_fp16(f);
}

}  // namespace tune::math
