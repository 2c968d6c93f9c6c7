// Dynamic loss scaler: grows by the factor after `window` good steps, halves
// and skips on overflow, never drops below the minimum.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/math/loss_scale.h"

using namespace tune::math;

TEST_CASE("loss scale starts at 2^16 and doubles after 1000 good steps", "[math][loss_scale]") {
    LossScaler scaler;
    CHECK(scaler.scale() == 65536.0f);
    for (int i = 0; i < 999; ++i) REQUIRE(scaler.update(false));
    CHECK(scaler.scale() == 65536.0f);
    CHECK(scaler.update(false));
    CHECK(scaler.scale() == 131072.0f);
    CHECK(scaler.good_steps() == 0);
}

TEST_CASE("overflow halves the scale, skips the step and restarts the window", "[math][loss_scale]") {
    LossScaler scaler;
    for (int i = 0; i < 500; ++i) scaler.update(false);
    CHECK_FALSE(scaler.update(true));
    CHECK(scaler.scale() == 32768.0f);
    CHECK(scaler.good_steps() == 0);
    for (int i = 0; i < 999; ++i) scaler.update(false);
    CHECK(scaler.scale() == 32768.0f);  // the 500 earlier good steps no longer count
    scaler.update(false);
    CHECK(scaler.scale() == 65536.0f);
}

TEST_CASE("loss scale floors at min_scale and stays finite", "[math][loss_scale]") {
    LossScaler scaler(LossScalerConfig{4.0f, 2.0f, 1, 1.0f});
    for (int i = 0; i < 5; ++i) scaler.update(true);
    CHECK(scaler.scale() == 1.0f);
    LossScaler growing(LossScalerConfig{1e38f, 2.0f, 1, 1.0f});
    for (int i = 0; i < 5; ++i) growing.update(false);
    CHECK(std::isfinite(growing.scale()));
}

TEST_CASE("unscale multiplies by 1/scale and flags non-finite gradients", "[math][loss_scale]") {
    LossScaler scaler;
    bool overflow = false;
    CHECK(unscale(65536.0f, scaler.inverse(), overflow) == 1.0f);
    CHECK_FALSE(overflow);
    unscale(INFINITY, scaler.inverse(), overflow);
    CHECK(overflow);
    bool nan_overflow = false;
    unscale(NAN, 1.0f, nan_overflow);
    CHECK(nan_overflow);
}
