// The wall time of one trial process: a fixed part (process and MPI start,
// model set-up, the speed reference between steps) plus its steps at the
// estimated step time. The fixed part starts from a prior per backend and rank
// count and is learned from the trials that finish, as each one's wall time
// less the steps it timed, so the remaining time of a running sweep follows
// the machine it runs on.
#pragma once

#include <cstddef>
#include <vector>

#include "core/config.h"
#include "sweep/spec.h"

namespace tune {

class TrialCost {
public:
    explicit TrialCost(const SweepSpec& spec);

    // Seconds of one trial process with estimate `e`.
    double trial_s(const Estimate& e) const;
    // A finished trial: `wall_s` of its process, its steps in r.step_ms (none: not counted).
    void observe(double wall_s, const TrialResult& r);
    // The fixed part: the median of the observed ones, else the prior.
    double fixed_s() const { return fixed_median_s_; }
    std::size_t observations() const { return fixed_.size(); }

private:
    double prior_s_;
    std::uint32_t steps_;  // the steps a trial runs at least, warmup included ([trial] steps)
    std::vector<double> fixed_;
    double fixed_median_s_;  // kept as trials are observed: a makespan asks for it once a pending trial
};

}  // namespace tune
