// CPU element-wise ops: casts round-trip, unscale detects inf/nan, partial
// square norms accumulate and do not depend on the thread count, NEFTune
// noise is bounded, seeded and thread-independent, residual add and scale.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/math/half.h"
#include "tests/backend_test_util.h"

using namespace tune::kernels;
using tune::testing::random_floats;

TEST_CASE("cpu cast: f32 -> 16-bit -> f32 rounds once, 16-bit -> f32 -> 16-bit is exact", "[cpu][cast]") {
    CpuBackend backend;
    auto x = random_floats(1000, 1, 100.0f);
    x.push_back(1e6f);  // beyond fp16's range: Inf
    const auto n = static_cast<std::int64_t>(x.size());
    for (DType t : {DType::bf16, DType::f16}) {
        INFO(dtype_name(t));
        std::vector<std::uint16_t> h(x.size()), h2(x.size());
        std::vector<float> back(x.size());
        backend.cast(h.data(), t, x.data(), DType::f32, n);
        CHECK(h == tune::testing::to_storage(x, t));
        backend.cast(back.data(), DType::f32, h.data(), t, n);
        CHECK(back == tune::testing::rounded(x, t));
        backend.cast(h2.data(), t, back.data(), DType::f32, n);
        CHECK(h2 == h);
    }
    CHECK(std::isinf(tune::testing::rounded({1e6f}, DType::f16)[0]));
    // bf16 -> f16 goes through fp32 exactly.
    std::vector<std::uint16_t> b = tune::testing::to_storage({1.5f, -2.25f}, DType::bf16), f(2);
    backend.cast(f.data(), DType::f16, b.data(), DType::bf16, 2);
    CHECK(tune::testing::from_storage(f, DType::f16) == std::vector<float>{1.5f, -2.25f});
}

TEST_CASE("cpu unscale: scales, and flags inf or nan without clearing the flag", "[cpu][unscale]") {
    CpuBackend backend;
    std::vector<float> g{1.0f, -2.0f, 4.0f};
    float found = 0.0f;
    backend.unscale(g.data(), 3, 0.5f, &found, DType::f32);
    CHECK(g == std::vector<float>{0.5f, -1.0f, 2.0f});
    CHECK(found == 0.0f);

    g[1] = std::numeric_limits<float>::infinity();
    backend.unscale(g.data(), 3, 1.0f, &found, DType::f32);
    CHECK(found == 1.0f);
    CHECK(g[0] == 0.5f);  // s == 1 only checks

    std::vector<std::uint16_t> h = tune::testing::to_storage({1.0f, std::nanf(""), 2.0f}, DType::bf16);
    float found16 = 0.0f;
    backend.unscale(h.data(), 3, 0.25f, &found16, DType::bf16);
    CHECK(found16 == 1.0f);
    backend.unscale(h.data(), 1, 0.25f, &found, DType::bf16);  // finite part leaves an earlier flag alone
    CHECK(found == 1.0f);

    std::vector<std::uint16_t> f16 = tune::testing::to_storage({65504.0f, 1.0f}, DType::f16);
    float ok = 0.0f;
    backend.unscale(f16.data(), 2, 1.0f / 65536.0f, &ok, DType::f16);
    CHECK(ok == 0.0f);
}

TEST_CASE("cpu sum_squares: accumulates, in double, independent of threads", "[cpu][norm]") {
    const auto x = random_floats(100003, 2);
    double ref = 0;
    for (float v : x) ref += static_cast<double>(v) * v;
    float one = 2.0f, many = 2.0f;
    CpuBackend(CpuBackendOptions{.threads = 1})
        .sum_squares(&one, x.data(), static_cast<std::int64_t>(x.size()), DType::f32);
    CpuBackend(CpuBackendOptions{.threads = 3})
        .sum_squares(&many, x.data(), static_cast<std::int64_t>(x.size()), DType::f32);
    CHECK(one == many);
    CHECK(one == Approx(ref + 2.0).epsilon(1e-6));
    const auto h = tune::testing::to_storage(x, DType::bf16);
    float half = 0.0f;
    CpuBackend().sum_squares(&half, h.data(), static_cast<std::int64_t>(h.size()), DType::bf16);
    CHECK(half == Approx(ref).epsilon(1e-2));
}

TEST_CASE("cpu neftune: bounded, zero-mean, seeded and thread-independent noise", "[cpu][neftune]") {
    const std::int64_t n = 20000;
    const float scale = 0.1f;
    std::vector<float> a(n, 1.0f), b(n, 1.0f), c(n, 1.0f);
    CpuBackend(CpuBackendOptions{.threads = 1}).neftune_noise(a.data(), n, scale, 42, DType::f32);
    CpuBackend(CpuBackendOptions{.threads = 2}).neftune_noise(b.data(), n, scale, 42, DType::f32);
    CpuBackend().neftune_noise(c.data(), n, scale, 43, DType::f32);
    CHECK(a == b);
    CHECK(a != c);
    double mean = 0, sq = 0;
    for (float v : a) {
        REQUIRE(std::abs(v - 1.0f) <= scale * 1.0001f);
        mean += (v - 1.0) / n;
        sq += (v - 1.0) * (v - 1.0) / n;
    }
    CHECK(std::abs(mean) < 0.02 * scale);
    CHECK(std::sqrt(sq) == Approx(scale / std::sqrt(3.0)).epsilon(0.03));  // uniform's standard deviation
}

TEST_CASE("cpu add and scale, in place", "[cpu][elementwise]") {
    CpuBackend backend;
    std::vector<float> a{1, 2, 3}, b{10, 20, 30};
    backend.add(a.data(), a.data(), b.data(), 3, DType::f32);
    CHECK(a == std::vector<float>{11, 22, 33});
    backend.scale(a.data(), 3, 0.5f, DType::f32);
    CHECK(a == std::vector<float>{5.5f, 11, 16.5f});
    auto h = tune::testing::to_storage({1.0f, 2.0f}, DType::bf16);
    const auto k = tune::testing::to_storage({0.5f, 0.25f}, DType::bf16);
    backend.add(h.data(), k.data(), h.data(), 2, DType::bf16);
    CHECK(tune::testing::from_storage(h, DType::bf16) == std::vector<float>{1.5f, 2.25f});
}
