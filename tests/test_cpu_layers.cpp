// CPU embedding, RMSNorm, RoPE and SwiGLU: forward against naive double
// references, backward against central differences of those references.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/math/half.h"
#include "tests/backend_test_util.h"

using namespace tune::kernels;
using tune::testing::numeric_grad;
using tune::testing::random_floats;
using tune::testing::rel_error;
using tune::testing::widen;

namespace {

double dot(const std::vector<double>& a, const std::vector<float>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// ---- references -----------------------------------------------------------

std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& w, std::int64_t n,
                                std::int64_t c, double eps) {
    std::vector<double> y(x.size());
    for (std::int64_t r = 0; r < n; ++r) {
        double ss = 0;
        for (std::int64_t j = 0; j < c; ++j) ss += x[r * c + j] * x[r * c + j];
        const double s = 1.0 / std::sqrt(ss / static_cast<double>(c) + eps);
        for (std::int64_t j = 0; j < c; ++j) y[r * c + j] = w[j] * x[r * c + j] * s;
    }
    return y;
}

struct RopeShape {
    std::int64_t b, s, h, d, stride;
};

// Hugging Face rotate-half: y = x cos + rotate_half(x) sin, angle s * theta^(-2i/d).
std::vector<double> rope_ref(const std::vector<double>& x, const RopeShape& r, double theta) {
    std::vector<double> y = x;
    const std::int64_t half = r.d / 2;
    for (std::int64_t t = 0; t < r.b * r.s; ++t)
        for (std::int64_t h = 0; h < r.h; ++h)
            for (std::int64_t i = 0; i < half; ++i) {
                const double angle = static_cast<double>(t % r.s) * std::pow(theta, -2.0 * i / r.d);
                const std::int64_t at = t * r.stride + h * r.d + i;
                y[at] = x[at] * std::cos(angle) - x[at + half] * std::sin(angle);
                y[at + half] = x[at + half] * std::cos(angle) + x[at] * std::sin(angle);
            }
    return y;
}

double silu(double a) { return a / (1.0 + std::exp(-a)); }

}  // namespace

TEST_CASE("cpu embedding: lookup and scatter-add with repeated tokens", "[cpu][embedding]") {
    CpuBackend backend;
    const std::int64_t V = 7, C = 5, N = 6;
    const std::vector<std::int32_t> tokens{3, 0, 3, 6, 3, 1};
    const auto table = random_floats(V * C, 1);
    std::vector<float> out(N * C);
    backend.embedding_forward(out.data(), tokens.data(), table.data(), N, C, V, DType::f32, {});
    for (std::int64_t i = 0; i < N; ++i)
        for (std::int64_t j = 0; j < C; ++j) REQUIRE(out[i * C + j] == table[tokens[i] * C + j]);

    const auto dout = random_floats(N * C, 2);
    auto dtable = random_floats(V * C, 3);
    std::vector<double> ref = widen(dtable);
    for (std::int64_t i = 0; i < N; ++i)
        for (std::int64_t j = 0; j < C; ++j) ref[tokens[i] * C + j] += dout[i * C + j];
    CHECK_THROWS_AS(backend.embedding_backward(dtable.data(), tokens.data(), dout.data(), N, C, V, DType::f32, {}, {}),
                    tune::BackendError);  // the token lists need their workspace
    std::vector<unsigned char> ws(backend.embedding_backward_workspace_bytes(N, C, V, DType::f32));
    backend.embedding_backward(dtable.data(), tokens.data(), dout.data(), N, C, V, DType::f32,
                               Workspace{ws.data(), ws.size()}, {});
    CHECK(rel_error(dtable, ref) < 1e-6);

    const std::vector<std::int32_t> bad{0, 7};
    CHECK_THROWS_AS(backend.embedding_forward(out.data(), bad.data(), table.data(), 2, C, V, DType::f32, {}),
                    tune::BackendError);
}

TEST_CASE("cpu embedding backward: a token's rows are summed in fp32 and rounded into bf16 once", "[cpu][embedding]") {
    // 200 tokens over a vocabulary of 7: about 28 repeats each. Rounding into
    // the bf16 table after every repeat drifts by many ulps; one rounding is
    // within half an ulp of the exact sum.
    CpuBackend backend;
    const std::int64_t V = 7, C = 33, N = 200;
    std::vector<std::int32_t> tokens(N);
    for (std::int64_t i = 0; i < N; ++i) tokens[i] = static_cast<std::int32_t>((i * 5 + i / 3) % V);
    const auto dout32 = random_floats(N * C, 4), table32 = random_floats(V * C, 5);
    std::vector<tune::math::bf16> dout(N * C), dtable(V * C);
    for (std::size_t i = 0; i < dout.size(); ++i) dout[i] = tune::math::to_bf16(dout32[i]);
    for (std::size_t i = 0; i < dtable.size(); ++i) dtable[i] = tune::math::to_bf16(table32[i]);
    std::vector<double> exact(V * C);
    for (std::size_t i = 0; i < exact.size(); ++i) exact[i] = tune::math::to_float(dtable[i]);
    for (std::int64_t i = 0; i < N; ++i)
        for (std::int64_t j = 0; j < C; ++j) exact[tokens[i] * C + j] += tune::math::to_float(dout[i * C + j]);
    std::vector<unsigned char> ws(backend.embedding_backward_workspace_bytes(N, C, V, DType::bf16));
    backend.embedding_backward(dtable.data(), tokens.data(), dout.data(), N, C, V, DType::bf16,
                               Workspace{ws.data(), ws.size()}, {});
    for (std::size_t i = 0; i < exact.size(); ++i) {
        const double ulp = std::ldexp(1.0, std::ilogb(exact[i]) - 7);  // bf16 keeps 8 significant bits
        INFO("element " << i << ": exact " << exact[i] << ", got " << tune::math::to_float(dtable[i]));
        // The fp32 sum itself is off by far less than 0.001 ulp.
        CHECK(std::abs(tune::math::to_float(dtable[i]) - exact[i]) <= 0.501 * ulp);
    }
}

TEST_CASE("cpu rmsnorm: forward and backward against double references", "[cpu][rmsnorm]") {
    CpuBackend backend;
    const std::int64_t N = 4, C = 70;  // C spans two column blocks of the weight gradient
    const float eps = 1e-5f;
    const auto x = random_floats(N * C, 1), w = random_floats(C, 2), dy = random_floats(N * C, 3);
    std::vector<float> y(N * C), rstd(N);
    backend.rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, eps, DType::f32);
    CHECK(rel_error(y, rmsnorm_ref(widen(x), widen(w), N, C, eps)) < 1e-6);

    const auto gx = numeric_grad([&](const auto& v) { return dot(rmsnorm_ref(v, widen(w), N, C, eps), dy); }, widen(x));
    const auto gw = numeric_grad([&](const auto& v) { return dot(rmsnorm_ref(widen(x), v, N, C, eps), dy); }, widen(w));
    std::vector<float> dx(N * C, 0.0f), dw(C, 0.5f);
    backend.rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), N, C, false, DType::f32);
    CHECK(rel_error(dx, gx) < 1e-5);
    std::vector<double> gw_acc = gw;
    for (auto& v : gw_acc) v += 0.5;  // the weight gradient accumulates
    CHECK(rel_error(dw, gw_acc) < 1e-5);

    // accumulate_dx adds into the residual stream's gradient.
    std::vector<float> dx_acc(N * C, 1.0f), dw2(C, 0.0f);
    backend.rmsnorm_backward(dx_acc.data(), dw2.data(), dy.data(), x.data(), w.data(), rstd.data(), N, C, true,
                             DType::f32);
    for (std::size_t i = 0; i < dx.size(); ++i) REQUIRE(dx_acc[i] == Approx(dx[i] + 1.0f).epsilon(1e-6));
}

TEST_CASE("cpu rmsnorm: bf16 storage stays close to the fp32 result", "[cpu][rmsnorm]") {
    CpuBackend backend;
    const std::int64_t N = 3, C = 64;
    const auto x = tune::testing::rounded(random_floats(N * C, 4), DType::bf16);
    const auto w = tune::testing::rounded(random_floats(C, 5), DType::bf16);
    const auto x16 = tune::testing::to_storage(x, DType::bf16), w16 = tune::testing::to_storage(w, DType::bf16);
    std::vector<std::uint16_t> y16(N * C);
    std::vector<float> rstd(N);
    backend.rmsnorm_forward(y16.data(), rstd.data(), x16.data(), w16.data(), N, C, 1e-5f, DType::bf16);
    const auto y = tune::testing::from_storage(y16, DType::bf16);
    CHECK(rel_error(y, rmsnorm_ref(widen(x), widen(w), N, C, 1e-5)) < 8e-3);
}

TEST_CASE("cpu rope: rotate-half forward, transpose backward, strided and in place", "[cpu][rope]") {
    CpuBackend backend;
    const RopeShape r{2, 6, 3, 8, 3 * 8 + 5};  // rows padded as in a fused QKV buffer
    const float theta = 10000.0f;
    const auto x = random_floats(r.b * r.s * r.stride, 1), dy = random_floats(r.b * r.s * r.stride, 2);
    std::vector<float> y = x;  // padding columns must survive
    backend.rope_forward(y.data(), r.stride, x.data(), r.stride, r.b, r.s, r.h, r.d, tune::math::RopeFrequencies{theta},
                         DType::f32);
    CHECK(rel_error(y, rope_ref(widen(x), r, theta)) < 1e-5);

    std::vector<float> inplace = x;
    backend.rope_forward(inplace.data(), r.stride, inplace.data(), r.stride, r.b, r.s, r.h, r.d,
                         tune::math::RopeFrequencies{theta}, DType::f32);
    CHECK(inplace == y);

    // Only the rotated columns carry gradient; zero dy on padding so the reference agrees.
    auto dyr = dy;
    for (std::int64_t t = 0; t < r.b * r.s; ++t)
        for (std::int64_t j = r.h * r.d; j < r.stride; ++j) dyr[t * r.stride + j] = 0.0f;
    const auto gx = numeric_grad([&](const auto& v) { return dot(rope_ref(v, r, theta), dyr); }, widen(x));
    std::vector<float> dx(x.size(), 0.0f);
    backend.rope_backward(dx.data(), r.stride, dyr.data(), r.stride, r.b, r.s, r.h, r.d,
                          tune::math::RopeFrequencies{theta}, DType::f32);
    std::vector<double> gx_rot = gx;
    for (std::int64_t t = 0; t < r.b * r.s; ++t)
        for (std::int64_t j = r.h * r.d; j < r.stride; ++j) gx_rot[t * r.stride + j] = 0.0;
    CHECK(rel_error(dx, gx_rot) < 1e-5);
}

TEST_CASE("cpu swiglu: forward and backward, halves of a fused gate|up buffer", "[cpu][swiglu]") {
    CpuBackend backend;
    const std::int64_t N = 5, F = 6, stride = 2 * F;
    const auto gu = random_floats(N * stride, 1, 2.0f), dy = random_floats(N * F, 2);
    auto ref = [&](const std::vector<double>& v) {
        std::vector<double> y(N * F);
        for (std::int64_t r = 0; r < N; ++r)
            for (std::int64_t j = 0; j < F; ++j) y[r * F + j] = silu(v[r * stride + j]) * v[r * stride + F + j];
        return y;
    };
    std::vector<float> y(N * F);
    backend.swiglu_forward(y.data(), gu.data(), gu.data() + F, N, F, stride, DType::f32);
    CHECK(rel_error(y, ref(widen(gu))) < 1e-6);

    const auto g = numeric_grad([&](const auto& v) { return dot(ref(v), dy); }, widen(gu));
    std::vector<float> dgu(N * stride);
    backend.swiglu_backward(dgu.data(), dgu.data() + F, dy.data(), gu.data(), gu.data() + F, N, F, stride, DType::f32);
    CHECK(rel_error(dgu, g) < 1e-5);
}

TEST_CASE("cpu swiglu: dup may overwrite dout in place", "[cpu][swiglu]") {
    CpuBackend backend;
    const std::int64_t N = 3, F = 4;
    const auto g = random_floats(N * F, 1), u = random_floats(N * F, 2), dy = random_floats(N * F, 3);
    std::vector<float> dg(N * F), du(N * F), dg2(N * F), inplace = dy;
    backend.swiglu_backward(dg.data(), du.data(), dy.data(), g.data(), u.data(), N, F, F, DType::f32);
    backend.swiglu_backward(dg2.data(), inplace.data(), inplace.data(), g.data(), u.data(), N, F, F, DType::f32);
    CHECK(dg2 == dg);
    CHECK(inplace == du);
}

TEST_CASE("cpu embedding over a vocabulary shard: other shards' tokens give zero rows and no gradient",
          "[cpu][embedding]") {
    // Megatron's vocabulary-parallel embedding: the shards' rows summed over the shards are the whole table's.
    CpuBackend backend;
    const std::int64_t V = 10, C = 5, N = 7;
    const std::vector<std::int32_t> tokens{9, 0, 4, 5, 4, 2, 7};
    const auto table = random_floats(V * C, 1), dout = random_floats(N * C, 2);
    std::vector<float> whole(N * C), summed(N * C, 0.0f), dwhole(V * C, 0.0f);
    backend.embedding_forward(whole.data(), tokens.data(), table.data(), N, C, V, DType::f32, {});
    std::vector<unsigned char> ws(backend.embedding_backward_workspace_bytes(N, C, V, DType::f32));
    backend.embedding_backward(dwhole.data(), tokens.data(), dout.data(), N, C, V, DType::f32,
                               Workspace{ws.data(), ws.size()}, {});
    for (const auto& [begin, rows] : {std::pair<std::int64_t, std::int64_t>{0, 4}, {4, 4}, {8, 2}}) {
        std::vector<float> part(N * C, 7.0f), dpart(rows * C, 0.0f);
        backend.embedding_forward(part.data(), tokens.data(), table.data() + begin * C, N, C, rows, DType::f32,
                                  {begin, V});
        for (std::int64_t i = 0; i < N * C; ++i) summed[i] += part[i];
        backend.embedding_backward(dpart.data(), tokens.data(), dout.data(), N, C, rows, DType::f32,
                                   Workspace{ws.data(), ws.size()}, {begin, V});
        for (std::int64_t i = 0; i < rows * C; ++i) CHECK(dpart[i] == dwhole[begin * C + i]);
    }
    CHECK(summed == whole);
    const std::vector<std::int32_t> bad{0, 10};
    std::vector<float> out(2 * C);
    CHECK_THROWS_AS(backend.embedding_forward(out.data(), bad.data(), table.data(), 2, C, 4, DType::f32, {0, V}),
                    tune::BackendError);
}
