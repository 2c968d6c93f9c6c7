#include "driver/trial_child.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "launch/launch.h"
#include "driver/plan.h"

namespace tune {
namespace {

// The trial prints its result as the last line of stdout.
std::optional<TrialResult> parse_last_line(const std::string& out) {
    std::size_t end = out.find_last_not_of(" \t\r\n");
    if (end == std::string::npos) return std::nullopt;
    const std::size_t newline = out.rfind('\n', end);
    const std::size_t start = newline == std::string::npos ? 0 : newline + 1;
    const std::string line = out.substr(start, end - start + 1);
    try {
        return nlohmann::json::parse(line).get<TrialResult>();
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// The last line of `text` that starts with `prefix`, without it ("" if none).
std::string last_line(const std::string& text, std::string_view prefix) {
    const std::size_t at = text.rfind(prefix);
    if (at == std::string::npos) return {};
    const std::size_t end = text.find('\n', at);
    return text.substr(at + prefix.size(), end == std::string::npos ? std::string::npos : end - at - prefix.size());
}

TrialResult without_result(const ProcessOutcome& outcome) {
    TrialResult r;
    if (outcome.timed_out) {
        r.status = TrialStatus::timeout;
        r.reason = fmt::format("no result within the trial timeout ({:.0f}s); the trial was killed", outcome.wall_s);
    } else if (outcome.spawn_failed) {
        r.status = TrialStatus::failed;
        r.reason = "the trial process could not be started: " + outcome.stderr_tail;
    } else if (outcome.term_signal == 0 && outcome.exit_code == kTrialExitOom) {
        r.status = TrialStatus::oom;
        r.reason = fmt::format("a rank ran out of memory and ended the job before its result line arrived ({}): {}",
                               outcome.describe(), last_line(outcome.stderr_tail, "trial oom: "));
    } else {
        r.status = TrialStatus::failed;
        r.reason = fmt::format("the trial ended without a result ({})", outcome.describe());
    }
    return r;
}

}  // namespace

std::vector<std::string> trial_argv(const TrialConfig& config, const SweepSpec& spec,
                                    const std::vector<std::string>& trial_program) {
    std::vector<std::string> program = trial_program;
    program.insert(program.end(), {"--config", nlohmann::json(config).dump(), "--json"});
    // The same thread count the estimator was given (see cpu_threads_per_rank).
    if (spec.hardware.backend == BackendKind::cpu)
        program.insert(program.end(), {"--threads", std::to_string(cpu_threads_per_rank(spec))});
    const Launcher launcher = choose_launcher(spec.trial.launcher, config.world_size);
    return launch_command(launcher, config.world_size, program);
}

TrialResult interpret_outcome(const ProcessOutcome& outcome, const TrialConfig& claimed,
                              const std::optional<Estimate>& estimate) {
    std::optional<TrialResult> parsed = outcome.timed_out ? std::nullopt : parse_last_line(outcome.stdout_text);
    TrialResult r = parsed ? std::move(*parsed) : without_result(outcome);
    if (parsed && r.status == TrialStatus::ok && (outcome.term_signal != 0 || outcome.exit_code != 0)) {
        // A result followed by a crash (a rank dying at exit) is not a clean run.
        r.status = TrialStatus::failed;
        r.reason = fmt::format("reported ok but the process ended badly ({})", outcome.describe());
    }
    for (double loss : r.losses)
        if (r.status == TrialStatus::ok && !std::isfinite(loss)) {
            r.status = TrialStatus::failed;
            r.reason = "the loss became NaN or infinite";
        }
    r.config = claimed;
    // The estimate the sweep planned this trial with (its settings: margin,
    // calibration) is the one whose error the store shows; the trial's own
    // (default settings) only stands in when the driver had none.
    if (estimate) r.estimate = estimate;
    return r;
}

}  // namespace tune
