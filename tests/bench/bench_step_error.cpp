// The time model's accuracy on a finished sweep: median |step-time error| of
// the estimator against every ok trial's measured median step time, before
// any calibration (base settings) and after it, with and without probes.
//   build/bench/bench_step_error DB SWEEP_FILE [TUNE_BINARY]
// With TUNE_BINARY the probes (collectives included, under mpirun) are
// measured fresh here; without it only the nominal model is scored. "After"
// is scored two ways: online (each trial against the calibration learned
// from the trials recorded before it, as the sweep planned) and in-sample
// (the calibration of all trials applied to each). With TUNE_STEP_ERROR_CSV=FILE
// every trial's row goes there too: its dimensions, the measured median step,
// and the uncalibrated estimate of each model with its terms, for breaking
// the error down by dimension.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "driver/calibration.h"
#include "driver/collective_probes.h"
#include "driver/plan.h"
#include "estimate/estimate.h"
#include "estimate/estimate_time.h"
#include "probe/sweep_probes.h"
#include "store/store.h"
#include "sweep/spec.h"

namespace {

using namespace tune;

double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double error_pct(double estimated, double measured) { return 100 * std::fabs(estimated - measured) / measured; }

void score(const char* label, const SweepSpec& spec, const std::vector<TrialRecord>& ok, const EstimateOptions& base) {
    std::vector<double> before, online, in_sample;
    Calibration calibration(base);
    for (const TrialRecord& t : ok) {
        const TrialConfig& c = t.result.config;
        const Estimate uncalibrated = estimate(spec.model, c, spec.hardware, base);
        before.push_back(error_pct(uncalibrated.step_s, *t.median_step_s));
        if (calibration.observations() > 0)
            online.push_back(
                error_pct(estimate(spec.model, c, spec.hardware, calibration.options()).step_s, *t.median_step_s));
        TrialResult seen = t.result;
        seen.estimate = estimate(spec.model, c, spec.hardware, calibration.options());
        calibration.observe(seen, uncalibrated);
    }
    for (const TrialRecord& t : ok)
        in_sample.push_back(error_pct(
            estimate(spec.model, t.result.config, spec.hardware, calibration.options()).step_s, *t.median_step_s));
    fmt::print(
        "{:<10} trials {:>3} | median |step-time error|: before calibration {:5.1f}% | after, online {:5.1f}% "
        "| after, in-sample {:5.1f}%\n",
        label, ok.size(), median(before), median(online), median(in_sample));
}

// One row per trial and model: the dimensions, measured seconds, estimated seconds and terms.
void write_rows(std::FILE* out, const char* label, const SweepSpec& spec, const std::vector<TrialRecord>& ok,
                const EstimateOptions& base) {
    for (const TrialRecord& t : ok) {
        const TrialConfig& c = t.result.config;
        const StepTime s = step_time(spec.model, c, spec.hardware, base);
        fmt::print(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.4f}\n",
            label, t.id, to_string(c.optimizer), to_string(c.precision), c.zero_stage, c.grad_accum, c.micro_batch,
            c.context, to_string(c.checkpointing), to_string(c.attention), to_string(c.method), c.world_size,
            t.timed_steps, *t.median_step_s, s.step_s, s.compute_s, s.attention_s, s.optimizer_s, s.comm_s,
            s.dequantize_s, s.elementwise_s, t.step_cv.value_or(0));
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s DB SWEEP_FILE [TUNE_BINARY]\n", argv[0]);
        return 2;
    }
    SweepSpec spec = load_sweep(argv[2]);
    const Store store = Store::open_reader(argv[1]);
    const auto sweep = store.find_sweep(spec.name);
    if (!sweep) {
        std::fprintf(stderr, "no sweep %s in %s\n", spec.name.c_str(), argv[1]);
        return 2;
    }
    std::vector<TrialRecord> ok;
    for (auto& t : store.trials({sweep->id, TrialStatus::ok, false, false}))
        if (t.median_step_s && *t.median_step_s > 0) ok.push_back(std::move(t));
    // In the order they ran: the online calibration learns as the sweep did.
    std::stable_sort(ok.begin(), ok.end(),
                     [](const TrialRecord& a, const TrialRecord& b) { return a.started_at < b.started_at; });
    const EstimateOptions nominal = base_estimate_options(spec);
    std::FILE* csv = nullptr;
    if (const char* path = std::getenv("TUNE_STEP_ERROR_CSV"); path && *path) {
        csv = std::fopen(path, "w");
        if (csv)
            std::fputs(
                "model,id,optimizer,precision,zero,accum,micro,context,ckpt,attention,method,world,steps,"
                "measured_s,estimated_s,compute_s,attention_s,optimizer_s,comm_s,dequantize_s,elementwise_s,cv\n",
                csv);
    }
    score("nominal", spec, ok, nominal);
    if (csv) write_rows(csv, "nominal", spec, ok, nominal);
    if (argc > 3) {
        const std::uint32_t threads = cpu_threads_per_rank(spec);
        // TUNE_STEP_ERROR_PROBE_CACHE=FILE: probes measured once and reused from FILE, so
        // model changes are scored against the same rates.
        std::optional<Store> cache;
        if (const char* path = std::getenv("TUNE_STEP_ERROR_PROBE_CACHE"); path && *path)
            cache.emplace(path, Store::Mode::read_write);
        const probe::SweepProbes p =
            probe::probes_for_sweep(spec, threads, cache ? &*cache : nullptr, {"bench", "bench", ""}, !cache, {},
                                    collective_prober(spec, {argv[3], "probe-collectives"}, 0.02, threads));
        EstimateOptions probed = nominal;
        probed.probed = p.rates;
        fmt::print("probes: {} {} in {:.1f} s ({} collectives)\n", p.records.size(), p.cached ? "cached" : "measured",
                   p.seconds, p.rates->collectives.size());
        score("probed", spec, ok, probed);
        if (csv) write_rows(csv, "probed", spec, ok, probed);
    }
    if (csv) std::fclose(csv);
    return 0;
}
