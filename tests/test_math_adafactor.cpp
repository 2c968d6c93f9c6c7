// Adafactor pieces against the transformers algorithm: a step by hand, and 4
// steps of a matrix and a vector against tests/fixtures/adafactor.txt, written
// by scripts/gen_adafactor_fixture.py (a float32 torch mirror of
// transformers.optimization.Adafactor.step with its defaults).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "kernels/math/adafactor.h"

using namespace tune::math;

namespace {

std::map<std::string, std::vector<float>> read_fixture() {
    std::ifstream in(std::string(TUNE_SOURCE_DIR) + "/tests/fixtures/adafactor.txt");
    REQUIRE(in.good());
    std::map<std::string, std::vector<float>> tensors;
    std::string name;
    while (in >> name) {
        if (name == "#") {
            std::getline(in, name);
            continue;
        }
        std::size_t count = 0;
        in >> count;
        std::vector<float>& values = tensors[name];
        values.resize(count);
        for (float& v : values) in >> v;
    }
    return tensors;
}

double sum_sq(const std::vector<float>& x) {
    double s = 0;
    for (float v : x) s += double{v} * v;
    return s;
}

// The loop a backend runs for a rows x cols matrix, one step.
struct FactoredState {
    int rows, cols, step = 0;
    std::vector<float> row, col;
    FactoredState(int r, int c) : rows(r), cols(c), row(r, 0.0f), col(c, 0.0f) {}

    void update(std::vector<float>& p, const std::vector<float>& g, const AdafactorHyper& h) {
        ++step;
        const auto n = static_cast<float>(p.size());
        const float lr = adafactor_lr(rms_from_sum_sq(static_cast<float>(sum_sq(p)), n), step, h);
        const float beta2t = adafactor_beta2t(step, h);
        std::vector<double> row_sum(rows, 0.0), col_sum(cols, 0.0);
        for (int i = 0; i < rows; ++i) {
            for (int j = 0; j < cols; ++j) {
                const float u = adafactor_sq(g[static_cast<std::size_t>(i * cols + j)], h);
                row_sum[static_cast<std::size_t>(i)] += u;
                col_sum[static_cast<std::size_t>(j)] += u;
            }
        }
        double row_total = 0;
        for (int i = 0; i < rows; ++i) {
            auto& r = row[static_cast<std::size_t>(i)];
            r = adafactor_ema(r, static_cast<float>(row_sum[static_cast<std::size_t>(i)] / cols), beta2t);
            row_total += r;
        }
        for (int j = 0; j < cols; ++j) {
            auto& c = col[static_cast<std::size_t>(j)];
            c = adafactor_ema(c, static_cast<float>(col_sum[static_cast<std::size_t>(j)] / rows), beta2t);
        }
        const auto row_mean = static_cast<float>(row_total / rows);
        std::vector<float> upd(p.size());
        for (int i = 0; i < rows; ++i) {
            for (int j = 0; j < cols; ++j) {
                const auto k = static_cast<std::size_t>(i * cols + j);
                upd[k] = adafactor_factored_update(g[k], row[static_cast<std::size_t>(i)], row_mean,
                                                   col[static_cast<std::size_t>(j)]);
            }
        }
        const float divisor = adafactor_clip_divisor(static_cast<float>(sum_sq(upd)), n, h);
        for (std::size_t k = 0; k < p.size(); ++k) p[k] = adafactor_apply(p[k], upd[k], lr, divisor, h, true);
    }
};

struct VectorState {
    int step = 0;
    std::vector<float> v;
    explicit VectorState(std::size_t n) : v(n, 0.0f) {}

    void update(std::vector<float>& p, const std::vector<float>& g, const AdafactorHyper& h) {
        ++step;
        const auto n = static_cast<float>(p.size());
        const float lr = adafactor_lr(rms_from_sum_sq(static_cast<float>(sum_sq(p)), n), step, h);
        const float beta2t = adafactor_beta2t(step, h);
        std::vector<float> upd(p.size());
        for (std::size_t k = 0; k < p.size(); ++k) {
            v[k] = adafactor_ema(v[k], adafactor_sq(g[k], h), beta2t);
            upd[k] = adafactor_unfactored_update(g[k], v[k]);
        }
        const float divisor = adafactor_clip_divisor(static_cast<float>(sum_sq(upd)), n, h);
        for (std::size_t k = 0; k < p.size(); ++k) p[k] = adafactor_apply(p[k], upd[k], lr, divisor, h, false);
    }
};

void require_close(const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < got.size(); ++k) REQUIRE(got[k] == Approx(want[k]).epsilon(2e-6).margin(1e-7));
}

}  // namespace

TEST_CASE("Adafactor per-step scalars", "[math][adafactor]") {
    const AdafactorHyper h = kAdafactorDefaults;
    CHECK(adafactor_beta2t(1, h) == 0.0f);
    CHECK(adafactor_beta2t(10, h) == Approx(1.0 - std::pow(10.0, -0.8)));
    CHECK(adafactor_rho(1, h) == 1e-2f);               // min(1e-2, 1/sqrt(1))
    CHECK(adafactor_rho(40000, h) == Approx(0.005f));  // 1/sqrt(t) wins late
    CHECK(adafactor_lr(0.5f, 1, h) == Approx(0.005f));
    CHECK(adafactor_lr(1e-5f, 1, h) == Approx(1e-5f));  // scale floored at eps2
    STATIC_REQUIRE(kAdafactorDefaults.eps1 == 1e-30f);
    STATIC_REQUIRE(kAdafactorDefaults.eps2 == 1e-3f);
    STATIC_REQUIRE(kAdafactorDefaults.clip_threshold == 1.0f);
    STATIC_REQUIRE(kAdafactorDefaults.decay_rate == -0.8f);
}

TEST_CASE("Adafactor first vector step by hand: p -= 0.01 * RMS(p) * sign(g)", "[math][adafactor]") {
    // beta2t = 0 at step 1, so v = g^2 and update = sign(g), whose RMS is 1: no clipping.
    std::vector<float> p = {3.0f, -4.0f}, g = {0.2f, 7.0f};
    VectorState state(2);
    state.update(p, g, kAdafactorDefaults);
    const double rms = std::sqrt((9.0 + 16.0) / 2);
    CHECK(p[0] == Approx(3.0 - 0.01 * rms));
    CHECK(p[1] == Approx(-4.0 - 0.01 * rms));
}

TEST_CASE("Adafactor matrix steps match the transformers algorithm", "[math][adafactor]") {
    auto fx = read_fixture();
    std::vector<float> p = fx.at("matrix.p0");
    FactoredState state(4, 6);
    for (int step = 1; step <= 4; ++step) {
        state.update(p, fx.at("matrix.g" + std::to_string(step)), kAdafactorDefaults);
        INFO("step " << step);
        require_close(p, fx.at("matrix.p" + std::to_string(step)));
    }
}

TEST_CASE("Adafactor vector steps match the transformers algorithm", "[math][adafactor]") {
    auto fx = read_fixture();
    std::vector<float> p = fx.at("vector.p0");
    VectorState state(p.size());
    for (int step = 1; step <= 4; ++step) {
        state.update(p, fx.at("vector.g" + std::to_string(step)), kAdafactorDefaults);
        INFO("step " << step);
        require_close(p, fx.at("vector.p" + std::to_string(step)));
    }
}

TEST_CASE("Adafactor clip divides by RMS(update) above the threshold, decay", "[math][adafactor]") {
    const AdafactorHyper h = kAdafactorDefaults;
    CHECK(adafactor_clip_divisor(2.0f, 2.0f, h) == 1.0f);   // RMS 1
    CHECK(adafactor_clip_divisor(32.0f, 2.0f, h) == 4.0f);  // RMS 4
    CHECK(adafactor_clip_divisor(0.5f, 2.0f, h) == 1.0f);
    AdafactorHyper wd = h;
    wd.weight_decay = 0.1f;
    CHECK(adafactor_apply(2.0f, 1.0f, 0.5f, 2.0f, wd, true) == Approx(2.0 - 2.0 * 0.05 - 0.25));
    CHECK(adafactor_apply(2.0f, 1.0f, 0.5f, 2.0f, wd, false) == Approx(2.0 - 0.25));
    // Factored update with equal statistics reduces to g / sqrt(col).
    CHECK(adafactor_factored_update(3.0f, 2.0f, 2.0f, 4.0f) == Approx(1.5f));
}
