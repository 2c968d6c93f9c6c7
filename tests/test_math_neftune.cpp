// NEFTune noise: scale alpha/sqrt(s*d), and a counter-based uniform RNG that
// is deterministic per (seed, index), in [-1, 1), and statistically uniform.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include "kernels/math/neftune.h"

using namespace tune::math;

TEST_CASE("splitmix64 reproduces the reference stream", "[math][neftune]") {
    // SplitMix64 seeded with 0: the first outputs of the reference implementation.
    CHECK(splitmix64(0) == 0xe220a8397b1dcdafull);
    CHECK(splitmix64(0x9e3779b97f4a7c15ull) == 0x6e789e6aa1b965f4ull);
}

TEST_CASE("NEFTune scale", "[math][neftune]") {
    CHECK(neftune_scale(5.0f, 64, 64) == Approx(5.0 / 64));
    CHECK(neftune_scale(10.0f, 512, 4096) == Approx(10.0 / std::sqrt(512.0 * 4096)));
}

TEST_CASE("uniform noise is deterministic, bounded and uniform", "[math][neftune]") {
    CHECK(uniform_pm1(42, 7) == uniform_pm1(42, 7));
    CHECK(uniform_pm1(42, 7) != uniform_pm1(43, 7));
    CHECK(uniform_pm1(42, 7) != uniform_pm1(42, 8));
    const int n = 200000;
    double sum = 0, sum_sq = 0;
    int bins[10] = {};
    float lo = 1, hi = -1;
    for (int i = 0; i < n; ++i) {
        const float u = uniform_pm1(1234, static_cast<std::uint64_t>(i));
        REQUIRE(u >= -1.0f);
        REQUIRE(u < 1.0f);
        lo = std::fmin(lo, u);
        hi = std::fmax(hi, u);
        sum += u;
        sum_sq += double{u} * u;
        ++bins[static_cast<int>((u + 1.0f) * 5.0f)];
    }
    CHECK(std::fabs(sum / n) < 0.01);
    CHECK(sum_sq / n == Approx(1.0 / 3).epsilon(0.01));
    for (int b : bins) CHECK(std::abs(b - n / 10) < n / 100);  // each tenth within 10% of expected
    CHECK(lo < -0.999f);
    CHECK(hi > 0.999f);
    CHECK(neftune_noise(1.0f, 0.5f, 9, 3) == Approx(1.0f + 0.5f * uniform_pm1(9, 3)));
}
