// The answer a reader of a report came for: for each memory budget and each
// context length of the sweep, the fastest configuration that fits. A measured
// one when a trial that fits finished ok; otherwise the estimator's best among
// the configurations not measured, labelled predicted. Budgets are the sweep's
// memory limit and the common device sizes below it (24, 40, 80 GiB) that
// something fits in. Configurations with a convergence risk answer only where
// nothing else fits, unless the reader allows them. At the sweep's limit every trial that ran ok and every
// prediction that fits qualifies; below it the peak must be within the budget.
// The ranking is `tune best`'s (store/best), so the panel and
// `tune best --max-memory B` agree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/sweep_data.h"
#include "store/best.h"

namespace tune {

struct WhatToRunRow {
    std::uint64_t budget = 0;      // bytes per GPU
    bool budget_is_limit = false;  // the sweep's own memory limit
    std::uint32_t context = 0;
    std::optional<std::size_t> trial;  // index into SweepData::trials; nullopt: nothing fits
    Basis basis = Basis::measured;     // what the trial's numbers are
    // Without allow_risk: the faster configuration with a convergence risk the answer passed over
    // (index into SweepData::trials), and what it gains ("+12% tokens/s").
    std::optional<std::size_t> alternative;
    std::string alternative_gain;
    // Under the sweep's [framework]: that stack's prediction for the answer, whose device memory is
    // the peak shown (store/best answers for the stack).
    std::optional<FrameworkPrediction> framework;
};

// What the reader fixes before asking: whether configurations with a convergence risk rank with the
// rest (`tune best --allow-risk`), and the optimizer, which changes how training converges as well as
// its speed and memory (`tune best --optimizer X`).
struct WhatToRunChoice {
    bool allow_risk = false;
    std::optional<Optimizer> optimizer;
};

// Common device memory sizes a reader may be choosing between.
inline constexpr std::uint64_t kCommonBudgetsGiB[] = {24, 40, 80};

// The budgets the panel shows, smallest first.
std::vector<std::uint64_t> what_to_run_budgets(const SweepData& sweep);

// One row per budget and context (budget outermost, both ascending).
std::vector<WhatToRunRow> what_to_run(const SweepData& sweep, const WhatToRunChoice& choice = {});

// The optimizers the sweep's configurations use, in the dimension's order.
std::vector<Optimizer> sweep_optimizers(const SweepData& sweep);

// The peak and tokens/s a row's answer stands on: measured, or the estimate.
std::uint64_t answer_peak(const SweepData& sweep, const WhatToRunRow& row);
double answer_tokens_per_s(const SweepData& sweep, const WhatToRunRow& row);

// "trial 12 (lion bf16 z1 ...): +12% tokens/s", or empty without an alternative.
std::string alternative_text(const SweepData& sweep, const WhatToRunRow& row);

// "40.00 GiB" or "2.50 MiB (the sweep's memory limit)".
std::string budget_text(const WhatToRunRow& row);

}  // namespace tune
