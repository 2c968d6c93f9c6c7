// What every probe shares: timing an op as Google Benchmark does (one untimed
// call, then calls until a minimum time has passed), zero-filled backend
// scratch buffers (kernels/scratch.h), and the backend dtype of a probe's dtype.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/backend.h"
#include "kernels/scratch.h"
#include "search/probed_rates.h"

namespace tune::probe {

struct ProbeSettings {
    double min_seconds = 0.02;  // per probe, after the untimed run
    // The machine speed every probe's time is scaled to (seconds of the speed
    // reference, kernels/speed_reference.h); run_probes sets it, 0 scales nothing.
    double speed_reference_s = 0;
};

// Seconds per call of `op`: one untimed call, then calls until min_seconds
// passed; `spent` (optional) receives the whole time, untimed call included.
// With a speed reference in the settings the time is scaled to the machine
// speed it stands for: the reference runs before and after, and their mean
// against it says how much slower the machine ran meanwhile, so every probe of
// a set speaks for one machine speed even when the host changed pace between
// probes.
double seconds_per_call(kernels::Backend& backend, const std::function<void()>& op, const ProbeSettings& s,
                        double* spent);

kernels::DType dtype_of(ProbeDtype d);

// The probes time their ops on zero-filled backend scratch (kernels/scratch.h).
using kernels::Scratch;

}  // namespace tune::probe
