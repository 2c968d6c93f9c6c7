// NF4 with double quantization (kernels/math/nf4.h, the CPU backend's
// nf4_quantize / nf4_dequantize) against scripts/nf4_reference.py, a NumPy
// implementation of the published algorithm: every stored byte and every
// dequantized weight bit for bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/math/nf4.h"
#include "train/io/safetensors.h"

using namespace tune;

namespace {

const std::filesystem::path kFixture = std::filesystem::path(TUNE_SOURCE_DIR) / "tests/fixtures/nf4.safetensors";

std::uint32_t bits_of(float f) {
    std::uint32_t u = 0;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

}  // namespace

TEST_CASE("NF4: each code value quantizes to itself, midpoints split neighbours", "[math][nf4]") {
    for (int i = 0; i < 16; ++i) CHECK(math::nf4_quantize(math::nf4_value(i)) == i);
    CHECK(math::nf4_quantize(-1.5f) == 0);
    CHECK(math::nf4_quantize(2.0f) == 15);
    CHECK(math::nf4_quantize(0.0f) == 7);
    const float mid = 0.5f * (math::nf4_value(7) + math::nf4_value(8));
    CHECK(math::nf4_quantize(mid) == 7);  // a tie keeps the lower code
    CHECK(math::nf4_quantize(std::nextafter(mid, 1.0f)) == 8);
}

TEST_CASE("NF4: quantize and dequantize match the NumPy reference bit for bit", "[math][nf4]") {
    const train::SafetensorsFile f = train::SafetensorsFile::load(kFixture);
    const std::vector<float> x = f.read_f32("x");
    const auto n = static_cast<std::int64_t>(x.size());
    const math::Nf4Sizes sizes = math::nf4_sizes(n);
    kernels::CpuBackend cpu(kernels::CpuBackendOptions{2, 0});
    std::vector<std::uint8_t> q(static_cast<std::size_t>(sizes.bytes), 0xff);
    std::vector<float> absmax(static_cast<std::size_t>(n / 64));
    cpu.nf4_quantize(q.data(), x.data(), n, absmax.data());
    const math::Nf4Parts p = math::nf4_parts(q.data(), n);

    const std::vector<float> packed = f.read_f32("packed"), codes = f.read_f32("absmax_codes");
    const std::vector<float> scales = f.read_f32("scales");
    REQUIRE(static_cast<std::int64_t>(packed.size()) == sizes.packed);
    REQUIRE(static_cast<std::int64_t>(codes.size()) == sizes.absmax);
    REQUIRE(static_cast<std::int64_t>(scales.size()) == sizes.scales);
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < sizes.packed; ++i) wrong += p.packed[i] != static_cast<std::uint8_t>(packed[i]);
    for (std::int64_t i = 0; i < sizes.absmax; ++i) wrong += p.absmax[i] != static_cast<std::uint8_t>(codes[i]);
    for (std::int64_t i = 0; i < sizes.scales; ++i) wrong += bits_of(p.scales[i]) != bits_of(scales[i]);
    CHECK(wrong == 0);
    CHECK(bits_of(*p.offset) == bits_of(f.read_f32("offset")[0]));

    std::vector<float> out(x.size());
    cpu.nf4_dequantize(out.data(), kernels::DType::f32, q.data(), n, 0, n);
    const std::vector<float> want = f.read_f32("dequantized");
    std::int64_t differ = 0;
    for (std::size_t i = 0; i < out.size(); ++i) differ += bits_of(out[i]) != bits_of(want[i]);
    CHECK(differ == 0);
    for (std::int64_t i = 64; i < 128; ++i) CHECK(out[static_cast<std::size_t>(i)] == 0.0f);  // the zero block
    // A range (one tensor of a flat buffer) dequantizes to the same weights.
    std::vector<float> part(1000);
    cpu.nf4_dequantize(part.data(), kernels::DType::f32, q.data(), n, 16640, 1000);
    CHECK(std::equal(part.begin(), part.end(), out.begin() + 16640));
}

TEST_CASE("NF4 storage: 4 + 8/64 + 32/(64*256) bits per weight", "[math][nf4]") {
    const std::int64_t n = std::int64_t{4096} * 11008;  // Llama-2-7B's gate_proj
    const double bits = 8.0 * static_cast<double>(math::nf4_sizes(n).bytes) / static_cast<double>(n);
    CHECK(bits == Approx(4.0 + 8.0 / 64 + 32.0 / (64 * 256)).epsilon(1e-6));
    WARN("NF4 bits per weight, 4096 x 11008: " << bits);
}
