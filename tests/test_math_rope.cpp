// RoPE against transformers' rotate-half formulation (written independently
// here in double: q*cos + rotate_half(q)*sin with cos, sin = cat(f, f)).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/math/rope.h"

using namespace tune::math;

namespace {

std::vector<double> hf_rope(const std::vector<double>& q, int pos, double theta) {
    const auto d = static_cast<int>(q.size()), half = d / 2;
    std::vector<double> cos_full(q.size()), sin_full(q.size()), rotated(q.size()), out(q.size());
    for (int j = 0; j < d; ++j) {
        const double inv_freq = 1.0 / std::pow(theta, static_cast<double>(2 * (j % half)) / d);
        cos_full[static_cast<std::size_t>(j)] = std::cos(pos * inv_freq);
        sin_full[static_cast<std::size_t>(j)] = std::sin(pos * inv_freq);
        rotated[static_cast<std::size_t>(j)] =
            j < half ? -q[static_cast<std::size_t>(j + half)] : q[static_cast<std::size_t>(j - half)];
    }
    for (std::size_t j = 0; j < q.size(); ++j) out[j] = q[j] * cos_full[j] + rotated[j] * sin_full[j];
    return out;
}

}  // namespace

TEST_CASE("RoPE inverse frequencies and angles", "[math][rope]") {
    CHECK(rope_inv_freq(0, 8, RopeFrequencies{10000.0f}) == 1.0f);
    CHECK(rope_inv_freq(1, 8, RopeFrequencies{10000.0f}) == Approx(0.1f));
    CHECK(rope_inv_freq(3, 8, RopeFrequencies{10000.0f}) == Approx(0.001f));
    CHECK(rope_inv_freq(1, 128, RopeFrequencies{10000.0f}) == Approx(0.86596432336));
    CHECK(rope_inv_freq(63, 128, RopeFrequencies{500000.0f}) == Approx(1.0 / std::pow(500000.0, 126.0 / 128)));
    CHECK(rope_angle(5, 1, 8, RopeFrequencies{10000.0f}) == Approx(0.5f));
    float c = 0, s = 0;
    rope_cos_sin(5, 1, 8, RopeFrequencies{10000.0f}, c, s);
    CHECK(c == Approx(0.8775825619));
    CHECK(s == Approx(0.4794255386));
}

TEST_CASE("RoPE matches transformers' rotate_half form", "[math][rope]") {
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int pos : {0, 1, 7, 100, 2047}) {
        std::vector<float> x(64);
        for (float& v : x) v = normal(rng);
        const std::vector<double> want = hf_rope({x.begin(), x.end()}, pos, 10000.0);
        rope_apply(x.data(), 64, pos, RopeFrequencies{10000.0f}, false);
        for (std::size_t j = 0; j < x.size(); ++j) {
            INFO("pos " << pos << " j " << j);
            // fp32 angles of positions up to 2047 carry ~1e-4 absolute error.
            REQUIRE(x[j] == Approx(want[j]).margin(pos > 100 ? 1e-3 : 1e-5));
        }
    }
}

TEST_CASE("RoPE backward is the adjoint (inverse rotation) of the forward", "[math][rope]") {
    std::mt19937 rng(10);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(32), y(32);
    for (float& v : x) v = normal(rng);
    for (float& v : y) v = normal(rng);
    std::vector<float> rx = x, ry = y;
    rope_apply(rx.data(), 32, 13, RopeFrequencies{10000.0f}, false);
    rope_apply(ry.data(), 32, 13, RopeFrequencies{10000.0f}, true);
    double lhs = 0, rhs = 0;
    for (std::size_t j = 0; j < x.size(); ++j) {
        lhs += double{rx[j]} * y[j];
        rhs += double{x[j]} * ry[j];
    }
    CHECK(lhs == Approx(rhs).epsilon(1e-5));
    rope_apply(rx.data(), 32, 13, RopeFrequencies{10000.0f}, true);  // back where it started
    for (std::size_t j = 0; j < x.size(); ++j) REQUIRE(rx[j] == Approx(x[j]).margin(1e-6));
}

TEST_CASE("llama3 rope_scaling keeps short wavelengths, divides long ones and blends between", "[math][rope]") {
    // Llama 3.1 8B: theta 5e5, head_dim 128, factor 8, low 1, high 4, original context 8192
    // (transformers' _compute_llama3_parameters, written here in double).
    const RopeFrequencies f{500000.0f, RopeScalingKind::llama3, 8.0f, 1.0f, 4.0f, 8192.0f};
    const double pi = 3.141592653589793;
    int kept = 0, divided = 0, blended = 0;
    for (int i = 0; i < 64; ++i) {
        const double inv = 1.0 / std::pow(500000.0, 2.0 * i / 128), wavelen = 2 * pi / inv;
        double want = inv;
        if (wavelen > 8192)
            want = inv / 8, ++divided;
        else if (wavelen < 2048)
            ++kept;
        else {
            const double smooth = (8192 / wavelen - 1) / 3;
            want = (1 - smooth) * inv / 8 + smooth * inv, ++blended;
        }
        INFO("pair " << i);
        CHECK(rope_inv_freq(i, 128, f) == Approx(want).epsilon(1e-5));
    }
    CHECK(kept > 0);
    CHECK(divided > 0);
    CHECK(blended > 0);
    const RopeFrequencies linear{10000.0f, RopeScalingKind::linear, 2.0f};
    CHECK(rope_inv_freq(1, 8, linear) == Approx(0.05f));
}
