#include "reports/front_ties.h"

#include <fmt/format.h>

#include "core/noise_ties.h"

namespace tune {

std::vector<std::string> front_tie_marks(std::span<const TrialRecord* const> front) {
    std::vector<NoisyRate> rates;
    for (const TrialRecord* t : front) rates.push_back(t->noisy_rate());
    std::vector<std::string> marks;
    for (const auto& tie : front_ties(rates)) marks.push_back(tie ? fmt::format("= trial {}", front[*tie]->id) : "");
    return marks;
}

std::vector<std::string> front_tie_marks(const SweepData& sweep) {
    std::vector<const TrialRecord*> front;
    for (std::size_t i : sweep.front) front.push_back(&sweep.trials[i]);
    return front_tie_marks(front);
}

std::vector<std::string> front_noise_texts(const SweepData& sweep) {
    std::vector<std::string> out;
    for (std::size_t i : sweep.front) {
        const TrialRecord& t = sweep.trials[i];
        out.push_back(t.step_cv ? fmt::format("{:.1f}% (n={})", 100 * *t.step_cv, t.timed_steps) : "");
    }
    return out;
}

std::string front_tie_legend() {
    return fmt::format(
        "tie \"= trial N\": its tokens/s is within noise of trial N, which needs less memory "
        "(throughput intervals from the median step time +/- {:g} x stddev / sqrt(timed steps) "
        "overlap), so its extra memory buys no measurable speed. noise: the coefficient of "
        "variation of the timed steps.",
        kNoiseSigmas);
}

}  // namespace tune
