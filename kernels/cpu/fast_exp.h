// Internal to the CPU backend: expf written so the compiler can vectorize
// the loops that call it (glibc's expf is a scalar call). Cephes' range
// reduction and polynomial: relative error about 2e-7 (within 2 ulp of
// expf) for finite x; exp(-inf) and underflow give 0, overflow gives +inf,
// nan stays nan. Used by the softmax, cross-entropy and SwiGLU loops.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

namespace tune::kernels::cpu {

// c ? a : b as bit operations: a plain ?: lets the compiler sink the
// arithmetic that feeds it into a branch, which then cannot be vectorized
// under -ftrapping-math.
inline float select(bool c, float a, float b) {
    std::uint32_t ua, ub;
    std::memcpy(&ua, &a, sizeof ua);
    std::memcpy(&ub, &b, sizeof ub);
    const std::uint32_t mask = 0u - static_cast<std::uint32_t>(c);
    const std::uint32_t r = (ua & mask) | (ub & ~mask);
    float f;
    std::memcpy(&f, &r, sizeof f);
    return f;
}

inline float pow2i(std::int32_t e) {  // 2^e for e in [-126, 127]
    const auto bits = static_cast<std::uint32_t>(e + 127) << 23;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

inline float exp_vec(float x) {
    constexpr float kLog2e = 1.44269504088896341f;
    constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const bool low = x<-104.0f, high = x> 88.8f, nan = x != x;
    // nan becomes 0 here so the integer conversion below is always defined.
    const float clamped = select(nan, 0.0f, select(high, 88.8f, select(low, -104.0f, x)));
    const float n = (clamped * kLog2e + kRound) - kRound;  // nearest integer to x / ln 2
    const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;   // |r| <= ln2 / 2
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // 2^n as two normal factors, so n = 128 (just below FLT_MAX) and
    // subnormal results (n < -126) both come out right.
    const auto ni = static_cast<std::int32_t>(n);
    const std::int32_t half = ni / 2;
    float y = p * pow2i(half) * pow2i(ni - half);
    y = select(high, std::numeric_limits<float>::infinity(), y);
    y = select(low, 0.0f, y);
    return select(nan, x, y);
}

}  // namespace tune::kernels::cpu
