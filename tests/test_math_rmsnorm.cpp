// RMSNorm per-element pieces: the forward by hand and the backward against
// central differences of a double-precision RMSNorm.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernels/math/rmsnorm.h"

using namespace tune::math;

namespace {

double loss(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& dy, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double r = 1 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
    double l = 0;
    for (std::size_t i = 0; i < x.size(); ++i) l += dy[i] * w[i] * x[i] * r;
    return l;
}

}  // namespace

TEST_CASE("RMSNorm forward by hand", "[math][rmsnorm]") {
    // x = (3, 4): mean square 12.5, so y = w * x / sqrt(12.5 + eps).
    const float r = rmsnorm_inv_rms(25.0f, 2, 1e-6f);
    CHECK(r == Approx(1 / std::sqrt(12.5 + 1e-6)));
    CHECK(rmsnorm_forward(3.0f, 2.0f, r) == Approx(6 / std::sqrt(12.5)).epsilon(1e-6));
}

TEST_CASE("RMSNorm backward matches central differences", "[math][rmsnorm]") {
    const std::vector<double> x = {0.3, -1.2, 0.7, 2.0, -0.4}, w = {1.0, 0.5, -2.0, 1.5, 0.9},
                              dy = {0.2, -0.1, 0.4, 0.3, -0.6};
    const double eps = 1e-5;
    double ss = 0, dywx = 0;
    for (double v : x) ss += v * v;
    const float r = rmsnorm_inv_rms(static_cast<float>(ss), 5, static_cast<float>(eps));
    for (std::size_t i = 0; i < x.size(); ++i) dywx += dy[i] * w[i] * x[i];
    for (std::size_t i = 0; i < x.size(); ++i) {
        std::vector<double> xp = x, xm = x, wp = w, wm = w;
        const double h = 1e-6;
        xp[i] += h;
        xm[i] -= h;
        wp[i] += h;
        wm[i] -= h;
        const double fd_x = (loss(xp, w, dy, eps) - loss(xm, w, dy, eps)) / (2 * h);
        const double fd_w = (loss(x, wp, dy, eps) - loss(x, wm, dy, eps)) / (2 * h);
        const float dx = rmsnorm_backward_x(static_cast<float>(x[i]), static_cast<float>(dy[i]),
                                            static_cast<float>(w[i]), r, static_cast<float>(dywx / 5));
        CHECK(dx == Approx(fd_x).epsilon(1e-4).margin(1e-6));
        CHECK(rmsnorm_backward_w(static_cast<float>(x[i]), static_cast<float>(dy[i]), r) == Approx(fd_w).epsilon(1e-4));
    }
}
