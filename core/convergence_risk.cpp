#include "core/convergence_risk.h"

namespace tune {

std::optional<std::string_view> convergence_risk(const TrialConfig& c) {
    if (c.precision != Precision::bf16 || has_master_weights(c.precision)) return std::nullopt;
    return "pure bf16 keeps no fp32 master weights: updates below bf16's precision (about 0.4% of a weight) round "
           "away, so training may stall or diverge where bf16-mixed converges; check the loss against a bf16-mixed run";
}

}  // namespace tune
