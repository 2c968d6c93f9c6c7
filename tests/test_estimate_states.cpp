// Model-state bytes (weights, master, gradients, optimizer states) against
// the published numbers of ../shared/reference/published.md.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/presets.h"
#include "estimate/estimate.h"
#include "estimate/model_states.h"

using namespace tune;

namespace {

// One flat buffer of psi parameters: the ZeRO paper's Psi is a free
// parameter, not a model, so the state formulas are fed a synthetic buffer.
// 7.5e9 and 70e9 are multiples of the 256-element alignment: no padding at N = 1.
BufferKind synthetic(std::uint64_t psi) { return BufferKind{psi, 0, 0, psi, 1}; }

StateSettings settings(Optimizer o, Precision p, std::uint32_t stage, std::uint64_t ranks) {
    return StateSettings{o, p, zero_plan(stage), ranks, 256, 256};
}

// The paper prints GB with three significant digits: equal when within half a unit of the last digit.
bool matches_printed(double bytes, double printed_gb, double last_digit) {
    return std::abs(bytes / 1e9 - printed_gb) <= 0.5 * last_digit * (1 + 1e-9);
}

}  // namespace

TEST_CASE("mixed-precision Adam model states reproduce ZeRO Table 1 (Psi = 7.5B)", "[estimate][states]") {
    struct Row {
        std::uint64_t ranks;
        double stage1, stage2, stage3, digit1, digit2, digit3;
    };
    // N_d -> GB per device for P_os, P_os+g, P_os+g+p, with the printed precision of each cell.
    const Row rows[] = {{1, 120, 120, 120, 1, 1, 1},
                        {4, 52.5, 41.3, 30, 0.1, 0.1, 1},
                        {64, 31.4, 16.6, 1.88, 0.1, 0.1, 0.01},
                        {1024, 30.1, 15.1, 0.12, 0.1, 0.1, 0.01}};
    const BufferKind psi = synthetic(7'500'000'000ull);
    for (const Row& r : rows) {
        INFO("N_d = " << r.ranks);
        auto bytes = [&](std::uint32_t stage) {
            return static_cast<double>(
                model_states(psi, settings(Optimizer::adamw, Precision::fp16_mixed, stage, r.ranks)).total());
        };
        CHECK(matches_printed(bytes(1), r.stage1, r.digit1));
        CHECK(matches_printed(bytes(2), r.stage2, r.digit2));
        CHECK(matches_printed(bytes(3), r.stage3, r.digit3));
        // Baseline: (2 + 2 + K) Psi with K = 12 over the buffer padded to N_d equal shards.
        CHECK(bytes(0) == 16.0 * static_cast<double>(full_numel(psi.numel, r.ranks, 256)));
        CHECK(bytes(0) - 16 * 7.5e9 <= 16.0 * 256 * static_cast<double>(r.ranks));
    }
}

TEST_CASE("the ZeRO stages split 2 + 2 + 12 bytes per parameter as the paper says", "[estimate][states]") {
    // 7 * 2^30 parameters: a multiple of 4 ranks x 256 elements, so no padding at all.
    const std::uint64_t n = 7ull << 30;
    const BufferKind psi = synthetic(n);
    const auto s3 = model_states(psi, settings(Optimizer::adamw, Precision::bf16_mixed, 3, 1));
    CHECK(s3.params == 2 * n);
    CHECK(s3.grads == 2 * n);
    CHECK(s3.master == 4 * n);  // fp32 master: part of K = 12
    CHECK(s3.optim == 8 * n);   // m and v in fp32
    // Stage 2 over 4 ranks: weights whole, gradients and K sharded.
    const auto s2 = model_states(psi, settings(Optimizer::adamw, Precision::bf16_mixed, 2, 4));
    CHECK(s2.params == 2 * n);
    CHECK(s2.grads == 2 * n / 4);
    CHECK(s2.master + s2.optim == 12 * n / 4);
    // Stage 1: gradients whole again; stage 3: everything a quarter.
    CHECK(model_states(psi, settings(Optimizer::adamw, Precision::bf16_mixed, 1, 4)).grads == 2 * n);
    CHECK(model_states(psi, settings(Optimizer::adamw, Precision::bf16_mixed, 3, 4)).total() == 16 * n / 4);
}

TEST_CASE("pure bf16 70B: weights 140 GB, gradients 140 GB, Adam states 280 GB", "[estimate][states]") {
    const BufferKind psi = synthetic(70'000'000'000ull);
    const auto adamw = model_states(psi, settings(Optimizer::adamw, Precision::bf16, 0, 1));
    CHECK(adamw.params == 140'000'000'000ull);
    CHECK(adamw.grads == 140'000'000'000ull);
    CHECK(adamw.optim == 280'000'000'000ull);
    CHECK(adamw.master == 0);
    CHECK(adamw.total() == 560'000'000'000ull);

    // Optimizer-state bytes per parameter in that setting: AdamW 4, Lion 2, 8-bit 2 (+ block scales), LOMO 0.
    auto optim = [&](Optimizer o) { return model_states(psi, settings(o, Precision::bf16, 0, 1)).optim; };
    CHECK(optim(Optimizer::lion) == 140'000'000'000ull);
    CHECK(optim(Optimizer::adam8bit) == 140'000'000'000ull + 8 * 70'000'000'000ull / 256);
    CHECK(optim(Optimizer::lomo) == 0);
    CHECK(model_states(psi, settings(Optimizer::lomo, Precision::bf16, 0, 1)).grads == 0);
}

TEST_CASE("llama-70b in pure bf16 is the 70B example to the printed digits", "[estimate][states]") {
    TrialConfig c;
    c.model = *find_model("llama-70b");
    c.precision = Precision::bf16;
    const FlatLayout layout = flat_layout(c.model, c.adam8bit_block);
    const auto s = model_states(layout, StateSettings::of(c));
    CHECK(std::round(static_cast<double>(s.params) / 1e10) * 10 == 140);
    CHECK(std::round(static_cast<double>(s.grads) / 1e10) * 10 == 140);
    CHECK(std::round(static_cast<double>(s.optim) / 1e10) * 10 == 280);
    CHECK(s.params == 2 * c.model.param_count());  // every llama-70b tensor is a multiple of 256: no padding

    // Adafactor keeps rows + cols per matrix: O(rows + cols), far below a byte per parameter.
    c.optimizer = Optimizer::adafactor;
    const auto a = model_states(layout, StateSettings::of(c));
    const std::uint64_t h = 8192, kv = 1024, f = 28672, v = 32000;
    CHECK(a.optim == 2 * (80 * (11 * h + 2 * kv + 3 * f) + 2 * v + 3 * h));
    CHECK(a.optim < s.params / 1000);
}

TEST_CASE("LOMO on LLaMA-7B in 16 bits: params 12.55 GiB, gradients 0.24 GiB (Lv et al. Table 1)",
          "[estimate][states]") {
    const Hardware h100 = *find_device("h100-80gb");
    for (Precision p : {Precision::bf16, Precision::fp16_mixed}) {
        TrialConfig c;
        c.model = *find_model("llama-7b");
        c.optimizer = Optimizer::lomo;
        c.precision = p;
        c.checkpointing = Checkpointing::full;
        c.context = 512;
        const StepMemory m = step_memory(c.model, c, h100, {});
        INFO(to_string(p));
        const double gib = 1024.0 * 1024 * 1024;
        const double params = static_cast<double>(m.at_peak()[Component::params]) / gib;
        CHECK(std::abs(params - 12.55) / 12.55 < 0.01);
        // The largest gradient held at once is one 32000 x 4096 tensor (embedding or head) in 16 bits:
        // 262,144,000 bytes = 0.2441 GiB, which the paper prints as 0.24.
        std::uint64_t grads = 0;
        for (Phase ph : kPhases) grads = std::max(grads, m.at(ph)[Component::grads]);
        CHECK(grads == 32000ull * 4096 * 2);
        CHECK(std::abs(static_cast<double>(grads) / gib - 0.24) <= 0.005);
        CHECK(m.at_peak()[Component::optim] == 0);
        // fp16-mixed keeps fp32 master weights beside the 16-bit ones; pure bf16 does not.
        CHECK((m.at_peak()[Component::master] == 0) == (p == Precision::bf16));
    }
}

TEST_CASE("8-bit Adam: one byte per state, an fp32 absmax per block, full width under 4096 elements",
          "[estimate][states]") {
    // tiny: h = 64, kv = 32; per layer the norms (64 each) and k, v (2048 each) are under 4096.
    const ModelSpec tiny = *find_model("tiny");
    const FlatLayout layout = flat_layout(tiny, 256);
    CHECK(layout.layer.small == 64 + 64 + 2048 + 2048);
    CHECK(layout.outer.small == 64);
    CHECK(layout.layer.numel == 256 + 4096 + 2048 + 2048 + 4096 + 256 + 3 * 11264);  // norm slots padded to 256
    CHECK(layout.outer.numel == 16384 + 256 + 16384);

    const StateSettings s{Optimizer::adam8bit, Precision::fp32, zero_plan(0), 1, 256, 256};
    const auto layer = model_states(BufferKind{layout.layer.numel, layout.layer.small, 0, 0, 1}, s);
    CHECK(layer.optim == 2 * 46592 + 8 * (46592 / 256) + 8 * 4224);

    // A block size of 2048 widens the alignment to 2048 elements: blocks never straddle shards.
    CHECK(flat_alignment(2048) == 2048);
    CHECK(flat_alignment(256) == 256);
    CHECK(flat_alignment(64) == 256);
}
