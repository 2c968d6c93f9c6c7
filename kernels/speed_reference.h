// A fixed workload timed beside every probe set and between every trial step.
// Its time follows how fast the machine runs at that moment (another tenant
// on the same host, clock changes), not the configuration: on the 2-core CI
// VM a 128^3 sgemm loop ran anywhere from 13 to 22 GFLOP/s within a minute
// at a load below 1. The ratio of a trial's reference time to the one taken
// with the probes says how much slower the machine was during the trial than
// when the time model's rates were measured (core/machine_speed.h).
#pragma once

#include "kernels/backend.h"

namespace tune::kernels {

struct SpeedReference {
    static constexpr std::int64_t kSize = 128;  // C (n, n) = A (n, n) B (n, n), fp32
    static constexpr int kCalls = 8;            // about 2 ms on one core of the CI VM
};

// Seconds of SpeedReference::kCalls GEMMs on `backend`, after one untimed
// call. Its three (n, n) buffers are allocated for the call and freed before
// it returns, so between a trial's steps they never add to the step's peak.
double time_speed_reference(Backend& backend);

}  // namespace tune::kernels
