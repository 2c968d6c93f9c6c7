#include "core/trial_protocol.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tune {
namespace {

// The last line of `text` that starts with `prefix`, without it ("" if none).
std::string last_line(const std::string& text, std::string_view prefix) {
    const std::size_t at = text.rfind(prefix);
    if (at == std::string::npos) return {};
    const std::size_t end = text.find('\n', at);
    return text.substr(at + prefix.size(), end == std::string::npos ? std::string::npos : end - at - prefix.size());
}

TrialResult missing_result(const ChildEnd& end) {
    TrialResult r;
    if (end.timed_out) {
        r.status = TrialStatus::timeout;
        r.reason = fmt::format("no result within the trial timeout ({:.0f}s); the trial was killed", end.wall_s);
    } else if (end.spawn_failed) {
        r.status = TrialStatus::failed;
        r.reason = "the trial process could not be started: " + end.stderr_tail;
    } else if (end.term_signal == 0 && end.exit_code == kTrialExitOom) {
        r.status = TrialStatus::oom;
        r.reason = fmt::format("a rank ran out of memory and ended the job before its result line arrived ({}): {}",
                               end.how, last_line(end.stderr_tail, "trial oom: "));
    } else {
        r.status = TrialStatus::failed;
        r.reason = fmt::format("the trial ended without a result ({})", end.how);
    }
    return r;
}

}  // namespace

int trial_exit_code(TrialStatus s) {
    switch (s) {
        case TrialStatus::ok:
            return kTrialExitOk;
        case TrialStatus::oom:
            return kTrialExitOom;
        case TrialStatus::invalid:
            return kTrialExitInvalid;
        default:
            return kTrialExitFailed;
    }
}

std::vector<std::string> trial_child_argv(std::vector<std::string> program, const TrialConfig& config,
                                          const TrialChildFlags& flags) {
    program.insert(program.end(), {"--config", nlohmann::json(config).dump()});
    if (flags.json) program.emplace_back("--json");
    if (!flags.init.empty()) program.insert(program.end(), {"--init", flags.init});
    if (!flags.tokens.empty()) program.insert(program.end(), {"--tokens", flags.tokens});
    if (flags.threads > 0) program.insert(program.end(), {"--threads", std::to_string(flags.threads)});
    if (flags.backend) program.insert(program.end(), {"--backend", std::string(to_string(*flags.backend))});
    if (flags.force) program.emplace_back("--force");
    if (flags.no_graphs) program.emplace_back("--no-graphs");
    if (!flags.init_adapter.empty()) program.insert(program.end(), {"--init-adapter", flags.init_adapter});
    if (!flags.save_adapter.empty()) program.insert(program.end(), {"--save-adapter", flags.save_adapter});
    if (flags.noise.max_cv > 0)
        program.insert(program.end(), {"--max-cv", fmt::format("{}", flags.noise.max_cv), "--max-steps",
                                       std::to_string(flags.noise.max_steps)});
    return program;
}

std::string result_line(const TrialResult& r) { return nlohmann::json(r).dump(); }

std::optional<TrialResult> parse_result_line(const std::string& stdout_text) {
    const std::size_t end = stdout_text.find_last_not_of(" \t\r\n");
    if (end == std::string::npos) return std::nullopt;
    const std::size_t newline = stdout_text.rfind('\n', end);
    const std::size_t start = newline == std::string::npos ? 0 : newline + 1;
    try {
        return nlohmann::json::parse(stdout_text.substr(start, end - start + 1)).get<TrialResult>();
    } catch (const std::exception&) {  // not JSON, or not a TrialResult: no result line
        return std::nullopt;
    }
}

TrialResult read_child_result(const std::string& stdout_text, const ChildEnd& end, const TrialConfig& claimed) {
    // After a timeout the child was killed: whatever it printed is not its verdict.
    std::optional<TrialResult> parsed = end.timed_out ? std::nullopt : parse_result_line(stdout_text);
    TrialResult r = parsed ? std::move(*parsed) : missing_result(end);
    if (parsed && r.status == TrialStatus::ok && (end.term_signal != 0 || end.exit_code != 0)) {
        // A result followed by a crash (a rank dying at exit) is not a clean run.
        r.status = TrialStatus::failed;
        r.reason = fmt::format("reported ok but the process ended badly ({})", end.how);
    }
    for (double loss : r.losses)
        if (r.status == TrialStatus::ok && !std::isfinite(loss)) {
            r.status = TrialStatus::failed;
            r.reason = "the loss became NaN or infinite";
        }
    r.config = claimed;
    return r;
}

}  // namespace tune
