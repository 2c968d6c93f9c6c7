// The best measured configuration under the user's constraints, and why
// nothing qualifies when nothing does. Used by `tune best` and the reports.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/dimensions.h"
#include "store/records.h"

namespace tune {

class Store;

enum class BestBy { tokens_per_s, peak_memory };

// What an answer's numbers are: measured by trials, or predicted by the estimator
// for configurations not measured (labelled "predicted" wherever they are shown).
enum class Basis { measured, predicted };
inline std::string_view to_string(Basis b) { return b == Basis::measured ? "measured" : "predicted"; }

// An export target as the ranking sees it: its name, and why it cannot write a configuration exactly
// (exports/expressible.h; nullopt when it can). What it cannot write is ranked out of the answer,
// counted, and the reason of the best of them kept.
struct EmitTarget {
    std::string name;
    std::function<std::optional<std::string>(const TrialConfig&)> inexpressible;
};

struct BestQuery {
    std::optional<std::string> sweep;              // every sweep when unset
    std::optional<std::uint64_t> max_memory;       // measured peak bytes per rank
    std::optional<std::uint64_t> max_host_memory;  // host bytes per node offload keeps there (none: 0)
    std::optional<std::uint32_t> min_context;
    std::optional<std::uint32_t> gpus;  // world size, exactly
    // Search dimensions that must equal a value: (index into dimensions(), value).
    std::vector<std::pair<std::size_t, DimValue>> equal;
    BestBy by = BestBy::tokens_per_s;
    std::size_t top = 5;  // best plus runners-up
    // Rank configurations with a convergence risk (core/convergence_risk) among the rest; by default
    // every configuration without one ranks first, and the best risky one is offered as the alternative.
    bool allow_risk = false;
    // The stack to answer for (estimate/frameworks' names; "tune" is our engine). Unset: each
    // trial's sweep's [framework]. Under a stack, what fits and the peak are its predicted device
    // memory; measured throughput still ranks (our engine's measurement of the configuration).
    std::optional<std::string> framework;
    // The target the answer is written for (`tune best --emit F`); unset, every configuration qualifies.
    std::optional<EmitTarget> emit;
};

struct BestAnswer {
    Basis basis = Basis::measured;
    std::vector<TrialRecord> ranked;    // best first, at most `top`
    std::vector<bool> on_front;         // per ranked: on the Pareto front of the qualifying trials
    std::size_t qualifying = 0;         // ok trials (predicted: fitting estimates) meeting every constraint
    std::size_t measured_ok = 0;        // ok trials in scope (predicted: unmeasured configurations predicted to fit)
    std::vector<std::string> why_none;  // when nothing qualifies: one sentence per cause
    // Measured, by tokens/s: the qualifying trials (shown or not) whose throughput is within
    // noise of the best's, best first (core/noise_ties.h); empty when none ties with it.
    std::vector<TrialId> tied_with_best;
    // Without allow_risk, when a configuration with a convergence risk outranks the best: the best of
    // those, which the answer shows beside the best as an alternative with what it gains.
    std::optional<TrialRecord> risky_alternative;
    // The stack the answer's peaks predict for ("tune": our engine's numbers), and the trials the
    // stack left out before ranking: it cannot run them, or they do not fit in its prediction.
    std::string framework = "tune";
    std::size_t framework_cannot_run = 0;
    std::size_t framework_does_not_fit = 0;
    std::size_t framework_unpredicted = 0;  // recorded before predictions were kept: ranked with our engine's numbers
    // Configurations meeting every constraint that the query's emit target cannot write exactly, ranked
    // out, and the best of them with its reason: "trial 3: Adafactor under ZeRO: ...".
    std::size_t inexpressible = 0;
    std::string inexpressible_example;
};

// The numbers a ranking reads: measured, or the estimator's for predicted answers. Under a
// stack (answered_for), the peak is its predicted device memory for either basis, and a
// predicted answer's tokens/s its prediction.
std::uint64_t answer_peak(const TrialRecord& t, Basis b);
double answer_tokens_per_s(const TrialRecord& t, Basis b);

// What the alternative gains over the best by the query's order: "+12% tokens/s" or "-20% peak memory".
std::string alternative_gain(const BestAnswer& a, BestBy by);

// Ranking: by tokens/s (higher first; ties to the lower peak) or by peak memory
// (lower first; ties to the higher tokens/s); remaining ties to the earlier trial;
// configurations with a convergence risk after all others unless allow_risk.
// Throws ConfigError when the named sweep does not exist.
BestAnswer find_best(const Store& store, const BestQuery& query);

// The same over the estimates of the configurations not measured (pending or
// running) that are predicted to fit; constraints and ranking read the estimate.
BestAnswer find_best_predicted(const Store& store, const BestQuery& query);
BestAnswer rank_predicted(std::vector<TrialRecord> trials, const BestQuery& query);

// The same over records already loaded (status ok expected); `scope_counts`
// describes the scope's statuses when no trial finished ok.
BestAnswer rank_best(std::vector<TrialRecord> ok_trials, const BestQuery& query, const StatusCounts& scope_counts);

}  // namespace tune
