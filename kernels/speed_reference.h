// A fixed workload timed beside every probe set and between every trial step.
// Its time follows how fast the machine runs at that moment (another tenant
// on the same host, clock changes), not the configuration: on the 2-core CI
// VM a 128^3 sgemm loop ran anywhere from 13 to 22 GFLOP/s within a minute
// at a load below 1. The ratio of a trial's reference time to the one taken
// with the probes says how much slower the machine was during the trial than
// when the time model's rates were measured (core/machine_speed.h).
#pragma once

#include "kernels/backend.h"
#include "kernels/scratch.h"

namespace tune::kernels {

struct SpeedReference {
    static constexpr std::int64_t kSize = 128;  // C (n, n) = A (n, n) B (n, n), fp32
    static constexpr int kCalls = 8;            // about 2 ms on one core of the CI VM
};

// One SpeedReference GEMM on zero-filled scratch of its own, freed with it:
// what the reference times, and what the probes run before an op as a step
// would (probe/probe_timing.h gemm_primer).
class ReferenceGemm {
public:
    explicit ReferenceGemm(Backend& backend);
    void run();  // queued on the backend: synchronize to wait for it

private:
    static constexpr std::uint64_t kBytes = SpeedReference::kSize * SpeedReference::kSize * sizeof(float);
    Scratch a_, b_, c_;
    GemmArgs args_;
    std::uint64_t ws_bytes_;
    Scratch ws_;
};

// Seconds of SpeedReference::kCalls GEMMs on `backend`, after one untimed
// call. Its three (n, n) buffers are allocated for the call and freed before
// it returns, so between a trial's steps they never add to the step's peak.
double time_speed_reference(Backend& backend);

}  // namespace tune::kernels
