// SiLU / SwiGLU: known values and derivatives against central differences.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/math/activations.h"

using namespace tune::math;

namespace {
double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }
}  // namespace

TEST_CASE("silu known values", "[math][activations]") {
    CHECK(silu(0.0f) == 0.0f);
    CHECK(silu(1.0f) == Approx(0.7310585786300049));
    CHECK(silu(-1.0f) == Approx(-0.2689414213699951));
    CHECK(silu(2.5f) == Approx(2.3103545499));
    CHECK(silu(100.0f) == 100.0f);
    CHECK(silu(-200.0f) == 0.0f);  // expf overflows: -200 / Inf
    CHECK(std::isfinite(silu(-200.0f)));
    CHECK(sigmoid(0.0f) == 0.5f);
}

TEST_CASE("silu_grad matches central differences", "[math][activations]") {
    for (double x = -12.0; x <= 12.0; x += 0.37) {
        const double h = 1e-5;
        const double fd = (silu_ref(x + h) - silu_ref(x - h)) / (2 * h);
        REQUIRE(silu_grad(static_cast<float>(x)) == Approx(fd).margin(2e-6).epsilon(1e-5));
    }
    CHECK(silu_grad(0.0f) == 0.5f);
}

TEST_CASE("swiglu forward and backward", "[math][activations]") {
    CHECK(swiglu(1.0f, 3.0f) == Approx(3 * 0.7310585786300049));
    for (double gate = -4.0; gate <= 4.0; gate += 0.9) {
        for (double up = -2.0; up <= 2.0; up += 0.7) {
            const double dout = 0.3, h = 1e-5;
            float dgate = 0, dup = 0;
            swiglu_backward(static_cast<float>(gate), static_cast<float>(up), static_cast<float>(dout), dgate, dup);
            const double fd_gate = dout * (silu_ref(gate + h) * up - silu_ref(gate - h) * up) / (2 * h);
            const double fd_up = dout * (silu_ref(gate) * (up + h) - silu_ref(gate) * (up - h)) / (2 * h);
            REQUIRE(dgate == Approx(fd_gate).margin(1e-6).epsilon(1e-5));
            REQUIRE(dup == Approx(fd_up).margin(1e-6).epsilon(1e-5));
        }
    }
}
