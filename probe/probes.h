// Micro-benchmarks of what the time model needs (search/probed_rates.h),
// run on a kernels::Backend at a sweep's own shapes: every GEMM of a layer
// and the LM head at each tokens-per-micro-batch and dtype the sweep holds,
// attention forward and backward per shape, the element-wise ops, and each
// optimizer's update in each precision (probe/optimizer_probe.h). Each probe repeats its op until a minimum time has passed
// (after one untimed run), as Google Benchmark does.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "kernels/backend.h"
#include "probe/probe_timing.h"
#include "search/probed_rates.h"

namespace tune::probe {

// One measured number, as `tune probe` prints it and the store caches it.
struct ProbeRecord {
    std::string name;  // "gemm f32 m=256 n=64 k=64" (see rates_of / records_of)
    double value = 0;
    std::string unit;  // "FLOP/s", "s", "B/s"
    double seconds = 0;  // how long the probe ran
};

// The shapes a sweep's configurations will ask the time model about (rates 0);
// the optimizer probes cut at optimizer_elements (search/probed_rates.h says
// which size a backend needs).
ProbedRates plan_probes(const ModelSpec& model, const std::vector<TrialConfig>& configs,
                        std::int64_t optimizer_elements = kOptimizerProbeElements);

// Runs every probe of `plan` on `backend`; the rates filled in. Collectives need
// ranks: they are left as planned (see CollectiveProber).
ProbedRates run_probes(kernels::Backend& backend, const ProbedRates& plan, const ProbeSettings& settings,
                       std::vector<ProbeRecord>* records = nullptr);

// A collective's record name, "busbw all-reduce n=2 bytes=262144" (its value: bus bandwidth, B/s), and back.
std::string collective_record_name(const CollectiveRate& c);
std::optional<CollectiveRate> parse_collective_record(const std::string& name);

// An optimizer's record name, "optimizer adam8bit bf16-mixed block=256 tensors=1x64,64x64,..."
// (its value: seconds per pass over the tensors), and back.
std::string optimizer_record_name(const OptimizerRate& r);
std::optional<OptimizerRate> parse_optimizer_record(const std::string& name);

// Measures planned collectives at their rank counts (under mpirun or srun: the
// CLI starts the ranks) and returns them with bus_bytes_per_s and the seconds
// each took; a rank count it could not start is left out.
struct CollectiveResult {
    CollectiveRate rate;
    double seconds = 0;
};
using CollectiveProber = std::function<std::vector<CollectiveResult>(const std::vector<CollectiveRate>& plan)>;

// The rates as records (names carry the shapes) and back; unknown names are skipped.
std::vector<ProbeRecord> records_of(const ProbedRates& rates);
ProbedRates rates_of(const std::vector<ProbeRecord>& records);

}  // namespace tune::probe
