// bf16/fp16 conversions: exhaustive decode of all 65536 bit patterns against
// an independent construction, and encode against nearest-value search.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/math/half.h"

using namespace tune::math;

namespace {

// fp16 value from its fields in double arithmetic (independent of half.h).
double fp16_reference(std::uint16_t bits) {
    const int sign = (bits & 0x8000) ? -1 : 1;
    const int exp = (bits >> 10) & 0x1f;
    const int mant = bits & 0x3ff;
    if (exp == 31) return mant ? std::nan("") : sign * HUGE_VAL;
    if (exp == 0) return sign * std::ldexp(mant, -24);
    return sign * std::ldexp(1024 + mant, exp - 25);
}

double bf16_reference(std::uint16_t bits) {
    const int sign = (bits & 0x8000) ? -1 : 1;
    const int exp = (bits >> 7) & 0xff;
    const int mant = bits & 0x7f;
    if (exp == 255) return mant ? std::nan("") : sign * HUGE_VAL;
    if (exp == 0) return sign * std::ldexp(mant, -133);
    return sign * std::ldexp(128 + mant, exp - 134);
}

// Round-to-nearest-even by search over the finite non-negative values of a
// 16-bit format (sorted by bit pattern); `inf_at` is the first value that
// rounds to infinity (the midpoint past the largest finite value).
struct NearestEven {
    std::vector<double> values;  // index == bit pattern of a non-negative finite value
    double inf_at;
    std::uint16_t inf_bits;

    std::uint16_t encode(float f) const {
        const double a = std::fabs(static_cast<double>(f));
        const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
        if (a >= inf_at) return sign | inf_bits;
        const auto it = std::lower_bound(values.begin(), values.end(), a);
        if (it == values.end()) return static_cast<std::uint16_t>(sign | (values.size() - 1));
        const auto hi = static_cast<std::uint16_t>(it - values.begin());
        if (values[hi] == a || hi == 0) return sign | hi;
        const auto lo = static_cast<std::uint16_t>(hi - 1);
        const double dlo = a - values[lo], dhi = values[hi] - a;
        if (dlo < dhi || (dlo == dhi && (lo & 1) == 0)) return sign | lo;
        return sign | hi;
    }
};

NearestEven fp16_nearest() {
    NearestEven n{{}, 65520.0, 0x7c00};
    for (std::uint32_t b = 0; b < 0x7c00; ++b) n.values.push_back(fp16_reference(static_cast<std::uint16_t>(b)));
    return n;
}

NearestEven bf16_nearest() {
    // Largest finite bf16 is (2 - 2^-7) * 2^127; the tie above it rounds to Inf.
    NearestEven n{{}, std::ldexp(2.0 - std::ldexp(1.0, -8), 127), 0x7f80};
    for (std::uint32_t b = 0; b < 0x7f80; ++b) n.values.push_back(bf16_reference(static_cast<std::uint16_t>(b)));
    return n;
}

// Float inputs exercising rounding: each value, each midpoint, and one fp32
// ulp either side of the midpoint, plus a sweep over fp32 bit patterns.
std::vector<float> rounding_probes(const NearestEven& n) {
    std::vector<float> probes;
    for (std::size_t i = 0; i + 1 < n.values.size(); i += 3) {
        const auto mid = static_cast<float>((n.values[i] + n.values[i + 1]) / 2);
        probes.insert(probes.end(), {static_cast<float>(n.values[i]), mid, std::nextafter(mid, 0.0f),
                                     std::nextafter(mid, HUGE_VALF), -mid});
    }
    for (std::uint64_t b = 0; b < 0x7f800000u; b += 997) probes.push_back(bits_float(static_cast<std::uint32_t>(b)));
    return probes;
}

}  // namespace

TEST_CASE("fp16 decode matches field construction for all 65536 patterns", "[math][half]") {
    for (std::uint32_t b = 0; b < 65536; ++b) {
        const auto bits = static_cast<std::uint16_t>(b);
        const double want = fp16_reference(bits);
        const float got = to_float(fp16{bits});
        if (std::isnan(want)) {
            REQUIRE(std::isnan(got));
            REQUIRE_FALSE(is_finite(fp16{bits}));
        } else {
            REQUIRE(static_cast<double>(got) == want);
            REQUIRE(std::signbit(got) == ((bits & 0x8000) != 0));
            REQUIRE(is_finite(fp16{bits}) == std::isfinite(want));
        }
    }
}

TEST_CASE("bf16 decode matches field construction for all 65536 patterns", "[math][half]") {
    for (std::uint32_t b = 0; b < 65536; ++b) {
        const auto bits = static_cast<std::uint16_t>(b);
        const double want = bf16_reference(bits);
        const float got = to_float(bf16{bits});
        if (std::isnan(want)) {
            REQUIRE(std::isnan(got));
            REQUIRE_FALSE(is_finite(bf16{bits}));
        } else {
            REQUIRE(static_cast<double>(got) == want);
            REQUIRE(std::signbit(got) == ((bits & 0x8000) != 0));
            REQUIRE(is_finite(bf16{bits}) == std::isfinite(want));
        }
    }
}

TEST_CASE("encode of every decoded non-NaN pattern gives the pattern back", "[math][half]") {
    for (std::uint32_t b = 0; b < 65536; ++b) {
        const auto bits = static_cast<std::uint16_t>(b);
        const float h = to_float(fp16{bits});
        if (std::isnan(h)) {
            REQUIRE(std::isnan(to_float(to_fp16(h))));
        } else {
            REQUIRE(to_fp16(h).bits == bits);
        }
        const float g = to_float(bf16{bits});
        if (std::isnan(g)) {
            REQUIRE(std::isnan(to_float(to_bf16(g))));
        } else {
            REQUIRE(to_bf16(g).bits == bits);
        }
    }
}

TEST_CASE("fp16 encode rounds to nearest even like a nearest-value search", "[math][half]") {
    const NearestEven n = fp16_nearest();
    std::size_t mismatches = 0;
    for (float f : rounding_probes(n)) {
        if (to_fp16(f).bits == n.encode(f)) continue;
        if (mismatches++ == 0) UNSCOPED_INFO("first mismatch at fp32 bits " << std::hex << float_bits(f));
    }
    REQUIRE(mismatches == 0);
}

TEST_CASE("bf16 encode rounds to nearest even like a nearest-value search", "[math][half]") {
    const NearestEven n = bf16_nearest();
    std::size_t mismatches = 0;
    for (float f : rounding_probes(n)) {
        if (to_bf16(f).bits == n.encode(f)) continue;
        if (mismatches++ == 0) UNSCOPED_INFO("first mismatch at fp32 bits " << std::hex << float_bits(f));
    }
    REQUIRE(mismatches == 0);
}

TEST_CASE("known fp16 and bf16 encodings", "[math][half]") {
    CHECK(to_fp16(1.0f).bits == 0x3c00);
    CHECK(to_fp16(-2.0f).bits == 0xc000);
    CHECK(to_fp16(65504.0f).bits == 0x7bff);
    CHECK(to_fp16(65519.99f).bits == 0x7bff);
    CHECK(to_fp16(65520.0f).bits == 0x7c00);  // tie above the largest finite rounds to Inf
    CHECK(to_fp16(1e9f).bits == 0x7c00);
    CHECK(to_fp16(-HUGE_VALF).bits == 0xfc00);
    CHECK(to_fp16(std::ldexp(1.0f, -24)).bits == 0x0001);  // smallest subnormal
    CHECK(to_fp16(std::ldexp(1.0f, -25)).bits == 0x0000);  // tie to even: zero
    CHECK(to_fp16(std::ldexp(1.5f, -25)).bits == 0x0001);
    CHECK(to_fp16(std::ldexp(3.0f, -25)).bits == 0x0002);             // 1.5 units: tie to even (2)
    CHECK(to_fp16(std::ldexp(1023.5f, -24)).bits == 0x0400);          // rounds up into the smallest normal
    CHECK(to_fp16(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);      // tie, even stays
    CHECK(to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)).bits == 0x3c02);  // tie, odd rounds up
    CHECK(to_fp16(-0.0f).bits == 0x8000);
    CHECK(to_bf16(1.0f).bits == 0x3f80);
    CHECK(to_bf16(1.0f + std::ldexp(1.0f, -8)).bits == 0x3f80);  // tie, even stays
    CHECK(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits == 0x3f82);
    CHECK(to_bf16(3.4028235e38f).bits == 0x7f80);           // FLT_MAX rounds past the largest bf16
    CHECK(to_bf16(std::ldexp(1.0f, -133)).bits == 0x0001);  // fp32 subnormal -> bf16 subnormal
    CHECK(to_bf16(std::ldexp(1.0f, -134)).bits == 0x0000);  // tie to even: zero
    CHECK(to_bf16(-0.0f).bits == 0x8000);
}

TEST_CASE("NaN stays NaN and is quiet after encoding", "[math][half]") {
    const float signalling = bits_float(0x7f800001u);  // payload only in the low bits
    const fp16 h = to_fp16(signalling);
    const bf16 b = to_bf16(signalling);
    CHECK(std::isnan(to_float(h)));
    CHECK((h.bits & 0x0200) != 0);
    CHECK(std::isnan(to_float(b)));
    CHECK((b.bits & 0x0040) != 0);
    CHECK_FALSE(is_finite(h));
    CHECK_FALSE(is_finite(b));
    CHECK_FALSE(is_finite(signalling));
    CHECK_FALSE(is_finite(HUGE_VALF));
    CHECK(is_finite(3.0f));
    CHECK(from_float<fp16>(1.0f).bits == 0x3c00);
    CHECK(from_float<bf16>(1.0f).bits == 0x3f80);
    CHECK(from_float<float>(1.5f) == 1.5f);
}
