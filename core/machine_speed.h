// How much slower the machine ran during a trial than when the rates behind
// its step-time estimate were probed: the trial's speed-reference time over
// the one taken with the probes (kernels/speed_reference.h). The time model
// predicts the step at the probes' machine speed; a shared or throttled host
// moves every step by this factor whatever the configuration, so the
// estimator's own error is measured against the step scaled back by it, and
// calibration learns from the scaled step, not from the host's mood.
#pragma once

#include "core/config.h"

namespace tune {

// trial / probes; 1 when either is unknown (a nominal estimate, a result from
// before the reference existed).
double machine_slowdown(double trial_reference_s, double estimate_reference_s);
double machine_slowdown(const TrialResult& r);  // against r.estimate's reference

}  // namespace tune
