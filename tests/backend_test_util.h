// Shared by the backend tests: random buffers, double-precision finite
// differences, 16-bit storage round trips and error measures.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/math/half.h"

namespace tune::testing {

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(gen);
    return v;
}

inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Central differences of a double-precision loss: the gradient reference.
template <class Loss>
std::vector<double> numeric_grad(Loss&& loss, std::vector<double> x, double h = 1e-6) {
    std::vector<double> g(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double keep = x[i];
        x[i] = keep + h;
        const double up = loss(x);
        x[i] = keep - h;
        const double down = loss(x);
        x[i] = keep;
        g[i] = (up - down) / (2 * h);
    }
    return g;
}

// max |got - ref| relative to max |ref| (absolute when ref is all zero).
template <class G>
double rel_error(const std::vector<G>& got, const std::vector<double>& ref) {
    double err = 0, mag = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        err = std::max(err, std::abs(static_cast<double>(got[i]) - ref[i]));
        mag = std::max(mag, std::abs(ref[i]));
    }
    return mag > 0 ? err / mag : err;
}

// 16-bit storage of a float buffer, and back.
inline std::vector<std::uint16_t> to_storage(const std::vector<float>& v, kernels::DType t) {
    std::vector<std::uint16_t> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
        out[i] = t == kernels::DType::bf16 ? math::to_bf16(v[i]).bits : math::to_fp16(v[i]).bits;
    return out;
}

inline std::vector<float> from_storage(const std::vector<std::uint16_t>& v, kernels::DType t) {
    std::vector<float> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
        out[i] = t == kernels::DType::bf16 ? math::to_float(math::bf16{v[i]}) : math::to_float(math::fp16{v[i]});
    return out;
}

// The values a float buffer holds after a round trip through dtype t.
inline std::vector<float> rounded(const std::vector<float>& v, kernels::DType t) {
    return t == kernels::DType::f32 ? v : from_storage(to_storage(v, t), t);
}

}  // namespace tune::testing
