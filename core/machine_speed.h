// How much slower the machine ran during a trial than when the rates behind
// its step-time estimate were probed: the trial's speed-reference time over
// the one taken with the probes (kernels/speed_reference.h). The time model
// predicts the step at the probes' machine speed; a shared or throttled host
// moves every step with this slowdown whatever the configuration, so the
// estimator's own error is measured against the step scaled back by it, and
// calibration learns from the scaled step, not from the host's mood.
//
// A step does not slow exactly as the reference does: the reference is a
// compute-bound GEMM, and a neighbour competing for the core's vector units
// slows it more than a step's latency-bound ops, allocations and collectives.
// On the 2-core CI VM, steps slowed as the reference's time to the power
// 0.45 to 0.65 over five demo sweeps. The exponent is the estimate's
// (Estimate::pace_exponent): prior_pace_exponent until calibration learns it.
#pragma once

#include "core/config.h"

namespace tune {

// trial / probes; 1 when either is unknown (a nominal estimate, a result from
// before the reference existed).
double machine_slowdown(double trial_reference_s, double estimate_reference_s);
double machine_slowdown(const TrialResult& r);  // against r.estimate's reference

// The exponent before calibration has seen trials at different paces. A CPU
// step shares its cores' pace with the reference: 1. A GPU step does not: the
// reference (eight 128^3 GEMMs, 0.1 ms) times the host's launches, not the
// device's throughput, so a GPU trial's reference moves without its step
// (the probes-and-pace file in docs/results/, "The machine's pace"): the prior is 0.
double prior_pace_exponent(BackendKind backend);

// How much longer than its estimate the trial's step should take from the
// machine's pace alone: slowdown^exponent.
double pace_factor(double slowdown, double exponent);
double pace_factor(const TrialResult& r);  // r.estimate's reference and exponent

}  // namespace tune
