// Lion against its published rule: a hand-computed step, sign(0) = 0, and
// several steps against a double-precision reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/math/lion.h"

using namespace tune::math;

TEST_CASE("Lion step by hand", "[math][lion]") {
    LionHyper h;
    h.lr = 0.1f;
    h.weight_decay = 0.5f;
    float p = 1.0f, m = 0.2f;
    lion_update(p, m, -1.0f, h, true);
    // p = 1*(1 - 0.05) - 0.1*sign(0.9*0.2 + 0.1*(-1)) = 0.95 - 0.1; m = 0.99*0.2 + 0.01*(-1)
    CHECK(p == Approx(0.85f));
    CHECK(m == Approx(0.188f));
    float q = 1.0f, mq = 0.2f;
    lion_update(q, mq, -3.0f, h, false);  // sign(0.18 - 0.3) < 0, no decay
    CHECK(q == Approx(1.1f));
}

TEST_CASE("Lion: zero momentum and gradient leave p alone, defaults", "[math][lion]") {
    const LionHyper h;
    float p = 2.0f, m = 0.0f;
    lion_update(p, m, 0.0f, h, true);
    CHECK(p == 2.0f);  // weight_decay defaults to 0
    CHECK(m == 0.0f);
    STATIC_REQUIRE(kLionDefaults.beta1 == 0.9f);
    STATIC_REQUIRE(kLionDefaults.beta2 == 0.99f);
    STATIC_REQUIRE(kLionDefaults.lr == 1e-4f);
    CHECK(sign(-0.0f) == 0.0f);
    CHECK(sign(-3.0f) == -1.0f);
}

TEST_CASE("Lion over 8 steps matches a double-precision reference", "[math][lion]") {
    LionHyper h;
    h.lr = 1e-3f;
    h.weight_decay = 0.1f;
    std::mt19937 rng(2);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int n = 64;
    std::vector<float> p(n), m(n, 0.0f);
    for (float& x : p) x = normal(rng);
    std::vector<double> rp(p.begin(), p.end()), rm(n, 0.0);
    for (int t = 1; t <= 8; ++t) {
        for (int i = 0; i < n; ++i) {
            const auto k = static_cast<std::size_t>(i);
            const float g = normal(rng);
            lion_update(p[k], m[k], g, h, true);
            rp[k] *= 1 - double{h.lr} * h.weight_decay;
            const double c = h.beta1 * rm[k] + (1 - double{h.beta1}) * g;
            rp[k] -= h.lr * ((c > 0) - (c < 0));
            rm[k] = h.beta2 * rm[k] + (1 - double{h.beta2}) * g;
        }
    }
    for (int i = 0; i < n; ++i) {
        const auto k = static_cast<std::size_t>(i);
        REQUIRE(p[k] == Approx(rp[k]).epsilon(1e-5));
        REQUIRE(m[k] == Approx(rm[k]).epsilon(1e-5).margin(1e-7));
    }
}
