// AdamW against torch.optim.AdamW's rule: a hand-computed step and several
// steps against a double-precision reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/math/adamw.h"

using namespace tune::math;

TEST_CASE("AdamW first step by hand", "[math][adamw]") {
    AdamWHyper h;
    h.lr = 0.1f;
    h.weight_decay = 0.01f;
    float p = 1.0f, m = 0.0f, v = 0.0f;
    adamw_update(p, m, v, 0.5f, h, adamw_step(h, 1, true));
    // p = 1*(1 - 0.001) - (0.1/0.1) * 0.05 / (sqrt(0.00025)/sqrt(0.001) + 1e-8) = 0.999 - 0.1
    CHECK(m == Approx(0.05f));
    CHECK(v == Approx(0.00025).epsilon(1e-4));  // 1 - 0.999f is not exactly 0.001
    CHECK(p == Approx(0.899).epsilon(1e-6));
    float q = 1.0f, mq = 0.0f, vq = 0.0f;
    adamw_update(q, mq, vq, 0.5f, h, adamw_step(h, 1, false));  // a norm weight: no decay
    CHECK(q == Approx(0.9).epsilon(1e-6));
}

TEST_CASE("AdamW defaults are torch's", "[math][adamw]") {
    STATIC_REQUIRE(kAdamWDefaults.lr == 1e-3f);
    STATIC_REQUIRE(kAdamWDefaults.beta1 == 0.9f);
    STATIC_REQUIRE(kAdamWDefaults.beta2 == 0.999f);
    STATIC_REQUIRE(kAdamWDefaults.eps == 1e-8f);
    STATIC_REQUIRE(kAdamWDefaults.weight_decay == 1e-2f);
}

TEST_CASE("AdamW over 6 steps matches a double-precision reference", "[math][adamw]") {
    AdamWHyper h;
    h.lr = 3e-3f;
    h.weight_decay = 0.1f;
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int n = 64;
    std::vector<float> p(n), m(n, 0.0f), v(n, 0.0f);
    for (float& x : p) x = normal(rng);
    std::vector<double> rp(p.begin(), p.end()), rm(n, 0.0), rv(n, 0.0);
    for (int t = 1; t <= 6; ++t) {
        const AdamWStep s = adamw_step(h, t, true);
        for (int i = 0; i < n; ++i) {
            const auto k = static_cast<std::size_t>(i);
            const float g = normal(rng) * 0.1f;
            adamw_update(p[k], m[k], v[k], g, h, s);
            const double b1 = h.beta1, b2 = h.beta2;
            rp[k] *= 1 - double{h.lr} * h.weight_decay;
            rm[k] = b1 * rm[k] + (1 - b1) * g;
            rv[k] = b2 * rv[k] + (1 - b2) * g * g;
            const double mhat = rm[k] / (1 - std::pow(b1, t)), vhat = rv[k] / (1 - std::pow(b2, t));
            rp[k] -= h.lr * mhat / (std::sqrt(vhat) + h.eps);
        }
    }
    for (int i = 0; i < n; ++i) {
        const auto k = static_cast<std::size_t>(i);
        REQUIRE(p[k] == Approx(rp[k]).epsilon(1e-5).margin(1e-6));
        REQUIRE(m[k] == Approx(rm[k]).epsilon(1e-5).margin(1e-8));
        REQUIRE(v[k] == Approx(rv[k]).epsilon(1e-5).margin(1e-10));
    }
}
