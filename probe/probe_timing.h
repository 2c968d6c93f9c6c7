// What every probe shares: timing an op as Google Benchmark does (one untimed
// call, then calls until a minimum time has passed, here in rounds whose median
// counts), zero-filled backend scratch buffers (kernels/scratch.h), and the
// backend dtype of a probe's dtype.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/backend.h"
#include "kernels/scratch.h"
#include "search/probed_rates.h"

namespace tune::probe {

struct ProbeSettings {
    double min_seconds = 0.02;  // per probe, after the untimed run, split into kRounds rounds
    // Each probe is the median over rounds of a round's seconds per call: a
    // round the host slowed (a neighbour, a frequency step) does not move it.
    static constexpr int kRounds = 5;
};

// Seconds per call of `op`: one untimed call, then kRounds rounds of calls,
// each until min_seconds / kRounds passed, and the median round's time per
// call; `spent` (optional) receives the whole time, untimed call included.
//
// The time is not scaled by the speed reference (kernels/speed_reference.h)
// read around it, as it once was: on the CI VM of 2026-11-26 that scaling
// made three probe sets of one machine differ by a median 7.5-8.8% per probe,
// unscaled they differ by 1.2-2.4%. The reference is a single 0.3 ms GEMM
// burst whose own noise it passed on to every probe, and steps there did not
// follow it (calibration learned pace exponents of 0.02-0.10). A probe set
// still records the reference once (run_probes), so a trial's pace can be
// set against the probes'.
double seconds_per_call(kernels::Backend& backend, const std::function<void()>& op, const ProbeSettings& s,
                        double* spent);

kernels::DType dtype_of(ProbeDtype d);

// The probes time their ops on zero-filled backend scratch (kernels/scratch.h).
using kernels::Scratch;

}  // namespace tune::probe
