#include "core/noise_rule.h"

#include "core/step_statistics.h"

namespace tune {

bool needs_more_steps(const std::vector<double>& step_ms, std::size_t warmup, const NoiseRule& rule) {
    if (rule.max_cv <= 0 || step_ms.size() >= rule.max_steps) return false;
    return step_statistics(step_ms, warmup).cv > rule.max_cv;
}

}  // namespace tune
