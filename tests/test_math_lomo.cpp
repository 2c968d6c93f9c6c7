// LOMO: its update is plain SGD with decoupled decay (torch.optim.SGD without
// momentum, whose coupled L2 decay is algebraically the same), applied to the
// unscaled, clipped gradient.
#include <catch2/catch.hpp>

#include <random>

#include "kernels/math/grad_clip.h"
#include "kernels/math/lomo.h"

using namespace tune::math;

TEST_CASE("LOMO update equals SGD with weight decay", "[math][lomo]") {
    LomoHyper h;
    h.lr = 0.05f;
    h.weight_decay = 0.1f;
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int i = 0; i < 200; ++i) {
        const float p = normal(rng), g = normal(rng);
        const double sgd = p - double{h.lr} * (g + double{h.weight_decay} * p);  // torch SGD, coupled L2
        REQUIRE(lomo_update(p, g, h, true) == Approx(sgd).epsilon(1e-6).margin(1e-7));
        REQUIRE(lomo_update(p, g, h, false) == Approx(p - double{h.lr} * g).epsilon(1e-6).margin(1e-7));
    }
    CHECK(lomo_update(1.0f, 2.0f, h, true) == Approx(1.0 * (1 - 0.005) - 0.1));
}

TEST_CASE("LOMO gradient: unscale, clip by value, scale by the norm coefficient", "[math][lomo]") {
    CHECK(lomo_grad(8.0f, 0.25f, 0.0f, 1.0f) == 2.0f);  // unscale only
    CHECK(lomo_grad(8.0f, 0.25f, 1.0f, 1.0f) == 1.0f);  // clipped by value
    CHECK(lomo_grad(-8.0f, 0.25f, 1.0f, 1.0f) == -1.0f);
    CHECK(lomo_grad(0.5f, 1.0f, 1.0f, 0.5f) == 0.25f);  // norm coefficient
    STATIC_REQUIRE(kLomoDefaults.lr == 1e-3f);
    STATIC_REQUIRE(kLomoDefaults.clip_value == 0.0f);
}

TEST_CASE("global-norm clip coefficient follows clip_grad_norm_", "[math][grad_clip]") {
    CHECK(clip_coefficient(0.5f, 1.0f) == 1.0f);
    CHECK(clip_coefficient(4.0f, 1.0f) == Approx(1.0 / (4.0 + 1e-6)));
    CHECK(clip_coefficient(4.0f, 0.0f) == 1.0f);  // disabled
    CHECK(global_norm(25.0f) == 5.0f);
}
