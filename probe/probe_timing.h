// What every probe shares: timing an op as Google Benchmark does (one untimed
// call, then calls until a minimum time has passed, here in rounds whose median
// counts) and zero-filled backend scratch buffers (kernels/scratch.h).
#pragma once

#include <cstdint>
#include <functional>

#include "estimate/probed_rates.h"
#include "kernels/backend.h"
#include "kernels/scratch.h"

namespace tune::probe {

struct ProbeSettings {
    double min_seconds = 0.02;  // of timed calls per probe, after the untimed one, split into kRounds rounds
    // Each probe is the median over rounds of a round's seconds per call: a
    // round the host slowed (a neighbour, a frequency step) does not move it.
    static constexpr int kRounds = 5;
    // Run before every timed call, untimed (run_probes: a GEMM, for every probe
    // but the GEMMs'; gemm_primer). Empty: calls follow each other.
    std::function<void()> before_each_call;
};

// Seconds per call of `op`: one untimed call, then kRounds rounds of calls,
// each timed alone until their time adds up to min_seconds / kRounds, and the
// median round's time per call; `spent` (optional) receives the whole time,
// the untimed call and the before_each_call runs included.
//
// The time is not scaled by the speed reference (kernels/speed_reference.h)
// read around it: the reference is a short GEMM burst whose own noise such a
// scaling passes on to every probe, and steps need not follow it. A probe set
// records the reference once (run_probes), so a trial's pace can be set
// against the probes' (measured: the probes-and-pace file in docs/results/).
double seconds_per_call(kernels::Backend& backend, const std::function<void()>& op, const ProbeSettings& s,
                        double* spent);

// The speed reference's GEMM (kernels::ReferenceGemm, fp32 128^3) on scratch
// of its own, for ProbeSettings::before_each_call. In a step every other op
// follows GEMMs, and an op right after a GEMM runs slower than in a loop of
// its own (the core's clock after wide FMAs, and the caches the GEMM took), so
// the probes time it there.
std::function<void()> gemm_primer(kernels::Backend& backend);

// Writes Backend::private_cache_bytes of scratch of its own, for
// ProbeSettings::before_each_call: what an op's operands left in a core's
// cache is gone, as a step's other ops leave it between two calls of one op
// (no-op where the backend reports no such cache). A GEMM timed in a loop on
// the same buffers finds its operands cached, as no step's does.
std::function<void()> cache_displacer(kernels::Backend& backend);

// The probes time their ops on zero-filled backend scratch (kernels/scratch.h);
// the GEMMs, the element-wise ops and the optimizers fill theirs with noise first.
using kernels::Scratch;

}  // namespace tune::probe
