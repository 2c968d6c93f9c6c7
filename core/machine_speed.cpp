#include "core/machine_speed.h"

#include <cmath>

namespace tune {

double machine_slowdown(double trial_reference_s, double estimate_reference_s) {
    if (!(trial_reference_s > 0) || !(estimate_reference_s > 0)) return 1.0;
    return trial_reference_s / estimate_reference_s;
}

double machine_slowdown(const TrialResult& r) {
    return machine_slowdown(r.speed_reference_s, r.estimate ? r.estimate->speed_reference_s : 0.0);
}

double pace_factor(double slowdown, double exponent) { return std::pow(slowdown, exponent); }

double pace_factor(const TrialResult& r) {
    return pace_factor(machine_slowdown(r), r.estimate ? r.estimate->pace_exponent : 1.0);
}

double prior_pace_exponent(BackendKind backend) { return backend == BackendKind::cuda ? 0.0 : 1.0; }

}  // namespace tune
