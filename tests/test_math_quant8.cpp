// 8-bit blockwise quantization: the dynamic map against bitsandbytes' values
// (fixture written by scripts/gen_dynamic_map.py with torch), the quantizer,
// and blockwise 8-bit Adam against fp32 Adam.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/math/quant8.h"

using namespace tune::math;

namespace {

struct Maps {
    float signed_code[256];
    float unsigned_code[256];
    Maps() {
        create_dynamic_map(true, signed_code);
        create_dynamic_map(false, unsigned_code);
    }
    Adam8bitMaps view() const { return {signed_code, unsigned_code}; }
};

// The fixture's two tables as float32 bit patterns: [0] signed, [1] unsigned.
std::vector<std::vector<std::uint32_t>> read_fixture() {
    std::ifstream in(std::string(TUNE_SOURCE_DIR) + "/tests/fixtures/dynamic_map.txt");
    REQUIRE(in.good());
    std::vector<std::vector<std::uint32_t>> tables(2);
    std::vector<std::uint32_t>* current = nullptr;
    std::string token;
    while (in >> token) {
        if (token == "#") {
            std::getline(in, token);
        } else if (token == "signed") {
            current = &tables[0];
        } else if (token == "unsigned") {
            current = &tables[1];
        } else {
            REQUIRE(current != nullptr);
            current->push_back(static_cast<std::uint32_t>(std::stoul(token, nullptr, 16)));
        }
    }
    return tables;
}

int nearest_index(const float* code, float x) {
    int best = 0;
    for (int i = 1; i < 256; ++i) {
        if (std::fabs(code[i] - x) < std::fabs(code[best] - x)) best = i;
    }
    return best;
}

// fp32 Adam (bitsandbytes' arithmetic order, no decay) in double precision.
struct AdamRef {
    std::vector<double> p, m, v;
    void step(const std::vector<float>& g, const Adam8bitHyper& h, int t) {
        const double c1 = 1 - std::pow(double{h.beta1}, t), c2 = std::sqrt(1 - std::pow(double{h.beta2}, t));
        for (std::size_t i = 0; i < p.size(); ++i) {
            m[i] = h.beta1 * m[i] + (1 - double{h.beta1}) * g[i];
            v[i] = h.beta2 * v[i] + (1 - double{h.beta2}) * g[i] * g[i];
            p[i] -= h.lr * (m[i] / c1) / (std::sqrt(v[i]) / c2 + h.eps);
        }
    }
};

// Quantized Adam state of n elements in blocks, starting from zero like bitsandbytes.
struct Adam8bitState {
    std::vector<std::uint8_t> m, v;
    std::vector<float> absmax_m, absmax_v;
    Adam8bitState(int n, int block) : m(n, 0), v(n, 0), absmax_m((n + block - 1) / block), absmax_v(absmax_m.size()) {}

    void step(std::vector<float>& p, const std::vector<float>& g, const Maps& maps, const Adam8bitHyper& h, int t) {
        const Adam8bitStep s = adam8bit_step(h, t, true);
        const int n = static_cast<int>(p.size());
        for (int b = 0; b * h.block_size < n; ++b) {
            const int first = b * h.block_size;
            const int len = std::min(h.block_size, n - first);
            adam8bit_block(p.data() + first, g.data() + first, len,
                           Adam8bitBlock{m.data() + first, v.data() + first, &absmax_m[b], &absmax_v[b]}, maps.view(),
                           h, s);
        }
    }
    float m_at(const Maps& maps, int i, int block) const {
        return dequantize(maps.signed_code, m[i], absmax_m[i / block]);
    }
    float v_at(const Maps& maps, int i, int block) const {
        return dequantize(maps.unsigned_code, v[i], absmax_v[i / block]);
    }
};

}  // namespace

TEST_CASE("dynamic map reproduces bitsandbytes' 256 values bit for bit", "[math][quant8]") {
    const auto tables = read_fixture();
    const Maps maps;
    REQUIRE(tables[0].size() == 256);
    REQUIRE(tables[1].size() == 256);
    int mismatches = 0;
    for (int i = 0; i < 256; ++i) {
        if (float_bits(maps.signed_code[i]) != tables[0][static_cast<std::size_t>(i)]) ++mismatches;
        if (float_bits(maps.unsigned_code[i]) != tables[1][static_cast<std::size_t>(i)]) ++mismatches;
    }
    REQUIRE(mismatches == 0);
}

TEST_CASE("dynamic map shape: ascending, symmetric when signed, ends at 1", "[math][quant8]") {
    const Maps maps;
    for (int i = 1; i < 256; ++i) {
        REQUIRE(maps.signed_code[i - 1] < maps.signed_code[i]);
        REQUIRE(maps.unsigned_code[i - 1] < maps.unsigned_code[i]);
    }
    CHECK(maps.signed_code[127] == 0.0f);
    CHECK(maps.unsigned_code[0] == 0.0f);
    CHECK(maps.signed_code[255] == 1.0f);
    CHECK(maps.unsigned_code[255] == 1.0f);
    for (int i = 0; i < 127; ++i) REQUIRE(maps.signed_code[i] == -maps.signed_code[254 - i]);
    // Smallest magnitudes: 1e-6 times the midpoint of the first fraction interval.
    CHECK(maps.signed_code[128] == Approx(0.55e-6).epsilon(1e-6));
    CHECK(maps.unsigned_code[1] == Approx(0.325e-6).epsilon(1e-6));
}

TEST_CASE("quantize_to_map picks the nearest entry", "[math][quant8]") {
    const Maps maps;
    for (int i = 0; i < 256; ++i) {
        REQUIRE(quantize_to_map(maps.signed_code, true, maps.signed_code[i]) == i);
        REQUIRE(quantize_to_map(maps.unsigned_code, false, maps.unsigned_code[i]) == i);
    }
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::uniform_real_distribution<float> logmag(-7.0f, 0.0f);
    int wrong = 0;
    for (int k = 0; k < 20000; ++k) {
        const float x = k % 2 ? uni(rng) : std::copysign(std::pow(10.0f, logmag(rng)), uni(rng));
        const float ux = std::fabs(x);
        const auto qs = quantize_to_map(maps.signed_code, true, x);
        const auto qu = quantize_to_map(maps.unsigned_code, false, ux);
        // Equal distance (a tie) is allowed to go either way.
        const int ns = nearest_index(maps.signed_code, x), nu = nearest_index(maps.unsigned_code, ux);
        if (std::fabs(maps.signed_code[qs] - x) != std::fabs(maps.signed_code[ns] - x)) ++wrong;
        if (std::fabs(maps.unsigned_code[qu] - ux) != std::fabs(maps.unsigned_code[nu] - ux)) ++wrong;
    }
    REQUIRE(wrong == 0);
}

TEST_CASE("blockwise quantize keeps absmax and bounds the error by the map's spacing", "[math][quant8]") {
    const Maps maps;
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    std::vector<float> x(256), back(256);
    for (float& xi : x) xi = normal(rng);
    std::vector<std::uint8_t> q(256);
    const float absmax = quantize_block(maps.signed_code, true, x.data(), 256, q.data());
    CHECK(absmax == block_absmax(x.data(), 256));
    dequantize_block(maps.signed_code, q.data(), 256, absmax, back.data());
    for (int i = 0; i < 256; ++i) {
        const int k = q[static_cast<std::size_t>(i)];
        const float gap = (k < 255 ? maps.signed_code[k + 1] - maps.signed_code[k] : 0.0f) +
                          (k > 0 ? maps.signed_code[k] - maps.signed_code[k - 1] : 0.0f);
        REQUIRE(std::fabs(back[static_cast<std::size_t>(i)] - x[static_cast<std::size_t>(i)]) <=
                gap * absmax * 0.5f + 1e-12f);
    }
    // An all-zero block has scale zero and dequantizes to zeros.
    std::vector<float> zeros(16, 0.0f), out(16, 1.0f);
    const float zero_absmax = quantize_block(maps.signed_code, true, zeros.data(), 16, q.data());
    dequantize_block(maps.signed_code, q.data(), 16, zero_absmax, out.data());
    CHECK(zero_absmax == 0.0f);
    for (float o : out) CHECK(o == 0.0f);
}

TEST_CASE("first 8-bit Adam step from zero state equals fp32 Adam", "[math][quant8]") {
    // From zero state the moments are exact before quantization, so step 1 is fp32 Adam.
    const Maps maps;
    Adam8bitHyper h;
    h.lr = 1e-2f;
    const int n = 512;
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> p(n), g(n);
    for (int i = 0; i < n; ++i) {
        p[static_cast<std::size_t>(i)] = normal(rng);
        g[static_cast<std::size_t>(i)] = normal(rng) * 1e-2f;
    }
    AdamRef ref{{p.begin(), p.end()}, std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
    Adam8bitState state(n, h.block_size);
    state.step(p, g, maps, h, 1);
    ref.step(g, h, 1);
    for (int i = 0; i < n; ++i)
        REQUIRE(p[static_cast<std::size_t>(i)] ==
                Approx(ref.p[static_cast<std::size_t>(i)]).epsilon(1e-6).margin(1e-7));
}

TEST_CASE("8-bit Adam states and parameters stay close to fp32 Adam over 10 steps", "[math][quant8]") {
    // Gradient scales spread over two decades inside each block, so small
    // elements sit in the coarse low decades of the map. Tolerance: each
    // dequantized moment within 4% of its block's fp32 absmax, and the parameter
    // displacement within 5% relative L2 (measured: m 2.5%, v 1.6%, p 3.3%).
    const Maps maps;
    Adam8bitHyper h;
    h.lr = 1e-3f;
    const int n = 4096, steps = 10;
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> p(n), p0;
    std::vector<float> scale(n);
    for (int i = 0; i < n; ++i) {
        p[static_cast<std::size_t>(i)] = normal(rng);
        scale[static_cast<std::size_t>(i)] = std::pow(10.0f, -1.0f - 2.0f * static_cast<float>(i % 7) / 6.0f);
    }
    p0 = p;
    AdamRef ref{{p.begin(), p.end()}, std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
    Adam8bitState state(n, h.block_size);
    std::vector<float> g(n);
    for (int t = 1; t <= steps; ++t) {
        for (int i = 0; i < n; ++i)
            g[static_cast<std::size_t>(i)] = (normal(rng) + 0.5f) * scale[static_cast<std::size_t>(i)];
        state.step(p, g, maps, h, t);
        ref.step(g, h, t);
    }
    double worst_m = 0, worst_v = 0;
    for (int b = 0; b < n / h.block_size; ++b) {
        double ref_m_max = 0, ref_v_max = 0;
        for (int i = b * h.block_size; i < (b + 1) * h.block_size; ++i) {
            ref_m_max = std::max(ref_m_max, std::fabs(ref.m[static_cast<std::size_t>(i)]));
            ref_v_max = std::max(ref_v_max, ref.v[static_cast<std::size_t>(i)]);
        }
        for (int i = b * h.block_size; i < (b + 1) * h.block_size; ++i) {
            worst_m = std::max(
                worst_m, std::fabs(state.m_at(maps, i, h.block_size) - ref.m[static_cast<std::size_t>(i)]) / ref_m_max);
            worst_v = std::max(
                worst_v, std::fabs(state.v_at(maps, i, h.block_size) - ref.v[static_cast<std::size_t>(i)]) / ref_v_max);
        }
    }
    INFO("worst moment errors relative to the block absmax: m " << worst_m << ", v " << worst_v);
    CHECK(worst_m < 0.04);
    CHECK(worst_v < 0.04);
    double diff = 0, norm = 0;
    for (int i = 0; i < n; ++i) {
        const double want = ref.p[static_cast<std::size_t>(i)] - p0[static_cast<std::size_t>(i)];
        const double got = double{p[static_cast<std::size_t>(i)]} - p0[static_cast<std::size_t>(i)];
        diff += (got - want) * (got - want);
        norm += want * want;
    }
    INFO("relative L2 error of the parameter displacement: " << std::sqrt(diff / norm));
    CHECK(std::sqrt(diff / norm) < 0.05);
}

TEST_CASE("8-bit Adam keeps the sign of m and skips non-finite gradients", "[math][quant8]") {
    const Maps maps;
    const Adam8bitHyper h;
    std::vector<float> p = {1.0f, 2.0f, 3.0f, 4.0f};
    std::vector<float> g = {1e-3f, -1e-9f, NAN, 5.0f};  // a tiny negative among large values
    Adam8bitState state(4, h.block_size);
    state.step(p, g, maps, h, 1);
    CHECK(p[2] == 3.0f);
    CHECK(state.m_at(maps, 2, h.block_size) == 0.0f);
    CHECK(state.m_at(maps, 1, h.block_size) < 0.0f);  // quantized toward zero, sign kept
    CHECK(state.m_at(maps, 0, h.block_size) > 0.0f);
    CHECK(p[0] < 1.0f);
    CHECK(p[1] > 2.0f);
}

TEST_CASE("8-bit Adam decoupled decay multiplies after the step, fp16 parameters round", "[math][quant8]") {
    const Maps maps;
    Adam8bitHyper h;
    h.weight_decay = 0.1f;
    h.lr = 0.5f;
    const Adam8bitStep with = adam8bit_step(h, 1, true), without = adam8bit_step(h, 1, false);
    CHECK(with.decay == Approx(0.95f));
    CHECK(without.decay == 1.0f);
    CHECK(adam8bit_param(2.0f, 0.0f, 1.0f, with) == Approx(1.9f));
    std::vector<fp16> p = {to_fp16(1.0f)};
    std::vector<float> g = {1.0f};
    std::vector<std::uint8_t> m(1, 0), v(1, 0);
    float am = 0, av = 0;
    adam8bit_block(p.data(), g.data(), 1, Adam8bitBlock{m.data(), v.data(), &am, &av}, maps.view(), h, without);
    CHECK(to_float(p[0]) == Approx(0.5f).epsilon(1e-3));  // one Adam step moves by lr
    CHECK(am == Approx(0.1f));
    CHECK(av == Approx(0.001).epsilon(1e-4));
}
