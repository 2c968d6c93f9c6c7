// CPU optimizer updates over a tensor against double-precision references of
// their published rules: AdamW (torch), Lion, SGD (LOMO), Adafactor
// (transformers, factored and vector), 8-bit Adam against fp32 Adam; decay
// flags, gradient scale, the 16-bit weight copy and pure bf16 states.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/math/quant8.h"
#include "tests/backend_test_util.h"

using namespace tune::kernels;
using tune::testing::random_floats;
using tune::testing::rel_error;
using tune::testing::widen;

namespace {

constexpr float kGradScale = 0.5f;

// Gradients for `steps` steps, as stored, and as the optimizer sees them (scaled).
std::vector<std::vector<float>> grads(std::size_t n, int steps) {
    std::vector<std::vector<float>> g;
    for (int s = 0; s < steps; ++s) g.push_back(random_floats(n, 100 + s));
    return g;
}

ParamTensor tensor(std::vector<float>& p, const std::vector<float>& g, bool decay) {
    return {.n = static_cast<std::int64_t>(p.size()),
            .param = p.data(),
            .grad = g.data(),
            .grad_scale = kGradScale,
            .decay = decay};
}

void adamw_ref(std::vector<double>& p, std::vector<double>& m, std::vector<double>& v, const std::vector<float>& g,
               const AdamWParams& h, bool decay) {
    const double t = static_cast<double>(h.step);
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double gi = g[i] * static_cast<double>(kGradScale);
        if (decay) p[i] *= 1.0 - static_cast<double>(h.lr) * h.weight_decay;
        m[i] = h.beta1 * m[i] + (1 - static_cast<double>(h.beta1)) * gi;
        v[i] = h.beta2 * v[i] + (1 - static_cast<double>(h.beta2)) * gi * gi;
        const double mhat = m[i] / (1 - std::pow(static_cast<double>(h.beta1), t));
        const double vhat = v[i] / (1 - std::pow(static_cast<double>(h.beta2), t));
        p[i] -= h.lr * mhat / (std::sqrt(vhat) + h.eps);
    }
}

// transformers Adafactor, beta1 = None, in double; rows == 1 is a vector.
void adafactor_ref(std::vector<double>& p, std::vector<double>& row, std::vector<double>& col,
                   const std::vector<float>& g32, std::int64_t rows, std::int64_t cols, const AdafactorParams& h,
                   bool decay) {
    const std::size_t n = p.size();
    const double t = static_cast<double>(h.step);
    double p2 = 0;
    for (double x : p) p2 += x * x;
    const double lr = std::max(static_cast<double>(h.eps2), std::sqrt(p2 / n)) * std::min(1e-2, 1 / std::sqrt(t));
    const double b2 = 1 - std::pow(t, static_cast<double>(h.decay_rate));
    std::vector<double> g(n), u(n);
    for (std::size_t i = 0; i < n; ++i) g[i] = g32[i] * static_cast<double>(kGradScale);
    if (rows > 1) {
        for (std::int64_t r = 0; r < rows; ++r) {
            double s = 0;
            for (std::int64_t c = 0; c < cols; ++c) s += g[r * cols + c] * g[r * cols + c] + h.eps1;
            row[r] = b2 * row[r] + (1 - b2) * s / cols;
        }
        for (std::int64_t c = 0; c < cols; ++c) {
            double s = 0;
            for (std::int64_t r = 0; r < rows; ++r) s += g[r * cols + c] * g[r * cols + c] + h.eps1;
            col[c] = b2 * col[c] + (1 - b2) * s / rows;
        }
        double mean = 0;
        for (double x : row) mean += x / rows;
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < cols; ++c)
                u[r * cols + c] = g[r * cols + c] / std::sqrt(row[r] / mean) / std::sqrt(col[c]);
    } else {
        for (std::size_t i = 0; i < n; ++i) {
            row[i] = b2 * row[i] + (1 - b2) * (g[i] * g[i] + h.eps1);
            u[i] = g[i] / std::sqrt(row[i]);
        }
    }
    double u2 = 0;
    for (double x : u) u2 += x * x;
    const double div = std::max(1.0, std::sqrt(u2 / n) / h.clip_threshold);
    for (std::size_t i = 0; i < n; ++i) {
        if (decay) p[i] -= h.weight_decay * lr * p[i];
        p[i] -= lr * u[i] / div;
    }
}

}  // namespace

TEST_CASE("cpu adamw: three steps match torch's rule, decay only where flagged", "[cpu][optim]") {
    CpuBackend backend;
    const std::size_t n = 300;
    const auto g = grads(n, 3);
    for (bool decay : {true, false}) {
        INFO("decay " << decay);
        auto p = random_floats(n, 1);
        std::vector<float> m(n, 0.0f), v(n, 0.0f);
        std::vector<std::uint16_t> copy(n);
        auto pr = widen(p);
        std::vector<double> mr(n, 0.0), vr(n, 0.0);
        for (int s = 1; s <= 3; ++s) {
            const AdamWParams h{.lr = 1e-2f, .weight_decay = 0.1f, .step = s};
            ParamTensor t = tensor(p, g[s - 1], decay);
            t.param_copy = copy.data();
            backend.adamw_update(t, m.data(), v.data(), DType::f32, h);
            adamw_ref(pr, mr, vr, g[s - 1], h, decay);
        }
        CHECK(rel_error(p, pr) < 1e-6);
        CHECK(rel_error(m, mr) < 1e-6);
        CHECK(rel_error(v, vr) < 1e-5);
        CHECK(copy == tune::testing::to_storage(p, DType::bf16));  // the mixed-precision weights
    }
}

TEST_CASE("cpu adamw: pure bf16 weights and states follow fp32", "[cpu][optim]") {
    CpuBackend backend;
    const std::size_t n = 256;
    const auto g = grads(n, 3);
    const auto p0 = tune::testing::rounded(random_floats(n, 2, 0.05f), DType::bf16);  // small: fine bf16 grid
    auto p16 = tune::testing::to_storage(p0, DType::bf16);
    std::vector<std::uint16_t> m(n, 0), v(n, 0);
    auto pr = widen(p0);
    std::vector<double> mr(n, 0.0), vr(n, 0.0);
    for (int s = 1; s <= 3; ++s) {
        const AdamWParams h{.lr = 1e-2f, .step = s};
        const auto g16 = tune::testing::to_storage(g[s - 1], DType::bf16);
        const ParamTensor t{.n = static_cast<std::int64_t>(n),
                            .param = p16.data(),
                            .param_dtype = DType::bf16,
                            .grad = g16.data(),
                            .grad_dtype = DType::bf16,
                            .grad_scale = kGradScale};
        backend.adamw_update(t, m.data(), v.data(), DType::bf16, h);
        adamw_ref(pr, mr, vr, tune::testing::rounded(g[s - 1], DType::bf16), h, true);
    }
    // Each step moves p by about lr, large against the bf16 spacing of |p| ~ 0.05.
    std::vector<double> moved(n), moved_ref(n);
    const auto p = tune::testing::from_storage(p16, DType::bf16);
    for (std::size_t i = 0; i < n; ++i) moved[i] = p[i] - p0[i], moved_ref[i] = pr[i] - p0[i];
    CHECK(rel_error(moved, moved_ref) < 0.05);
    CHECK(rel_error(tune::testing::from_storage(m, DType::bf16), mr) < 1e-2);
}

TEST_CASE("cpu lion and sgd: the published rules", "[cpu][optim]") {
    CpuBackend backend;
    const std::size_t n = 200;
    const auto g = grads(n, 3);
    auto p = random_floats(n, 3);
    std::vector<float> m(n, 0.0f);
    auto pr = widen(p);
    std::vector<double> mr(n, 0.0);
    const LionParams h{.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.99f, .weight_decay = 0.5f};
    for (int s = 0; s < 3; ++s) {
        backend.lion_update(tensor(p, g[s], true), m.data(), DType::f32, h);
        for (std::size_t i = 0; i < n; ++i) {
            const double gi = g[s][i] * 0.5;
            pr[i] *= 1 - 1e-3 * 0.5;
            const double c = 0.9 * mr[i] + 0.1 * gi;
            pr[i] -= 1e-3 * (c > 0 ? 1 : (c < 0 ? -1 : 0));
            mr[i] = 0.99 * mr[i] + 0.01 * gi;
        }
    }
    CHECK(rel_error(p, pr) < 1e-6);
    CHECK(rel_error(m, mr) < 1e-5);

    auto q = random_floats(n, 4);
    auto qr = widen(q);
    backend.sgd_update(tensor(q, g[0], false), SgdParams{.lr = 0.1f, .weight_decay = 0.3f});
    for (std::size_t i = 0; i < n; ++i) qr[i] -= 0.1 * g[0][i] * 0.5;  // no decay: a norm weight
    CHECK(rel_error(q, qr) < 1e-6);
}

TEST_CASE("cpu adafactor: factored matrix and vector match transformers' step", "[cpu][optim]") {
    CpuBackend backend;
    const AdafactorParams base{.weight_decay = 0.1f};
    SECTION("matrix: row and column statistics") {
        const std::int64_t rows = 5, cols = 70;  // columns span two blocks
        const auto g = grads(rows * cols, 3);
        auto p = random_floats(rows * cols, 5);
        std::vector<float> row(rows, 0.0f), col(cols, 0.0f);
        auto pr = widen(p);
        std::vector<double> rr(rows, 0.0), cr(cols, 0.0);
        for (int s = 1; s <= 3; ++s) {
            AdafactorParams h = base;
            h.step = s;
            backend.adafactor_update(tensor(p, g[s - 1], true), rows, cols, row.data(), col.data(), DType::f32, h);
            adafactor_ref(pr, rr, cr, g[s - 1], rows, cols, h, true);
        }
        CHECK(rel_error(p, pr) < 1e-5);
        CHECK(rel_error(row, rr) < 1e-5);
        CHECK(rel_error(col, cr) < 1e-5);
    }
    SECTION("vector: full second moment, no decay") {
        const std::int64_t n = 40;
        const auto g = grads(n, 2);
        auto p = random_floats(n, 6);
        std::vector<float> v(n, 0.0f);
        auto pr = widen(p);
        std::vector<double> vr(n, 0.0), unused;
        for (int s = 1; s <= 2; ++s) {
            AdafactorParams h = base;
            h.step = s;
            backend.adafactor_update(tensor(p, g[s - 1], false), 1, n, v.data(), nullptr, DType::f32, h);
            adafactor_ref(pr, vr, unused, g[s - 1], 1, n, h, false);
        }
        CHECK(rel_error(p, pr) < 1e-5);
        CHECK(rel_error(v, vr) < 1e-5);
    }
}

TEST_CASE("cpu adam8bit: blockwise states track fp32 Adam, thread-independent", "[cpu][optim]") {
    const std::int64_t n = 3 * 256 + 100;  // a short last block
    const auto g = grads(static_cast<std::size_t>(n), 5);
    const auto p0 = random_floats(static_cast<std::size_t>(n), 7);
    auto run = [&](int threads, std::vector<std::uint8_t>& mq, std::vector<float>& am) {
        CpuBackend backend(CpuBackendOptions{.threads = threads});
        auto p = p0;
        mq.assign(n, 127);  // code 127 is 0 in the signed map
        std::vector<std::uint8_t> vq(n, 0);
        am.assign(4, 0.0f);
        std::vector<float> av(4, 0.0f);
        for (int s = 1; s <= 5; ++s)
            backend.adam8bit_update(tensor(p, g[s - 1], true), mq.data(), vq.data(), am.data(), av.data(),
                                    Adam8bitParams{.adam = {.lr = 1e-2f, .step = s}, .block_size = 256});
        return p;
    };
    std::vector<std::uint8_t> mq1, mq2;
    std::vector<float> am1, am2;
    const auto p1 = run(1, mq1, am1), p2 = run(2, mq2, am2);
    CHECK(p1 == p2);
    CHECK(mq1 == mq2);

    auto pr = widen(p0);
    std::vector<double> mr(n, 0.0), vr(n, 0.0);
    for (int s = 1; s <= 5; ++s) adamw_ref(pr, mr, vr, g[s - 1], AdamWParams{.lr = 1e-2f, .step = s}, true);
    std::vector<double> moved(n), moved_ref(n);
    for (std::int64_t i = 0; i < n; ++i) moved[i] = p1[i] - p0[i], moved_ref[i] = pr[i] - p0[i];
    CHECK(rel_error(moved, moved_ref) < 0.1);

    // Dequantized first moment: code value times the block's absmax.
    float code[256];
    tune::math::create_dynamic_map(true, code);
    std::vector<double> m(n);
    for (std::int64_t i = 0; i < n; ++i) m[i] = code[mq1[i]] * am1[i / 256];
    double err = 0, mag = 0;
    for (std::int64_t i = 0; i < n; ++i)
        err = std::max(err, std::abs(m[i] - mr[i])), mag = std::max(mag, std::abs(mr[i]));
    CHECK(err / mag < 0.05);
}

TEST_CASE("cpu adamw, lion, sgd: a run of tensors in one call equals a call per tensor", "[cpu][optim]") {
    CpuBackend backend;
    const std::size_t n = 3000;
    const auto g = grads(n, 2);
    // Three matrices and two norm-like vectors, as a flat buffer lays out a layer.
    const std::vector<ElementRange> undecayed{{0, 100}, {1500, 1600}};
    const std::vector<ElementRange> tensors{{0, 100}, {100, 1500}, {1500, 1600}, {1600, 2999}, {2999, 3000}};
    const auto tensor_at = [&](std::vector<float>& p, std::size_t s, const ElementRange& r) {
        ParamTensor t = tensor(p, g[s], r.begin != 0 && r.begin != 1500);
        t.n = r.end - r.begin, t.param = p.data() + r.begin, t.grad = g[s].data() + r.begin;
        return t;
    };
    for (int op = 0; op < 3; ++op) {
        INFO("op " << op);
        auto whole = random_floats(n, 7), apart = whole;
        std::vector<float> m1(n, 0.01f), v1(n, 1e-4f), m2 = m1, v2 = v1;
        for (std::size_t s = 0; s < g.size(); ++s) {
            const AdamWParams adam{.lr = 1e-2f, .weight_decay = 0.1f, .step = static_cast<std::int64_t>(s + 1)};
            const LionParams lion{.lr = 1e-3f, .weight_decay = 0.1f};
            const SgdParams sgd{.lr = 1e-2f, .weight_decay = 0.1f};
            ParamTensor run = tensor(whole, g[s], true);
            run.undecayed = undecayed.data(), run.undecayed_count = 2;
            if (op == 0) backend.adamw_update(run, m1.data(), v1.data(), DType::f32, adam);
            if (op == 1) backend.lion_update(run, m1.data(), DType::f32, lion);
            if (op == 2) backend.sgd_update(run, sgd);
            for (const ElementRange& r : tensors) {
                const ParamTensor t = tensor_at(apart, s, r);
                if (op == 0) backend.adamw_update(t, m2.data() + r.begin, v2.data() + r.begin, DType::f32, adam);
                if (op == 1) backend.lion_update(t, m2.data() + r.begin, DType::f32, lion);
                if (op == 2) backend.sgd_update(t, sgd);
            }
        }
        CHECK(whole == apart);  // the same rule per element: bit for bit
        CHECK(m1 == m2);
        CHECK(v1 == v2);
    }
}

TEST_CASE("cpu optimizers refuse undecayed ranges out of order, and the one-tensor optimizers any", "[cpu][optim]") {
    CpuBackend backend;
    std::vector<float> p(100, 1.0f), g(100, 0.5f), m(100, 0.0f), v(100, 0.0f);
    ParamTensor t = tensor(p, g, true);
    const std::vector<ElementRange> overlapping{{10, 30}, {20, 40}}, outside{{90, 101}}, ordered{{10, 20}};
    for (const auto* bad : {&overlapping, &outside}) {
        t.undecayed = bad->data(), t.undecayed_count = static_cast<std::int64_t>(bad->size());
        CHECK_THROWS_WITH(backend.adamw_update(t, m.data(), v.data(), DType::f32, {}),
                          Catch::Contains("sorted, disjoint and inside the tensor"));
    }
    t.undecayed = ordered.data(), t.undecayed_count = 1;
    std::vector<std::uint8_t> codes(100);
    std::vector<float> absmax(1);
    CHECK_THROWS_WITH(backend.adam8bit_update(t, codes.data(), codes.data(), absmax.data(), absmax.data(), {}),
                      Catch::Contains("one tensor per call"));
    CHECK_THROWS_WITH(backend.adafactor_update(t, 10, 10, m.data(), v.data(), DType::f32, {}),
                      Catch::Contains("one tensor per call"));
}

TEST_CASE("cpu optimizers: a multiplier in the backend's memory scales the gradients as grad_scale does",
          "[cpu][optim]") {
    CpuBackend backend;
    const std::size_t n = 500;
    const auto g = grads(n, 1);
    const float multiplier = 0.75f;
    auto with = random_floats(n, 3), without = with;
    std::vector<float> m1(n, 0.0f), v1(n, 0.0f), m2 = m1, v2 = v1;
    ParamTensor a = tensor(with, g[0], true);
    a.grad_multiplier = &multiplier;
    ParamTensor b = tensor(without, g[0], true);
    b.grad_scale = kGradScale * multiplier;
    const AdamWParams h{.lr = 1e-2f, .weight_decay = 0.1f, .step = 1};
    backend.adamw_update(a, m1.data(), v1.data(), DType::f32, h);
    backend.adamw_update(b, m2.data(), v2.data(), DType::f32, h);
    CHECK(with == without);
    // The multiplier itself: the clip coefficient of sqrt(sums[0] - sums[1]) / loss_scale, over loss_scale.
    const float sums[2] = {20.0f, 4.0f};  // norm 4 at loss scale 1; 2 at loss scale 2
    float out = 0;
    backend.gradient_multiplier(&out, sums, 2, 1.0f, 2.0f);
    CHECK(out == Approx(1.0f / (2.0f + 1e-6f) / 2.0f));
    backend.gradient_multiplier(&out, sums, 1, 0.0f, 4.0f);  // no clipping: the loss scale only
    CHECK(out == 0.25f);
}

// A graph replays an update's call with the same arguments, so its step comes from memory the graph
// fills (AdamWParams::device_step): AdamW and 8-bit Adam read it in place of the host's.
TEST_CASE("cpu adamw and adam8bit: a step in the backend's memory replaces AdamWParams::step", "[cpu][optim]") {
    CpuBackend backend;
    const std::size_t n = 512;
    const auto g = grads(n, 3);
    std::int32_t count = 0;
    const AdamWParams read{.lr = 1e-2f, .weight_decay = 0.1f, .step = 1, .device_step = &count};
    auto from_memory = random_floats(n, 4), from_args = from_memory;
    std::vector<float> m1(n, 0.0f), v1(n, 0.0f), m2 = m1, v2 = v1;
    auto q_memory = from_memory, q_args = from_memory;
    std::vector<std::uint8_t> mc1(n, 0), vc1(n, 0), mc2 = mc1, vc2 = vc1;
    std::vector<float> am1(2, 0.0f), av1(2, 0.0f), am2 = am1, av2 = av1;
    for (int s = 1; s <= 3; ++s) {
        count = s;
        const AdamWParams given{.lr = 1e-2f, .weight_decay = 0.1f, .step = s};
        backend.adamw_update(tensor(from_memory, g[s - 1], true), m1.data(), v1.data(), DType::f32, read);
        backend.adamw_update(tensor(from_args, g[s - 1], true), m2.data(), v2.data(), DType::f32, given);
        backend.adam8bit_update(tensor(q_memory, g[s - 1], true), mc1.data(), vc1.data(), am1.data(), av1.data(),
                                {.adam = read, .block_size = 256});
        backend.adam8bit_update(tensor(q_args, g[s - 1], true), mc2.data(), vc2.data(), am2.data(), av2.data(),
                                {.adam = given, .block_size = 256});
    }
    CHECK(from_memory == from_args);
    CHECK(v1 == v2);
    CHECK(q_memory == q_args);
    CHECK(vc1 == vc2);
    CHECK(from_memory != q_memory);  // both moved, each by its own rule
}
