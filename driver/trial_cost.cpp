#include "driver/trial_cost.h"

#include <algorithm>
#include <numeric>

namespace tune {
namespace {

// Priors for the fixed part. CPU: the demo's two-rank trials of the tiny model spent a median
// 0.45 s outside their steps on the 2-core development machine (262 trials, p10-p90 0.43-0.48 s).
// CUDA adds its context and NCCL set-up (a guess until measured on a GPU).
constexpr double kCpuStartupS = 0.25;
constexpr double kCudaStartupS = 8.0;
constexpr double kPerExtraRankS = 0.2;

}  // namespace

TrialCost::TrialCost(const SweepSpec& spec)
    : prior_s_((spec.hardware.backend == BackendKind::cuda ? kCudaStartupS : kCpuStartupS) +
               kPerExtraRankS * (spec.world_size() - 1)),
      steps_(spec.trial.steps),
      fixed_median_s_(prior_s_) {}

double TrialCost::trial_s(const Estimate& e) const { return fixed_s() + e.step_s * steps_; }

void TrialCost::observe(double wall_s, const TrialResult& r) {
    if (r.step_ms.empty() || !(wall_s > 0)) return;
    const double steps_s = std::accumulate(r.step_ms.begin(), r.step_ms.end(), 0.0,
                                           [](double sum, double ms) { return ms > 0 ? sum + ms / 1000 : sum; });
    fixed_.push_back(std::max(0.0, wall_s - steps_s));
    std::vector<double> sorted = fixed_;
    const auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
    std::nth_element(sorted.begin(), middle, sorted.end());
    fixed_median_s_ = *middle;
}

}  // namespace tune
