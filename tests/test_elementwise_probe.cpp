// The element-wise probe runs on values as a step has them: tokens spread over
// the vocabulary, activations and weights of noise that thousands of calls
// leave as they were (no op writes what the loop reads again), in each dtype.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/presets.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/math/half.h"
#include "probe/elementwise_probe.h"

using namespace tune;

namespace {

ElementwiseRate tiny_rate(ProbeDtype dtype) {
    const ModelSpec m = *find_model("tiny");
    return {64,
            dtype,
            static_cast<std::int64_t>(m.hidden),
            static_cast<std::int64_t>(m.kv_dim()),
            static_cast<std::int64_t>(m.ffn),
            static_cast<std::int64_t>(m.vocab),
            static_cast<std::int64_t>(m.heads),
            static_cast<std::int64_t>(m.kv_heads),
            static_cast<std::int64_t>(m.head_dim()),
            0,
            0,
            0};
}

// A buffer's values as floats.
std::vector<float> read(kernels::Backend& backend, const kernels::Scratch& s, std::uint64_t elements, ProbeDtype d) {
    std::vector<float> out(elements);
    if (d == ProbeDtype::f32) {
        backend.copy_to_host(out.data(), s.ptr, elements * 4);
        return out;
    }
    std::vector<std::uint16_t> raw(elements);
    backend.copy_to_host(raw.data(), s.ptr, elements * 2);
    for (std::size_t i = 0; i < raw.size(); ++i)
        out[i] = d == ProbeDtype::bf16 ? math::to_float(math::bf16{raw[i]}) : math::to_float(math::fp16{raw[i]});
    return out;
}

bool all_finite(const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

double mean_abs(const std::vector<float>& v) {
    double sum = 0;
    for (float x : v) sum += std::fabs(x);
    return sum / static_cast<double>(v.size());
}

}  // namespace

TEST_CASE("the element-wise probe's tokens spread over the vocabulary, as a step's do", "[probe]") {
    // All zeros put every row on one token: the CUDA embedding backward then sums
    // them one after another in one block (26.6 ms on an H100 for 8192 rows).
    const std::vector<std::int32_t> ids = probe::spread_tokens(8193, 32000);
    REQUIRE(ids.size() == 8193);
    std::vector<std::int32_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());  // distinct
    CHECK(sorted.front() >= 0);
    CHECK(sorted.back() < 32000);
    CHECK(sorted.back() > 30000);  // across the table, not its first rows
    // More tokens than the vocabulary: every id in range, each used about equally.
    const std::vector<std::int32_t> small = probe::spread_tokens(1000, 7);
    std::vector<int> uses(7, 0);
    for (std::int32_t id : small) {
        REQUIRE(id >= 0);
        REQUIRE(id < 7);
        ++uses[static_cast<std::size_t>(id)];
    }
    CHECK(*std::max_element(uses.begin(), uses.end()) - *std::min_element(uses.begin(), uses.end()) <= 1);
}

TEST_CASE("the element-wise probe's values stay as a step's over thousands of calls", "[probe]") {
    for (const ProbeDtype d : {ProbeDtype::f32, ProbeDtype::bf16, ProbeDtype::f16}) {
        INFO("dtype " << probe_dtype_name(d));
        kernels::CpuBackend backend({1, 0});
        const ElementwiseRate rate = tiny_rate(d);
        probe::ElementwiseOps ops(backend, rate);
        const auto t = static_cast<std::uint64_t>(rate.tokens), f = static_cast<std::uint64_t>(rate.ffn);
        const auto h = static_cast<std::uint64_t>(rate.hidden);
        const std::vector<float> up = read(backend, ops.up, t * f, d), gate = read(backend, ops.gate, t * f, d);
        CHECK(mean_abs(up) > 0.3);  // noise in [-1, 1), not the zeros of a fresh scratch
        CHECK(mean_abs(read(backend, ops.x, t * h, d)) > 0.3);
        for (int call = 0; call < 5000; ++call) {
            ops.layer_forward();
            ops.layer_backward();
            ops.outer();
        }
        // What the sequences read is what they started from: SwiGLU's backward
        // writes its own dup, not the up it reads.
        CHECK(read(backend, ops.up, t * f, d) == up);
        CHECK(read(backend, ops.gate, t * f, d) == gate);
        const std::vector<float> dup = read(backend, ops.dup, t * f, d);
        CHECK(all_finite(dup));
        CHECK(mean_abs(dup) > 1e-6);
        // The accumulated gradients grew without overflowing, in fp16 too.
        const std::vector<float> dw = read(backend, ops.dw, h, d);
        CHECK(all_finite(dw));
        CHECK(mean_abs(dw) > 0);
        CHECK(all_finite(read(backend, ops.dtable, static_cast<std::uint64_t>(rate.vocab) * h, d)));
        CHECK(all_finite(read(backend, ops.q, t * h, d)));
    }
}
