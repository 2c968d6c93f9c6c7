// Micro-benchmarks of what the time model needs (estimate/probed_rates.h),
// run on a kernels::Backend at a sweep's own shapes: every GEMM of a layer
// and the LM head at each tokens-per-micro-batch and dtype the sweep holds,
// attention forward and backward per shape, the element-wise ops, and each
// optimizer's update in each precision (probe/optimizer_probe.h). Each probe repeats its op until a minimum time has
// passed (after one untimed run), as Google Benchmark does.
#pragma once

#include <functional>
#include <vector>

#include "core/config.h"
#include "estimate/probed_rates.h"
#include "kernels/backend.h"
#include "probe/probe_records.h"
#include "probe/probe_timing.h"

namespace tune::probe {

// The shapes a sweep's configurations will ask the time model about (rates 0);
// the optimizer probes cut at optimizer_elements (estimate/probed_rates.h says
// which size a backend needs). widening_backend: the CPU backend's GEMMs, which
// fuse no 16-bit projections (estimate/gemm_calls.h layer_gemm_calls).
ProbedRates plan_probes(const ModelSpec& model, const std::vector<TrialConfig>& configs,
                        std::int64_t optimizer_elements = kOptimizerProbeElements, bool widening_backend = true);

// Runs every probe of `plan` on `backend`; the rates filled in. Collectives need
// ranks: they are left as planned (see CollectiveProber).
ProbedRates run_probes(kernels::Backend& backend, const ProbedRates& plan, const ProbeSettings& settings,
                       std::vector<ProbeRecord>* records = nullptr);

// Measures planned collectives at their rank counts (under mpirun or srun: the
// CLI starts the ranks) and returns them with bus_bytes_per_s and the seconds
// each took; a rank count it could not start is left out.
struct CollectiveResult {
    CollectiveRate rate;
    double seconds = 0;
};
using CollectiveProber = std::function<std::vector<CollectiveResult>(const std::vector<CollectiveRate>& plan)>;

}  // namespace tune::probe
