// What the sweep driver learns from measured trials: an overall efficiency
// (which scales every prediction alike) and one factor per precision (which
// changes the predicted order, so pareto-first measures the real front
// sooner), how a step follows the machine's pace, the device overhead, and
// the memory error pruning allows for.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include "core/machine_speed.h"
#include "core/presets.h"
#include "core/step_statistics.h"
#include "driver/calibration.h"
#include "estimate/estimate.h"
#include "estimate/estimate_time.h"

using namespace tune;

namespace {

TrialConfig config(Precision p) {
    TrialConfig c;
    c.model = *find_model("small");
    c.precision = p;
    c.context = 256, c.micro_batch = 2;
    return c;
}

// A measured ok trial that ran `ratio` times the uncalibrated prediction.
TrialResult measured(const TrialConfig& c, const Estimate& uncalibrated, double ratio) {
    TrialResult r;
    r.status = TrialStatus::ok;
    r.config = c;
    r.estimate = uncalibrated;
    r.memory.peak = uncalibrated.memory.peak;
    r.tokens_per_s = ratio * uncalibrated.tokens_per_s;
    return r;
}

}  // namespace

TEST_CASE("per-precision calibration reorders predictions the way the measurements did", "[driver][calibration]") {
    const Hardware cpu = *find_device("cpu");
    Calibration cal(EstimateOptions{});
    const TrialConfig fp32 = config(Precision::fp32), fp16 = config(Precision::fp16_mixed);
    const Estimate e32 = estimate(fp32, cpu), e16 = estimate(fp16, cpu);
    // fp32 ran at 0.3 of its prediction, fp16 at 0.1: fp16 is 3x slower than predicted relative to fp32.
    for (int i = 0; i < 3; ++i) {
        cal.observe(measured(fp32, e32, 0.3), e32);
        cal.observe(measured(fp16, e16, 0.1), e16);
    }
    CHECK(cal.efficiency_factor() == Approx(std::sqrt(0.3 * 0.1)));
    CHECK(cal.precision_factor(Precision::fp32) / cal.precision_factor(Precision::fp16_mixed) == Approx(3.0));
    CHECK(cal.precision_factor(Precision::bf16) == 1.0);  // never measured

    const EstimateOptions learned = cal.options();
    const double before = e16.tokens_per_s / e32.tokens_per_s;
    const double after = estimate(fp16, cpu, learned).tokens_per_s / estimate(fp32, cpu, learned).tokens_per_s;
    // Compute dominates a CPU step, so the relative speed moves by about the measured factor.
    CHECK(after / before == Approx(1.0 / 3.0).epsilon(0.1));
}

TEST_CASE("optimizer and precision effects are separated", "[driver][calibration]") {
    const Hardware cpu = *find_device("cpu");
    Calibration cal(EstimateOptions{});
    // ratio = 0.4 x (adam8bit: 0.5) x (fp16: 0.25), every combination measured once.
    for (Optimizer o : {Optimizer::adamw, Optimizer::adam8bit})
        for (Precision p : {Precision::fp32, Precision::fp16_mixed}) {
            TrialConfig c = config(p);
            c.optimizer = o;
            const Estimate e = estimate(c, cpu);
            const double ratio =
                0.4 * (o == Optimizer::adam8bit ? 0.5 : 1.0) * (p == Precision::fp16_mixed ? 0.25 : 1.0);
            cal.observe(measured(c, e, ratio), e);
        }
    CHECK(cal.optimizer_factor(Optimizer::adamw) / cal.optimizer_factor(Optimizer::adam8bit) == Approx(2.0));
    CHECK(cal.precision_factor(Precision::fp32) / cal.precision_factor(Precision::fp16_mixed) == Approx(4.0));
    CHECK(cal.optimizer_factor(Optimizer::lion) == 1.0);
}

TEST_CASE("checkpointing and ZeRO stage effects are learned and reach the estimate", "[driver][calibration]") {
    const Hardware cpu = *find_device("cpu");
    Calibration cal(EstimateOptions{});
    // ratio = 0.5 x (no checkpointing: 0.8) x (ZeRO-3: 0.9), every combination measured once.
    for (Checkpointing k : {Checkpointing::none, Checkpointing::full})
        for (std::uint32_t stage : {0u, 3u}) {
            TrialConfig c = config(Precision::fp32);
            c.checkpointing = k;
            c.zero_stage = stage;
            c.world_size = 2;
            const Estimate e = estimate(c, cpu);
            const double ratio = 0.5 * (k == Checkpointing::none ? 0.8 : 1.0) * (stage == 3 ? 0.9 : 1.0);
            cal.observe(measured(c, e, ratio), e);
        }
    CHECK(cal.checkpointing_factor(Checkpointing::full) / cal.checkpointing_factor(Checkpointing::none) ==
          Approx(1.25));
    CHECK(cal.zero_factor(0) / cal.zero_factor(3) == Approx(1.0 / 0.9));
    CHECK(cal.zero_factor(1) == 1.0);  // never measured
    CHECK(cal.checkpointing_factor(Checkpointing::selective) == 1.0);
    // The learned options predict each measured throughput (compute dominates this CPU step).
    TrialConfig none3 = config(Precision::fp32);
    none3.checkpointing = Checkpointing::none, none3.zero_stage = 3, none3.world_size = 2;
    const double learned = estimate(none3, cpu, cal.options()).tokens_per_s / estimate(none3, cpu).tokens_per_s;
    CHECK(learned == Approx(0.5 * 0.8 * 0.9).epsilon(0.05));
}

TEST_CASE("calibration reads a trial's median step, so one slow step does not move it", "[driver][calibration]") {
    const Hardware cpu = *find_device("cpu");
    const TrialConfig c = config(Precision::fp32);
    const Estimate e = estimate(c, cpu);
    TrialResult r = measured(c, e, 1.0);
    // Four timed steps at the predicted time, one 5x slower: the mean (and tokens/s) says 0.56x.
    const double ms = e.step_s * 1e3;
    r.step_ms = {ms, ms, ms, 5 * ms, ms, ms};
    r.step_stats = step_statistics(r.step_ms, 1);
    r.tokens_per_s = e.tokens_per_s * ms / r.step_stats.mean_ms;
    Calibration cal(EstimateOptions{});
    cal.observe(r, e);
    CHECK(cal.efficiency_factor() == Approx(1.0));
}

namespace {

// Trials whose machine ran at `slowdowns` times the probes' pace (speed reference) and
// whose steps took slowdown^exponent times the estimate, in two precisions; of
// micro-batches of 2 x `contexts` tokens (256 when none) whose speed over the
// estimate grew as (tokens / 512)^size_exponent.
Calibration paced_by(const std::vector<double>& slowdowns, double exponent,
                     const std::vector<std::uint64_t>& contexts = {}, double size_exponent = 0,
                     BackendKind backend = BackendKind::cpu) {
    const Hardware cpu = *find_device("cpu");
    EstimateOptions base;
    base.pace_exponent = prior_pace_exponent(backend);
    Calibration cal(base);
    for (std::size_t i = 0; i < slowdowns.size(); ++i) {
        TrialConfig c = config(i % 2 ? Precision::fp32 : Precision::bf16_mixed);
        if (!contexts.empty()) c.context = contexts[i];
        Estimate e = estimate(c, cpu);
        e.speed_reference_s = 0.002;
        const double size = std::pow(2.0 * static_cast<double>(c.context) / 512, size_exponent);
        TrialResult r = measured(c, e, size / std::pow(slowdowns[i], exponent));
        r.speed_reference_s = 0.002 * slowdowns[i];
        cal.observe(r, e);
    }
    return cal;
}

}  // namespace

TEST_CASE("calibration learns how a step follows the machine's pace, once the pace has varied",
          "[driver][calibration][machine-speed]") {
    const std::vector<double> varied{0.6, 0.8, 1.0, 1.25, 1.6, 2.0, 0.7, 1.4, 0.9, 1.1};
    const Calibration learned = paced_by(varied, 0.6);
    CHECK(learned.pace_exponent() == Approx(0.6).margin(1e-3));
    CHECK(learned.efficiency_factor() == Approx(1.0).epsilon(1e-3));  // the pace is not the estimator's error
    CHECK(learned.options().pace_exponent == Approx(0.6).margin(1e-3));
    // An estimate priced from probes carries it, so its trial is judged at it (core/machine_speed.h).
    EstimateOptions o = learned.options();
    ProbedRates rates;
    rates.speed_reference_s = 0.002;
    o.probed = std::make_shared<const ProbedRates>(rates);
    CHECK(estimate(config(Precision::fp32), *find_device("cpu"), o).pace_exponent == Approx(0.6).margin(1e-3));

    // The prior, 1, stands with too few trials or paces too close to tell.
    CHECK(paced_by({0.6, 0.8, 1.0, 1.25, 1.6, 2.0, 0.7}, 0.6).pace_exponent() == 1.0);
    CHECK(paced_by(std::vector<double>(10, 1.5), 0.6).pace_exponent() == 1.0);
    CHECK(paced_by(std::vector<double>(10, 1.0), 0.6).pace_exponent() == 1.0);
    // A step that slows as the reference does is learned as such.
    CHECK(paced_by(varied, 1.0).pace_exponent() == Approx(1.0).margin(1e-3));
}

TEST_CASE("on a GPU the step is not held to the speed reference's pace until trials show it",
          "[driver][calibration][machine-speed]") {
    // An H100's Llama-7B trials: the reference (a launch-bound 0.1 ms GEMM burst) read
    // 0.86-0.93 of the probes' while the steps kept the probes' pace.
    CHECK(prior_pace_exponent(BackendKind::cuda) == 0.0);
    CHECK(prior_pace_exponent(BackendKind::cpu) == 1.0);
    const std::vector<double> faster_reference{0.86, 0.9, 0.93};
    const Calibration gpu = paced_by(faster_reference, 0.0, {}, 0, BackendKind::cuda);
    CHECK(gpu.pace_exponent() == 0.0);
    CHECK(gpu.pace_prior() == 0.0);
    CHECK(gpu.efficiency_factor() == Approx(1.0).epsilon(1e-9));  // nothing to correct
    // The CPU's prior would read the same trials as 10% slower than their pace allowed.
    const Calibration cpu = paced_by(faster_reference, 0.0);
    CHECK(cpu.efficiency_factor() == Approx(0.9).epsilon(1e-3));
    // Trials at paces far enough apart still teach the exponent a GPU step follows.
    const std::vector<double> varied{0.6, 0.8, 1.0, 1.25, 1.6, 2.0, 0.7, 1.4, 0.9, 1.1};
    CHECK(paced_by(varied, 0.6, {}, 0, BackendKind::cuda).pace_exponent() == Approx(0.6).margin(1e-3));
}

TEST_CASE("one disturbed trial does not move the calibration (medians, not means)", "[driver][calibration]") {
    const Hardware cpu = *find_device("cpu");
    const TrialConfig c = config(Precision::fp32);
    const Estimate e = estimate(c, cpu);
    Calibration cal(EstimateOptions{});
    for (int i = 0; i < 5; ++i) cal.observe(measured(c, e, 0.5), e);
    cal.observe(measured(c, e, 0.05), e);  // 10x slower: another tenant, a page-cache flush
    CHECK(cal.efficiency_factor() == Approx(0.5));
}

TEST_CASE("a shift in one precision's factor counts as a calibration change", "[driver][calibration]") {
    const Hardware cpu = *find_device("cpu");
    const TrialConfig fp32 = config(Precision::fp32), bf16 = config(Precision::bf16_mixed);
    const Estimate e32 = estimate(fp32, cpu), e16 = estimate(bf16, cpu);
    Calibration cal(EstimateOptions{});
    cal.observe(measured(fp32, e32, 0.5), e32);
    cal.observe(measured(bf16, e16, 0.5), e16);
    const Calibration before = cal;
    cal.observe(measured(bf16, e16, 0.05), e16);
    cal.observe(measured(fp32, e32, 5.0), e32);  // the overall factor stays 0.5
    CHECK(cal.efficiency_factor() == Approx(before.efficiency_factor()));
    CHECK(cal.change_since(before) > 0.5);
}

TEST_CASE("failed trials teach nothing, overhead and memory error are kept", "[driver][calibration]") {
    const Hardware cpu = *find_device("cpu");
    const TrialConfig c = config(Precision::fp32);
    const Estimate e = estimate(c, cpu);
    Calibration cal(EstimateOptions{}, 0.02);
    TrialResult oom = measured(c, e, 2.0);
    oom.status = TrialStatus::oom;
    cal.observe(oom, e);
    CHECK(cal.observations() == 0);
    TrialResult off = measured(c, e, 1.0);
    off.memory.peak = e.memory.peak + e.memory.peak / 10;  // 10% over the estimate
    off.memory.bytes[static_cast<std::size_t>(Component::overhead)] = 1234;
    cal.observe(off, e);
    CHECK(cal.prune_tolerance() == Approx(0.15).epsilon(0.01));
    CHECK(cal.options().overhead_bytes == 1234u);
}

TEST_CASE("the overhead learned is what the machine held beyond the tagged components", "[driver][calibration]") {
    const Hardware cpu = *find_device("cpu");
    const TrialConfig c = config(Precision::fp32);
    const Estimate e = estimate(c, cpu);
    constexpr std::uint64_t kBaseline = 160u << 20, kUntracked = 33u << 20, kTagged = 900u << 20;
    TrialResult r = measured(c, e, 1.0);
    r.memory.peak = kTagged + kBaseline;
    r.memory.bytes[static_cast<std::size_t>(Component::overhead)] = kBaseline;
    r.baseline = kBaseline;
    r.untracked = static_cast<std::int64_t>(kUntracked);
    r.real_peak = kTagged + kBaseline + kUntracked;
    Calibration cal(EstimateOptions{}, 0.02);
    cal.observe(r, e);
    // The library memory no tag saw counts, so the next estimate meets the real peak.
    CHECK(cal.options().overhead_bytes == kBaseline + kUntracked);
    // Without a real peak (an older result), the tagged overhead alone, as before.
    TrialResult old = r;
    old.real_peak = 0;
    Calibration from_tags(EstimateOptions{}, 0.02);
    from_tags.observe(old, e);
    CHECK(from_tags.options().overhead_bytes == kBaseline);
}

TEST_CASE("the overhead is learned as a line in the activations: the pool's slack grows with them",
          "[driver][calibration]") {
    const Hardware h100 = *find_device("h100-80gb");
    const TrialConfig c = config(Precision::bf16_mixed);
    const Estimate e = estimate(c, h100);
    constexpr double kMiB = 1 << 20;
    // A trial whose peak held `activations` and, beyond its tagged components, 560 MiB + 4% of them.
    const auto trial = [&](double activations) {
        TrialResult r = measured(c, e, 1.0);
        r.memory.bytes[static_cast<std::size_t>(Component::activations)] = static_cast<std::uint64_t>(activations);
        r.memory.bytes[static_cast<std::size_t>(Component::overhead)] =
            static_cast<std::uint64_t>(560 * kMiB + 0.04 * activations);
        return r;
    };
    SECTION("trials far apart fit both terms") {
        Calibration cal(EstimateOptions{}, 0.02, 0.0);
        for (double act : {466 * kMiB, 4758 * kMiB, 1864 * kMiB}) cal.observe(trial(act), e);
        CHECK(static_cast<double>(cal.overhead().value()) == Approx(560 * kMiB).epsilon(1e-6));
        CHECK(cal.overhead_slope() == Approx(0.04).epsilon(1e-6));
        // The estimate carries it at its own activations: the largest seen would be 109 MiB high here.
        const Estimate calibrated = estimate(c, h100, cal.options());
        const double act = static_cast<double>(calibrated.memory[Component::activations]);
        CHECK(static_cast<double>(calibrated.memory[Component::overhead]) ==
              Approx(560 * kMiB + 0.04 * act).epsilon(1e-6));
    }
    SECTION("one trial, or trials alike in activations: the prior slope, through their mean") {
        Calibration cal(EstimateOptions{}, 0.02, prior_overhead_slope(BackendKind::cuda));
        cal.observe(trial(1000 * kMiB), e);
        CHECK(cal.overhead_slope() == prior_overhead_slope(BackendKind::cuda));
        CHECK(static_cast<double>(cal.overhead().value()) == Approx(560 * kMiB).epsilon(1e-6));
        TrialResult alike = trial(1020 * kMiB);  // within kMinOverheadSpread: no slope from these two
        alike.memory.bytes[static_cast<std::size_t>(Component::overhead)] += 10 << 20;
        cal.observe(alike, e);
        CHECK(cal.overhead_slope() == prior_overhead_slope(BackendKind::cuda));
        CHECK(static_cast<double>(cal.overhead().value()) == Approx(565 * kMiB).epsilon(1e-6));
    }
    CHECK(prior_overhead_slope(BackendKind::cpu) == 0.0);
}

TEST_CASE("calibration learns how speed grows with a micro-batch's tokens, and it reaches unseen sizes",
          "[driver][calibration]") {
    const std::vector<std::uint64_t> contexts{64, 128, 64, 128, 256, 64, 128, 64, 256, 128};
    const std::vector<double> slowdowns{0.6, 0.8, 1.0, 1.25, 1.6, 2.0, 0.7, 1.4, 0.9, 1.1};
    const Calibration learned = paced_by(slowdowns, 0.6, contexts, 0.14);
    CHECK(learned.size_exponent() == Approx(0.14).margin(1e-3));
    CHECK(learned.pace_exponent() == Approx(0.6).margin(1e-3));  // told apart from the pace
    // Context 512 never ran: its estimate moves by 4^0.14 against context 128's.
    const Hardware cpu = *find_device("cpu");
    TrialConfig small = config(Precision::fp32), large = small;
    small.context = 128, large.context = 512;
    const auto compute_s = [&](const TrialConfig& c, const EstimateOptions& o) {
        return step_time(c.model, c, cpu, o).compute_s;
    };
    const EstimateOptions o = learned.options();
    const double before = compute_s(large, EstimateOptions{}) / compute_s(small, EstimateOptions{});
    const double after = compute_s(large, o) / compute_s(small, o);
    CHECK(before / after == Approx(std::pow(4.0, 0.14)).epsilon(1e-3));

    // Without sizes far enough apart there is nothing to learn: 0, no effect.
    CHECK(paced_by(slowdowns, 0.6, std::vector<std::uint64_t>(10, 128), 0.14).size_exponent() == 0.0);
    const std::vector<double> seven(slowdowns.begin(), slowdowns.begin() + 7);
    CHECK(paced_by(seven, 0.6, {64, 128, 64, 128, 256, 64, 128}, 0.14).size_exponent() == 0.0);
    // And a step that scales as estimated is learned as such.
    CHECK(paced_by(slowdowns, 0.6, contexts, 0.0).size_exponent() == Approx(0.0).margin(1e-3));
}

TEST_CASE("pending estimates are made again once calibration moved by 1%", "[driver][calibration]") {
    const TrialConfig fp32 = config(Precision::fp32);
    const Estimate e = estimate(fp32, *find_device("cpu"));
    Calibration cal(EstimateOptions{});
    const auto trials_at = [&](int count, double ratio) {
        for (int i = 0; i < count; ++i) cal.observe(measured(fp32, e, ratio), e);
    };
    trials_at(3, 0.5);
    const Calibration before = cal;
    trials_at(4, 0.5 * 1.005);
    CHECK_FALSE(cal.moved_since(before));  // the median moved 0.5%
    trials_at(8, 0.5 * 1.02);
    CHECK(cal.moved_since(before));  // 2%: at 5% the trials would run with a stale estimate
}

TEST_CASE("offload's effect is learned and reaches the estimate, the host update's term with it",
          "[driver][calibration][offload]") {
    const Hardware cpu = *find_device("cpu");
    Calibration cal(EstimateOptions{});
    // Offloaded steps ran at 0.6 of the rest's pace, which ran at 0.5 of the estimate's.
    for (Offload off : {Offload::none, Offload::optimizer})
        for (Optimizer o : {Optimizer::adamw, Optimizer::lion}) {
            TrialConfig c = config(Precision::bf16_mixed);
            c.zero_stage = 2, c.offload = off, c.optimizer = o;
            const Estimate e = estimate(c, cpu);
            cal.observe(measured(c, e, 0.5 * (off == Offload::none ? 1.0 : 0.6)), e);
        }
    CHECK(cal.offload_factor(Offload::optimizer) / cal.offload_factor(Offload::none) == Approx(0.6));
    CHECK(cal.offload_factor(Offload::optimizer_params) == 1.0);  // never measured
    // On a GPU the host's update is a term of its own: the learned pace slows it too.
    TrialConfig gpu = config(Precision::bf16_mixed);
    gpu.zero_stage = 2, gpu.offload = Offload::optimizer;
    const Hardware h100 = *find_device("h100-80gb");
    EstimateOptions learned;
    learned.offload_efficiency[static_cast<std::size_t>(Offload::optimizer)] = 0.5;
    // (Twice, but for the gradient copies backward hides, which the slower compute hides more of.)
    CHECK(step_time(gpu.model, gpu, h100, learned).offload_s ==
          Approx(2 * step_time(gpu.model, gpu, h100, {}).offload_s).epsilon(0.05));
}
