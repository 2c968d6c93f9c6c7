#include "probe/sweep_probes.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "sweep/space.h"

namespace tune::probe {
namespace {

std::vector<TrialConfig> runnable_configs(const SweepSpec& spec) {
    std::vector<TrialConfig> out;
    for (const Candidate& c : expand_space(spec))
        if (c.valid()) out.push_back(c.config);
    return out;
}

std::unique_ptr<kernels::Backend> backend_for(const SweepSpec& spec, std::uint32_t threads) {
    if (spec.hardware.backend == BackendKind::cuda) return kernels::make_cuda_backend(0);
    return std::make_unique<kernels::CpuBackend>(kernels::CpuBackendOptions{static_cast<int>(threads), 0});
}

// Why a cached row cannot be a measurement of the probe, or nullopt. The bounds are beyond any device
// (100 PFLOP/s, 100 TB/s, an hour per call, a PiB): a row outside them was damaged or written by a
// broken probe, and would price every estimate of the sweep at it.
std::optional<std::string> implausible(const ProbeRow& row, const ProbeRecord& wanted) {
    if (row.unit != wanted.unit) return fmt::format("is in {}, not {}", row.unit, wanted.unit);
    const double v = row.value;
    const bool in_range = wanted.unit == "FLOP/s" ? v >= 1e3 && v <= 1e17
                          : wanted.unit == "B/s"  ? v >= 1e3 && v <= 1e14
                          : wanted.unit == "s"    ? v > 0 && v <= 3600
                                                  : v >= 0 && v <= 1e18;
    if (!std::isfinite(v) || !in_range) return fmt::format("holds {} {}, which no device measures", v, row.unit);
    return std::nullopt;
}

// The cached rows when they hold every probe the plan asks for, in the plan's order, each a plausible
// measurement (else the probes run again, and `why` says which row was refused). Rows are keyed
// by the records' keys (probe_records.h), so a name reworded for people still finds its row.
std::optional<std::vector<ProbeRecord>> from_cache(const std::vector<ProbeRow>& rows,
                                                   const std::vector<ProbeRecord>& wanted, std::string& why) {
    std::vector<ProbeRecord> out;
    for (const ProbeRecord& w : wanted) {
        const auto it = std::find_if(rows.begin(), rows.end(), [&](const ProbeRow& r) { return r.probe == w.key; });
        if (it == rows.end()) return std::nullopt;
        if (auto problem = implausible(*it, w)) {
            why = fmt::format("the cached probe '{}' {}", w.name, *problem);
            return std::nullopt;
        }
        out.push_back({w.name, w.key, it->value, it->unit, it->seconds});
    }
    return out;
}

}  // namespace

std::string probe_software(const SoftwareVersions& v) {
    return fmt::format("tune {} {} cuda {} driver {}", v.tune_version, v.git_commit, v.cuda, v.driver);
}

SweepProbes probes_for_sweep(const SweepSpec& spec, std::uint32_t threads, Store* store, ProbeKey key, bool refresh,
                             const ProbeSettings& settings, const CollectiveProber& collectives) {
    const bool gpu = spec.hardware.backend == BackendKind::cuda;
    key.device = gpu ? spec.hardware.device : fmt::format("{} threads={}", spec.hardware.device, threads);
    ProbedRates plan = plan_probes(spec.model, runnable_configs(spec),
                                   gpu ? kDeviceOptimizerProbeElements : kOptimizerProbeElements, !gpu);
    if (!collectives) plan.collectives.clear();
    if (gpu) plan.device_baseline_bytes = 0;  // asked for: a cache without it is measured again
    SweepProbes out;
    if (store != nullptr && !refresh) {
        std::string why;
        if (auto cached = from_cache(store->cached_probes(key), records_of(plan), why)) {
            out.records = std::move(*cached);
            out.rates = std::make_shared<const ProbedRates>(rates_of(out.records));
            out.cached = true;
            return out;
        }
        if (!why.empty()) fmt::print(stderr, "warning: {}: measuring again\n", why);
    }
    const auto start = std::chrono::steady_clock::now();
    ProbedRates rates;
    {
        const std::unique_ptr<kernels::Backend> backend = backend_for(spec, threads);
        rates = run_probes(*backend, plan, settings, &out.records);
    }
    // Released, or the driver's CUDA context stays on the device through every trial and
    // each trial's baseline reads the driver's context beside its own.
    if (gpu) kernels::release_cuda_device(0);
    if (!plan.collectives.empty())
        for (const CollectiveResult& c : collectives(plan.collectives)) {
            rates.collectives.push_back(c.rate);
            out.records.push_back(
                {collective_record_name(c.rate), probe_key(c.rate).dump(), c.rate.bus_bytes_per_s, "B/s", c.seconds});
        }
    out.rates = std::make_shared<const ProbedRates>(std::move(rates));
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (store != nullptr) {
        std::vector<ProbeRow> rows;
        for (const ProbeRecord& r : out.records) rows.push_back({r.key, r.value, r.unit, r.seconds});
        store->cache_probes(key, rows);
    }
    return out;
}

}  // namespace tune::probe
