#include "reports/funnel.h"

namespace tune {

std::vector<FunnelStage> funnel(const SweepSummary& s) {
    using S = TrialStatus;
    const std::uint64_t run = s.count(S::ok) + s.count(S::oom) + s.count(S::failed) + s.count(S::timeout);
    std::vector<FunnelStage> out{
        {"enumerated", s.total(), 0, "configurations in the sweep's space"},
        {"invalid", s.count(S::invalid), 1, "combinations the trainer cannot express"},
        {"pruned", s.count(S::pruned), 1, "never run: the estimator said they cannot fit"},
        {"run", run, 1, "started as real training steps"},
        {"ok", s.count(S::ok), 2, "finished and measured"},
        {"oom", s.count(S::oom), 2, "ran out of device memory"},
        {"failed", s.count(S::failed), 2, "crashed or reported an error"},
        {"timeout", s.count(S::timeout), 2, "killed after the trial timeout"},
    };
    const std::uint64_t waiting = s.count(S::pending) + s.count(S::running);
    if (waiting != 0) out.push_back({"not run yet", waiting, 1, "pending or running when the report was written"});
    return out;
}

}  // namespace tune
